"""The web pages in a real browser: headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium) against a real docsctl server on each backend, indexed with the ChimeraX corpus, the sample
docs and pages written to attack the pages (web_fixtures.py).

On SQLite the server is `docsctl ui`, on OpenSearch `docsctl serve --transport http` (the pages beside
the MCP endpoint), so both ways of serving them are covered. Every test saves a screenshot of each page
it visits under its tmp_path and fails on any console error the page logged (level SEVERE: a script
error, a resource that failed to load, a Content-Security-Policy violation).

DOCSCTL_SCREENSHOT_DIR=docs/images also writes the README's two screenshots there (search, document).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from corpus_fixtures import BACKENDS, backend_settings, index_folder, settings_env
from processes import stop
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait
from web_fixtures import HOSTILE_WORDS, IMG_TAG, SCRIPT_TITLE, write_hostile_pages

from docsctl.store import open_store

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("DOCSCTL_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("DOCSCTL_TEST_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
START_TIMEOUT_S = 90
COLOR = "user/commands/color.html"
WINDOW = (1200, 900)
README_WINDOW = (1000, 800)


@dataclass
class WebServer:
    backend: str
    url: str  # ends with /


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(url + "sources", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    pytest.fail(f"the server did not answer at {url} within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module", params=BACKENDS)
def web_server(
    request: pytest.FixtureRequest, corpora_dir, embedder, embedding_cache_dir, tmp_path_factory
) -> Iterator[WebServer]:
    backend = request.param
    data = tmp_path_factory.mktemp(f"web-{backend}")
    settings = backend_settings(request, backend, data, embedding_cache_dir)
    index_folder(settings, embedder, corpora_dir / "chimerax", "chimerax")
    index_folder(settings, embedder, REPO / "samples" / "docs", "samples")
    index_folder(settings, embedder, write_hostile_pages(data / "hostile"), "hostile")
    port = _free_port()
    env = settings_env(settings)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = (
        ["ui", "--port", str(port)] if backend == "sqlite" else ["serve", "--transport", "http", "--port", str(port)]
    )
    log = data / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "docsctl.cli", *command], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_up(url, process, log)
        yield WebServer(backend, url)
    finally:
        stop(process, timeout=10)
        open_store(settings).drop()


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            f"no Chromium at {CHROMIUM} or no chromedriver at {CHROMEDRIVER}: "
            "apt-get install chromium chromium-driver (.ci/run does)",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size={},{}".format(*WINDOW),
    ):
        options.add_argument(argument)
    options.add_argument("--disable-gpu")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: WebDriver, web_server: WebServer, tmp_path: Path) -> Iterator[Page]:
    browser.get_log("browser")  # what earlier tests left
    visit = Page(browser, web_server, tmp_path)
    yield visit
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, f"console errors: {errors}"
    assert not visit.alert_shown(), "a script from the index ran"


class Page:
    """The browser on one server, saving a screenshot of each page it shows."""

    def __init__(self, driver: WebDriver, server: WebServer, shots: Path) -> None:
        self.driver, self.server, self.shots = driver, server, shots

    def open(self, address: str, **params: str) -> None:
        self.driver.get(self.server.url + address.lstrip("/") + (("?" + urlencode(params)) if params else ""))
        self.wait_for("main")

    def wait_for(self, css: str, timeout: float = 15) -> None:
        WebDriverWait(self.driver, timeout).until(ready.presence_of_element_located((By.CSS_SELECTOR, css)))

    def all(self, css: str) -> list:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def one(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def screenshot(self, name: str, readme: bool = False, scroll_to: str | None = None) -> Path:
        path = self.shots / f"{self.server.backend}-{name}.png"
        self.driver.save_screenshot(str(path))
        assert path.stat().st_size > 5000, "an empty page"
        target = os.environ.get("DOCSCTL_SCREENSHOT_DIR")
        if readme and target and self.server.backend == "sqlite":
            # Smaller, from the top of the page: the README's copy stays well under 150 KB.
            self.driver.set_window_size(*README_WINDOW)
            if scroll_to:
                self.driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", scroll_to)
            else:
                self.driver.execute_script("window.scrollTo(0, 0)")
            Path(target).mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(Path(target) / f"web-{name}.png"))
            self.driver.set_window_size(*WINDOW)
        return path

    def focused(self):
        return self.driver.switch_to.active_element

    def focus_arrives_on(self, element_id: str, timeout: float = 10) -> bool:
        """Whether the element gets the focus: autofocus is applied after the page is parsed, which a busy
        machine can delay past the moment `main` is present."""
        try:
            WebDriverWait(self.driver, timeout).until(lambda _: self.focused().get_attribute("id") == element_id)
        except TimeoutException:
            return False
        return True

    def alert_shown(self) -> bool:
        try:
            self.driver.switch_to.alert.dismiss()
        except NoAlertPresentException:
            return False
        return True


# -- the pages --------------------------------------------------------------------------------------


def test_search_then_a_facet_click_then_the_next_page(page: Page):
    page.open("/")
    assert page.focus_arrives_on("q"), "the search box has the focus on arrival"
    page.focused().send_keys("color", Keys.ENTER)
    page.wait_for("#summary")
    hits = page.all("li.hit")
    assert len(hits) == 10
    assert page.all("li.hit mark"), "highlighted matches"
    assert page.one("li.hit .result-link").text
    assert "ms" in page.one("#summary .took").text
    page.screenshot("search", readme=True)

    chosen = page.all('nav[aria-labelledby="facet-source"] a')[0]
    source = chosen.find_element(By.CSS_SELECTOR, ".facet-value").text
    chosen.click()
    page.wait_for('nav[aria-labelledby="facet-source"] a[aria-current="true"]')
    assert f"source={quote(source)}" in page.driver.current_url
    wheres = [element.text for element in page.all("li.hit .where")]
    assert wheres and all(f" {source}:" in where for where in wheres)
    page.screenshot("search-facet")

    page.one('.pager a[rel="next"]').click()
    page.wait_for('ol.hits[start="11"]')
    assert "page=2" in page.driver.current_url and f"source={quote(source)}" in page.driver.current_url
    page.screenshot("search-page-2")


def test_keyboard_alone_searches_and_opens_a_result(page: Page):
    page.open("/")
    assert page.focus_arrives_on("q")
    page.focused().send_keys("surface color by chain", Keys.ENTER)
    page.wait_for("#summary")
    body = page.one("body")
    body.send_keys(Keys.TAB)
    assert page.focused().get_attribute("class") == "skip-link"
    for _ in range(60):  # past the navigation, the form and the filters, to the first result
        page.focused().send_keys(Keys.TAB)
        if page.focused().get_attribute("class") == "result-link":
            break
    else:
        pytest.fail("Tab never reached a result")
    target = page.focused().get_attribute("href")
    page.focused().send_keys(Keys.ENTER)
    page.wait_for("section.chunk")
    assert page.driver.current_url == target
    body = page.one("body")
    body.send_keys("/")  # not on the search page: nothing happens, and no error either
    page.screenshot("keyboard-document")


def test_search_as_you_type_updates_results_and_the_address(page: Page):
    page.open("/")
    assert page.focus_arrives_on("q")
    page.focused().send_keys("transparency")
    page.wait_for("#summary")
    WebDriverWait(page.driver, 10).until(lambda driver: "q=transparency" in driver.current_url)
    assert page.all("li.hit")


def test_the_document_view_draws_chunks_and_shows_the_embedded_text(page: Page):
    page.open("/doc", path=COLOR, source="chimerax")
    chunks = page.all("section.chunk")
    assert len(chunks) > 3
    first = chunks[0]
    for label in ("Anchor", "Lines", "Length", "Names", "Chunk id"):
        assert label.lower() in first.find_element(By.CSS_SELECTOR, ".chunk-facts").text.lower()
    page.screenshot("document", readme=True, scroll_to="#chunk-0")
    embedded = first.find_element(By.CSS_SELECTOR, "details.embedded pre")
    assert not embedded.is_displayed()
    first.find_element(By.CSS_SELECTOR, "summary").click()
    assert embedded.is_displayed() and embedded.text.startswith(page.one("h1").text)  # the title comes first
    page.screenshot("document-embedded-text")


def test_explain_shows_ranks_scores_and_a_chart(page: Page):
    page.open("/explain", q="color by chain", path=COLOR, source="chimerax")
    assert "rank" in page.one("#verdict").text
    assert len(page.all("figure.chart svg rect")) >= 2
    rows = [row.text for row in page.all("table.ranks tbody tr")]
    assert any(row.startswith("BM25") for row in rows) and any(row.startswith("k-NN") for row in rows)
    assert any(row.startswith("Fused") for row in rows)
    page.screenshot("explain")


def test_sources_lists_every_source_with_its_runs(page: Page):
    page.open("/sources")
    names = [cell.text for cell in page.all("table.sources tbody th")]
    assert sorted(names) == ["chimerax", "hostile", "samples"]
    assert "latin1.md" in page.one("main").text  # skipped, with its reason
    page.screenshot("sources")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_light_and_dark_follow_the_system_setting(page: Page, scheme: str):
    feature = {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", feature)
    try:
        page.open("/", q="color")
        background = page.driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        red, green, blue = (int(part) for part in background[background.index("(") + 1 : -1].split(",")[:3])
        assert (red + green + blue < 150) == (scheme == "dark"), background
        page.screenshot(f"search-{scheme}")
    finally:
        page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_hostile_pages_render_as_text(page: Page):
    page.open("/", q=HOSTILE_WORDS, source="hostile")
    titles = [element.text for element in page.all("li.hit .result-link")]
    assert SCRIPT_TITLE in titles
    assert IMG_TAG in page.one("#results").text
    page.screenshot("hostile-search")
    page.open("/doc", path="script-title.txt", source="hostile")
    assert page.one("h1").text == SCRIPT_TITLE
    assert IMG_TAG in page.one("section.chunk pre").text
    page.screenshot("hostile-document")
    injected = page.driver.execute_script(
        "return document.querySelectorAll('main img, main script, main svg, [onerror], [onload], [onmouseover]').length"
    )
    assert injected == 0
