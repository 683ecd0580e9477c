"""What the web page tests index: the sample docs, and pages written to attack the pages that show them.

Imported by test_web.py (in-process, Starlette's TestClient) and test_web_browser.py (a real server and
a real browser).
"""

from __future__ import annotations

from pathlib import Path

SCRIPT_TITLE = "<script>alert(1)</script>"
IMG_TAG = "<img src=x onerror=alert(2)>"
HOSTILE_WORDS = "hostile widgets"  # a query that finds the hostile pages

HOSTILE_MARKDOWN = f"""# {SCRIPT_TITLE}

This page about {HOSTILE_WORDS} holds {IMG_TAG} in its text, and <em>markup</em> <b>that must stay text</b>.

## Second {IMG_TAG} heading

More about {HOSTILE_WORDS}: a link [click](javascript:alert(3)) and <a href="javascript:alert(4)">another</a>.
"""

HOSTILE_TEXT = f"""{SCRIPT_TITLE}

Plain text about {HOSTILE_WORDS}: {IMG_TAG} and <svg onload=alert(7)></svg> are words here, not markup.

A second paragraph about {HOSTILE_WORDS} with a "quoted" &amp; entity and <em>fake highlight</em>.
"""

HOSTILE_HTML = f"""<!doctype html>
<html><head><title>&lt;script&gt;alert(1)&lt;/script&gt; in an HTML title</title></head>
<body><main>
<h1>&lt;script&gt;alert(1)&lt;/script&gt; in an HTML title</h1>
<p>An HTML page about {HOSTILE_WORDS} whose text shows &lt;img src=x onerror=alert(2)&gt; literally.</p>
<h2 id="more">&lt;b onmouseover=alert(5)&gt;hover&lt;/b&gt;</h2>
<p>The {HOSTILE_WORDS} section with &lt;/textarea&gt;&lt;svg onload=alert(6)&gt; in it.</p>
</main></body></html>
"""


def write_hostile_pages(folder: Path) -> Path:
    """A folder of pages whose titles and text hold markup, and a file the indexer skips (not UTF-8)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script-title.md").write_text(HOSTILE_MARKDOWN, encoding="utf-8")
    (folder / "script-title.txt").write_text(HOSTILE_TEXT, encoding="utf-8")
    (folder / "entities.html").write_text(HOSTILE_HTML, encoding="utf-8")
    (folder / "latin1.md").write_bytes("# Caf\xe9\n\nNot UTF-8 at all: \xe9\xe8\xff.\n".encode("latin-1"))
    return folder
