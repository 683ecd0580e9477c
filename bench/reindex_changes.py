"""Re-index cost when nothing changed and when one file changed, for both corpora, on one backend.

    python bench/reindex_changes.py [--backend sqlite|opensearch] [--opensearch-url URL] [--out FILE]

Copies ../shared/corpora/<corpus> to a temporary folder (the corpora stay read-only), indexes it once
(vectors come from the embedding cache when present), then measures in the same run:
  - a re-index with no change: seconds, documents re-extracted, chunks re-embedded;
  - a re-index after appending a paragraph to one file: the same figures.
Prints JSON (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import uuid
from functools import partial
from pathlib import Path

from docsctl.config import load_settings
from docsctl.embedding import EmbeddingCache, embedder_for
from docsctl.indexer.pipeline import reindex
from docsctl.indexer.sources import SourceTarget
from docsctl.store import open_store

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
CHANGED = {"chimerax": "user/commands/color.html", "holoviz": "panel/examples/reference/widgets/Tabulator.ipynb"}


def touch(path: Path) -> None:
    """Append a paragraph in the file's own format, so exactly one section of one document changes."""
    marker = f"Benchmark edit {uuid.uuid4().hex}."
    if path.suffix == ".ipynb":
        notebook = json.loads(path.read_text(encoding="utf-8"))
        notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": [marker]})
        path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    elif path.suffix == ".html":
        path.write_text(path.read_text(encoding="utf-8").replace("</body>", f"<p>{marker}</p></body>"))
    else:
        path.write_text(path.read_text(encoding="utf-8") + f"\n\n{marker}\n")


def figures(summary) -> dict:  # noqa: ANN001 - ReindexSummary
    return {
        "seconds": round(summary.seconds, 3),
        "documents_reextracted": summary.added + summary.changed,
        "documents_unchanged": summary.unchanged,
        "chunks_written": summary.chunks_written,
        "chunks_reembedded": summary.chunks_embedded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "opensearch"])
    parser.add_argument("--opensearch-url", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="docsctl-bench-"))
    settings = load_settings(
        backend=args.backend,
        opensearch_url=args.opensearch_url,
        data_dir=work / "data",
        index_alias=f"bench-{uuid.uuid4().hex[:8]}",
    )
    store, embedder = open_store(settings), embedder_for(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    results: dict = {"backend": args.backend}
    try:
        for corpus, changed in CHANGED.items():
            root = work / corpus
            shutil.copytree(CORPORA / corpus, root)
            target = SourceTarget(name=corpus, root=root)
            run = partial(reindex, store, embedder, [target], lock_path=settings.lock_path, cache=cache)
            first = run()
            no_change = run()
            touch(root / changed)
            one_file = run()
            results[corpus] = {
                "files": first.files_seen,
                "chunks": first.chunks_written,
                "initial_index": figures(first),
                "no_change": figures(no_change),
                "one_file_changed": {"file": changed, **figures(one_file)},
            }
            print(f"{corpus}: {json.dumps(results[corpus]['no_change'])}", file=sys.stderr)
    finally:
        cache.close()
        store.drop()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
