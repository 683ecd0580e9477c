"""`docsctl dashboards import`: load docsctl's saved objects into OpenSearch Dashboards.

The saved objects (index patterns on the chunk alias and on `<alias>-runs`, the saved search "Chunks",
visualizations and the "docsctl index" dashboard) live in docker/dashboards/*.ndjson, the format of
the Dashboards saved-objects export. Importing posts each file to the saved-objects import API with
overwrite=true, so importing again replaces the earlier copies (their ids are fixed). When the alias
in use is not the default one, the index patterns' titles are rewritten to it on the way.

Requests are built (`import_request`) apart from sending them (`send`), with the standard library:
Dashboards is a web app, not an OpenSearch client's business.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from base64 import b64encode
from pathlib import Path
from typing import Annotated, Any

import typer

from docsctl.cli.common import ConfigOption, print_json, settings_from, user_errors
from docsctl.config import Settings
from docsctl.errors import ConfigError, DocsctlError

app = typer.Typer(
    help="OpenSearch Dashboards for inspecting the index: chunks, lengths, sources, reindex runs.",
    no_args_is_help=True,
)

DEFAULT_URL = "http://127.0.0.1:5601"
DEFAULT_ALIAS = "docsctl-chunks"
# docker/dashboards, shipped inside the package (docsctl/dashboards links to it in a checkout).
SAVED_OBJECTS = Path(__file__).resolve().parents[1] / "dashboards"
IMPORT_PATH = "/api/saved_objects/_import"
DASHBOARD_ID = "docsctl-index"


def saved_object_files(folder: Path = SAVED_OBJECTS) -> list[Path]:
    files = sorted(folder.glob("*.ndjson")) if folder.is_dir() else []
    if not files:
        raise ConfigError(f"no saved objects (*.ndjson) in {folder}: pass --file docker/dashboards/docsctl.ndjson")
    return files


def retarget(ndjson: bytes, alias: str) -> bytes:
    """The saved objects with their index patterns' titles moved from the default alias to `alias`
    (and from `<default>-runs` to `<alias>-runs`); ids and references stay as they are."""
    if alias == DEFAULT_ALIAS:
        return ndjson
    titles = {DEFAULT_ALIAS: alias, f"{DEFAULT_ALIAS}-runs": f"{alias}-runs"}
    lines = []
    for line in ndjson.decode("utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            attributes = item.get("attributes", {})
            if item.get("type") == "index-pattern" and attributes.get("title") in titles:
                attributes["title"] = titles[attributes["title"]]
            line = json.dumps(item, ensure_ascii=False)
        lines.append(line)
    return ("\n".join(lines) + "\n").encode("utf-8")


def import_request(
    url: str, ndjson: bytes, filename: str, *, user: str | None = None, password: str | None = None
) -> urllib.request.Request:
    """POST <url>/api/saved_objects/_import?overwrite=true: the NDJSON as the multipart field `file`,
    with the `osd-xsrf` header Dashboards asks of every API write."""
    boundary = f"docsctl-{uuid.uuid4().hex}"
    body = b"".join(
        [
            f"--{boundary}\r\n".encode(),
            f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'.encode(),
            b"Content-Type: application/ndjson\r\n\r\n",
            ndjson,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    headers = {
        "osd-xsrf": "true",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Accept": "application/json",
        "User-Agent": "docsctl",
    }
    if user:
        headers["Authorization"] = "Basic " + b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
    return urllib.request.Request(f"{url.rstrip('/')}{IMPORT_PATH}?overwrite=true", data=body, headers=headers)


def _opener(url: str, settings: Settings) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = []
    if url.startswith("https:"):
        context = ssl.create_default_context(cafile=settings.opensearch_ca_file)
        if not settings.opensearch_verify:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        handlers.append(urllib.request.HTTPSHandler(context=context))
    if url.startswith(("http://127.0.0.1", "http://localhost")):
        handlers.append(urllib.request.ProxyHandler({}))  # never through a proxy to this machine
    return urllib.request.build_opener(*handlers)


def send(request: urllib.request.Request, opener: urllib.request.OpenerDirector, timeout: float = 60) -> dict[str, Any]:
    """Send an import request; DocsctlError, in one line, for anything but a complete success."""
    url = request.full_url.split(IMPORT_PATH)[0]
    try:
        with opener.open(request, timeout=timeout) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message") or exc.reason
        except (ValueError, AttributeError, OSError):
            message = exc.reason
        raise DocsctlError(f"OpenSearch Dashboards at {url} refused the import ({exc.code}): {message}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise DocsctlError(
                f"cannot reach OpenSearch Dashboards at {url}: start it with "
                "`docker compose -f docker/docker-compose.yml up -d`, or pass --url"
            ) from None
        raise DocsctlError(f"cannot reach OpenSearch Dashboards at {url}: {reason}") from None
    except (OSError, ValueError) as exc:
        raise DocsctlError(f"no usable answer from OpenSearch Dashboards at {url}: {exc}") from None
    if not answer.get("success"):
        errors = answer.get("errors") or []
        first = errors[0] if errors else {}
        detail = f"{first.get('type')} {first.get('id')}: {first.get('error')}" if first else json.dumps(answer)
        raise DocsctlError(f"OpenSearch Dashboards at {url} imported nothing: {len(errors)} errors, first {detail}")
    return answer


@app.command("import")
def import_(
    *,
    url: Annotated[
        str, typer.Option("--url", envvar="DOCSCTL_DASHBOARDS_URL", help="OpenSearch Dashboards' address.")
    ] = DEFAULT_URL,
    file: Annotated[
        list[Path] | None,
        typer.Option("--file", help="Saved objects to import (default: docker/dashboards/*.ndjson).", dir_okay=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print Dashboards' answers as JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """Import docsctl's index patterns, saved search, visualizations and dashboard into OpenSearch
    Dashboards, replacing earlier copies. Index patterns follow index_alias; with opensearch_user set,
    the same credentials (and opensearch_ca_file for https) are used.

    Example: docsctl dashboards import --url http://localhost:5601
    """
    with user_errors():
        settings = settings_from(config)
        files = list(file) if file else saved_object_files()
        opener = _opener(url, settings)
        answers = []
        for path in files:
            try:
                ndjson = retarget(path.read_bytes(), settings.index_alias)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot read saved objects from {path}: {exc}") from None
            request = import_request(
                url, ndjson, path.name, user=settings.opensearch_user, password=settings.opensearch_password
            )
            answers.append({"file": str(path), **send(request, opener)})
    if as_json:
        print_json({"url": url, "imports": answers})
        return
    count = sum(int(answer.get("successCount", 0)) for answer in answers)
    typer.echo(f"imported {count} saved objects into {url}")
    typer.echo(f"dashboard: {url.rstrip('/')}/app/dashboards#/view/{DASHBOARD_ID}")
