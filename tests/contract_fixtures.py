"""Sample documentation chunks and per-backend helpers for tests/test_contract.py.

The samples are hand-written after the ChimeraX and Panel docs: two sources, three categories, two
versions of one Panel page, one path present in both sources, code identifiers (`SelectEditor`,
`add_filter`, `pn.state.onload`, `--transparency`) and prose ("color protein by chain").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from docsctl.models import Chunk, IndexMeta

INDEXED_AT = "2025-06-01T12:00:00+00:00"


@dataclass(frozen=True)
class Doc:
    source: str
    path: str
    title: str
    category: str
    sections: list[tuple[str, str]]  # (section heading, content)
    version: str = ""
    names: tuple[str, ...] = ()
    doc_type: str = "html"
    content_hash: str = "h1"
    name_anchors: dict[int, list[list[str]]] = field(default_factory=dict)  # by chunk index

    @property
    def doc_id(self) -> str:
        return f"{self.source}:{self.version}:{self.path}"

    def chunks(self) -> list[Chunk]:
        return [
            Chunk(
                chunk_id=f"{self.doc_id}#{index}",
                doc_id=self.doc_id,
                source=self.source,
                path=self.path,
                title=self.title,
                breadcrumb=[section] if section != self.title else [],
                section=section,
                category=self.category,
                doc_type=self.doc_type,
                chunk_index=index,
                content=content,
                content_hash=self.content_hash,
                start_line=1 + 10 * index,
                end_line=9 + 10 * index,
                names=list(self.names),
                url=f"https://example.org/{self.source}/{self.path}",
                anchor=section.lower().replace(" ", "-"),
                name_anchors=copy.deepcopy(self.name_anchors.get(index, [])),
                version=self.version,
                indexed_at=INDEXED_AT,
            )
            for index, (section, content) in enumerate(self.sections)
        ]


DOCS = [
    Doc(
        "chimerax",
        "user/commands/color.html",
        "Command: color",
        "reference",
        [
            (
                "Usage",
                "Usage: color spec colorname [ what ] [ target string ] [ transparency percent ]. The color "
                "command changes the color of atoms, bonds, cartoons and surfaces.",
            ),
            (
                "Coloring by chain",
                "Coloring by chain: color bychain gives each chain of a protein its own distinct hue, so the "
                "subunits of a complex are easy to tell apart. Use color bypolymer to match identical chains.",
            ),
            (
                "Coloring by element",
                "Coloring by element: color byhetero keeps carbon atoms as they are and paints nitrogen blue, "
                "oxygen red and sulfur yellow.",
            ),
        ],
        names=("color",),
    ),
    Doc(
        "chimerax",
        "user/commands/transparency.html",
        "Command: transparency",
        "reference",
        [
            (
                "Usage",
                "Usage: transparency spec percent [ target string ]. Make surfaces, cartoons or atoms partly "
                "transparent so that what lies behind them shows through; 0 is opaque, 100 fully clear.",
            ),
        ],
        names=("transparency",),
    ),
    Doc(
        "chimerax",
        "user/commands/save.html",
        "Command: save",
        "reference",
        [
            (
                "Image options",
                "Saving images: save image.png width 1200 supersample 3 writes the current view. With "
                "--transparency the background is left clear in PNG and TIFF images.",
            ),
            (
                "Session files",
                "Session files (.cxs) record the whole scene: models, their display styles, the camera and "
                "the window layout. Open a session file again to continue where you stopped.",
            ),
        ],
        names=("save",),
    ),
    Doc(
        "chimerax",
        "user/commands/lighting.html",
        "Command: lighting",
        "reference",
        [
            (
                "Usage",
                "Usage: lighting [ default | full | soft | simple | flat ]. Full lighting adds ambient "
                "occlusion and shadows; soft lighting uses many directional lights.",
            ),
            (
                "Depth cueing",
                "Depth cueing dims parts of the scene that are farther from the viewer, which gives a sense of "
                "depth in still images.",
            ),
        ],
        names=("lighting",),
    ),
    Doc(
        "chimerax",
        "user/commands/cartoon.html",
        "Command: cartoon",
        "reference",
        [
            (
                "Usage",
                "Usage: cartoon spec [ suppressBackboneDisplay true | false ]. Cartoons show the backbone of a "
                "protein or nucleic acid as a smooth tube, helices as spirals and strands as arrows.",
            ),
            (
                "Cartoon style",
                "Cartoon style: cartoon style width 2 thickness 0.4 changes the cross-section; xsection oval "
                "rounds the edges of helices.",
            ),
        ],
        names=("cartoon",),
    ),
    Doc(
        "chimerax",
        "user/tutorials/getting-started.html",
        "Getting started with ChimeraX",
        "tutorial",
        [
            (
                "Opening a structure",
                "Opening a structure: type open 2bbv in the command line to fetch an entry from the Protein "
                "Data Bank. The model appears in the graphics window.",
            ),
            (
                "Moving the model",
                "Moving the model: drag with the left mouse button to rotate, scroll to zoom, and drag with "
                "the middle button to translate.",
            ),
            (
                "Hiding and showing",
                "Hiding and showing: the commands show and hide control which atoms, cartoons and surfaces "
                "are displayed.",
            ),
        ],
    ),
    Doc(
        "chimerax",
        "devel/writing_bundles.rst",
        "Writing bundles",
        "api",
        [
            (
                "Bundle layout",
                "Bundle layout: a ChimeraX bundle is a Python package with a bundle_info.xml file that "
                "declares its commands, tools and file formats.",
            ),
            (
                "Registering commands",
                "Registering commands: implement register_command in your BundleAPI subclass and call "
                "chimerax.core.commands.register with a CmdDesc describing the arguments.",
            ),
        ],
        names=("BundleAPI",),
        doc_type="rst",
    ),
    Doc(
        "chimerax",
        "index.md",
        "ChimeraX documentation",
        "tutorial",
        [
            (
                "ChimeraX documentation",
                "Welcome to the ChimeraX documentation: the User Guide explains commands and tools, the "
                "Programmer Guide explains how to extend the program.",
            ),
        ],
        doc_type="markdown",
    ),
    Doc(
        "panel",
        "reference/widgets/Tabulator.md",
        "Tabulator",
        "reference",
        [
            (
                "Editors",
                "Editors: each column of a Tabulator can have its own editor. A SelectEditor offers a dropdown "
                "of allowed values, a NumberEditor accepts numbers only.",
            ),
            (
                "Filtering",
                "Filtering: call table.add_filter(widget, 'column') to link a widget to a column so that only "
                "matching rows stay visible.",
            ),
            (
                "Pagination",
                "Pagination: set pagination='remote' and page_size=25 to send only the visible page of a large "
                "DataFrame to the browser.",
            ),
        ],
        version="1.5",
        names=("Tabulator",),
        doc_type="markdown",
    ),
    Doc(
        "panel",
        "reference/widgets/Tabulator.md",
        "Tabulator",
        "reference",
        [
            (
                "Editors",
                "Editors: in this release cells are edited with the default text editor only; set "
                "editors={'column': None} to make a column read-only.",
            ),
            (
                "Pagination",
                "Pagination: set pagination='local' to split long tables into pages in the browser.",
            ),
        ],
        version="1.4",
        names=("Tabulator",),
        doc_type="markdown",
    ),
    Doc(
        "panel",
        "how_to/callbacks/load.md",
        "Defer work until the page has loaded",
        "tutorial",
        [
            (
                "Onload callbacks",
                "Onload callbacks: register a function with pn.state.onload(callback) and Panel runs it once the "
                "page has rendered, so the app appears at once and slow queries fill in later.",
            ),
            (
                "Loading indicators",
                "Loading indicators: set loading=True on a component to show a spinner over it while the "
                "callback runs.",
            ),
        ],
        version="1.5",
        doc_type="markdown",
    ),
    Doc(
        "panel",
        "api/config.md",
        "pn.config",
        "api",
        [
            (
                "Settings",
                "Settings: pn.config holds global options such as sizing_mode, throttled and design. Change "
                "them with pn.extension(sizing_mode='stretch_width').",
            ),
            (
                "Notifications",
                "Notifications: pn.extension(notifications=True) enables toast messages, sent with "
                "pn.state.notifications.info('Saved').",
            ),
        ],
        version="1.5",
        names=("pn.config", "pn.state.notifications"),
        doc_type="markdown",
        name_anchors={1: [["pn.state.notifications", "panel.io.state.notifications"]]},
    ),
    Doc(
        "panel",
        "reference/panes/Markdown.md",
        "Markdown",
        "reference",
        [
            (
                "Markdown pane",
                "The Markdown pane renders Markdown text with tables and code highlighting: "
                "pn.pane.Markdown('# Title').",
            ),
            (
                "Styling",
                "Styling: pass stylesheets or css_classes to change fonts and spacing of the rendered text.",
            ),
        ],
        version="1.5",
        names=("Markdown", "pn.pane.Markdown"),
        doc_type="markdown",
    ),
    Doc(
        "panel",
        "index.md",
        "Panel documentation",
        "tutorial",
        [
            (
                "Panel documentation",
                "Welcome to Panel: build dashboards and data apps in pure Python, from notebooks or scripts, "
                "and deploy them as web servers.",
            ),
        ],
        version="1.5",
        doc_type="markdown",
    ),
]

META = IndexMeta(mapping_version=1, model="all-MiniLM-L6-v2", dimension=384)


def chunk_id(source: str, path: str, index: int, version: str = "") -> str:
    return f"{source}:{version}:{path}#{index}"


def fresh(chunks: list[Chunk]) -> list[Chunk]:
    """Deep copies, so a test that edits chunks never changes the session's samples."""
    return copy.deepcopy(chunks)


class SqliteHarness:
    """What the contract needs to know about SqliteStore beyond the protocol."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def partial_indexes(self, store: object) -> list[str]:
        """Half-built indexes left behind (none may survive a failed rebuild)."""
        return sorted(str(p) for p in self.path.parent.glob(f"{self.path.name}.building-*"))


class OpenSearchHarness:
    """Physical indices of the store's alias that the alias does not point to."""

    def partial_indexes(self, store: object) -> list[str]:
        client, alias = store.client, store.alias  # type: ignore[attr-defined]
        found = client.indices.get(index=f"{alias}-*", ignore_unavailable=True, allow_no_indices=True)
        live = set(client.indices.get_alias(name=alias)) if client.indices.exists_alias(name=alias) else set()
        return sorted(set(found) - live)
