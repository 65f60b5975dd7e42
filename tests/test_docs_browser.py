"""The built docs site in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, found or
installed as tests/test_report_browser.py does), driven with Selenium. The site is served over HTTP on 127.0.0.1
(Material's search loads its index with fetch, which a file:// page may not do); typing "best-of-n" into
Material's search lists the search page, and clicking it opens the page."""

from __future__ import annotations

import functools
import http.server
import threading
from urllib.parse import parse_qs, urlparse

import pytest

from headless_chromium import chromium_driver
from test_docs import build_site

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    site = tmp_path_factory.mktemp("docs") / "site"
    build_site(site)
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    yield from chromium_driver(tmp_path_factory)


def test_search_for_best_of_n_finds_the_search_page(browser, site_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(site_url)
    assert "proctor" in browser.title
    either = "label.md-search__icon, input.md-search__input"
    WebDriverWait(browser, 30).until(ec.element_to_be_clickable((By.CSS_SELECTOR, either)))
    box = browser.find_element(By.CSS_SELECTOR, "input.md-search__input")
    if not box.is_displayed():  # a narrow window shows only the search icon
        browser.find_element(By.CSS_SELECTOR, "label.md-search__icon").click()
    WebDriverWait(browser, 10).until(ec.visibility_of(box))
    box.click()
    box.send_keys("best-of-n")

    def results(driver):
        """The result links once they answer the whole query: the list updates as the keys arrive, and each link
        carries the query's terms in `h` ("best n": Material splits on "-" and drops the stop word "of")."""
        links = driver.find_elements(By.CSS_SELECTOR, "li.md-search-result__item a.md-search-result__link")
        terms = parse_qs(urlparse(links[0].get_attribute("href")).query).get("h", [""])[0].split() if links else []
        return links if {"best", "n"} <= set(terms) else False

    links = WebDriverWait(browser, 60).until(results)
    paths = [urlparse(a.get_attribute("href")).path for a in links]
    assert "/concepts/search/" in paths[:3], paths  # among the first results
    wanted = links[paths.index("/concepts/search/")]
    wanted.click()
    WebDriverWait(browser, 30).until(lambda d: "/concepts/search/" in d.current_url)
    heading = browser.find_element(By.TAG_NAME, "h1").text
    assert heading.startswith("Search: best-of-N"), heading
    errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == [], errors
