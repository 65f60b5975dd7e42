"""report.html in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`), driven with
Selenium. The results table and the trajectory viewer render, clicking moves to another trajectory and
the view changes, no script error is logged, and a screenshot is saved (to $PROCTOR_REPORT_SCREENSHOT too,
when set)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from headless_chromium import chromium_driver
from test_compare_table import NAMES, compare_root  # noqa: F401  (pi0, pi1 and beam, none given a name)
from test_report import report_root  # noqa: F401  (the shared session fixture: real evaluations)

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    yield from chromium_driver(tmp_path_factory)


def choose(browser, policy: str) -> None:
    """Pick `policy` in the viewer's policy menu (options read "<name> (<k> episodes)")."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    menu = Select(browser.find_element(By.ID, "policy-select"))
    texts = [o.text for o in menu.options]
    menu.select_by_index(next(i for i, t in enumerate(texts) if t.rsplit(" (", 1)[0].strip() == policy))


def click(browser, element) -> None:
    """Click `element` after centring it (the sticky menu bar must not cover it)."""
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def test_report_renders_and_the_viewer_moves_between_trajectories(browser, report_root, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from proctor.evaluation.report import build_report

    page = build_report(report_root, tmp_path / "report.html")
    browser.get(page.resolve().as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    assert browser.execute_script("return window.scrollY") == 0  # opens at the top, not at the viewer

    rows = browser.find_elements(By.CSS_SELECTOR, "#results-table tbody tr")
    assert len(rows) == 5
    expert = rows[0]  # the first evaluation made, the baseline, is the first row
    assert expert.find_element(By.TAG_NAME, "b").text == "expert"
    assert "100.0%" in expert.text and "4/4" in expert.text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#types-table tbody tr")) >= 1
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-n svg circle")  # success vs N from the sweep
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-prm svg circle")  # PRM score vs success
    assert browser.find_elements(By.CSS_SELECTOR, "#chart-train svg polyline")  # the training curve

    choose(browser, "best-of-n N=3")
    title = browser.find_element(By.ID, "traj-title")
    first = title.text
    steps = browser.find_elements(By.CSS_SELECTOR, "#steps .step")
    assert first.startswith("best-of-n N=3 · ") and steps
    assert len(browser.find_elements(By.CSS_SELECTOR, "#score-strip div")) == len(steps)
    assert browser.find_elements(By.CSS_SELECTOR, "#steps .cands tr.chosen")  # the candidates best-of-N weighed
    first_action = steps[0].find_element(By.CSS_SELECTOR, ".action").text
    first_view = browser.find_element(By.ID, "steps").text

    click(browser, browser.find_element(By.ID, "next-traj"))
    second = title.text
    assert second != first and second.startswith("best-of-n N=3 · ")
    assert browser.find_element(By.ID, "steps").text != first_view  # the steps shown are the new episode's
    items = browser.find_elements(By.CSS_SELECTOR, "#traj-list .traj-item")
    assert "sel" in items[1].get_attribute("class") and "sel" not in items[0].get_attribute("class")
    click(browser, items[2])
    assert title.text not in (first, second)

    click(browser, browser.find_element(By.CSS_SELECTOR, ".filters button[data-f='ko']"))
    choose(browser, "random")  # random lost every episode at the step limit
    items = browser.find_elements(By.CSS_SELECTOR, "#traj-list .traj-item")
    assert len(items) == 4 and all("✗" in i.text for i in items)
    assert "Where it went wrong" in browser.find_element(By.ID, "traj-wrong").text
    assert "max_steps" in browser.find_element(By.ID, "traj-final").text
    click(browser, browser.find_element(By.CSS_SELECTOR, ".filters button[data-f='all']"))

    choose(browser, "epsilon")
    assert title.text.startswith("epsilon · ")
    assert "MC-Q" in browser.find_element(By.ID, "steps").text  # the labelled store's targets
    assert browser.find_elements(By.CSS_SELECTOR, "#steps .step")[0].find_element(By.CSS_SELECTOR, ".action").text
    assert first_action

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    shot = tmp_path / "report.png"
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("PROCTOR_REPORT_SCREENSHOT"):
        shutil.copy(shot, os.environ["PROCTOR_REPORT_SCREENSHOT"])


def test_a_runs_paired_table_renders(browser, tmp_path):
    """A `proctor run` folder's rows paired with its first row show under the results; a plain folder's report
    hides the table."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from proctor.evaluation.report import build_report
    from proctor.rollout import RolloutConfig, run_rollout

    run_rollout(RolloutConfig(env="household", agent={"kind": "random"}, out=tmp_path / "run" / "rollouts", tasks=2,
                              env_kwargs={"max_steps": 3}, progress=False)).store.close()

    def open_report() -> None:
        browser.get(build_report(tmp_path / "run").resolve().as_uri())
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))

    open_report()
    assert not browser.find_element(By.ID, "paired-card").is_displayed()
    vs = {"policy": "policy", "iteration": 0, "pairs": 200, "b01": 43, "b10": 21, "diff": 0.11,
          "diff_ci95": [0.035, 0.19], "p_value": 0.0081}
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"env": "household", "results": [
        {"iteration": 0, "policy": "policy", "dir": "x"}, {"iteration": 0, "policy": "best-of-8", "vs_first": vs}]}))
    open_report()
    rows = browser.find_elements(By.CSS_SELECTOR, "#paired-table tbody tr")
    assert [r.text.split() for r in rows] == [["0", "best-of-8", "200", "+11.0", "[+3.5,", "+19.0]", "43", "/", "21",
                                                "0.0081"]]
    assert "iteration 0 policy" in browser.find_element(By.ID, "paired-note").text
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def test_the_results_table_reads_at_80_columns(browser, compare_root, tmp_path):  # noqa: F811
    """At 80 columns (640 px) the rows are the evaluations' names, whole and the baseline first, and the page
    keeps its width (the table scrolls inside its card)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from proctor.evaluation.report import build_report

    browser.set_window_size(640, 1000)
    try:
        browser.get(build_report(compare_root, tmp_path / "report.html").resolve().as_uri())
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        width = browser.execute_script("return document.documentElement.clientWidth")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        names = browser.find_elements(By.CSS_SELECTOR, "#results-table tbody tr td:first-child b")
        assert [b.text for b in names] == NAMES
        card = browser.find_element(By.CSS_SELECTOR, "#results .card").rect
        assert all(b.rect["x"] >= card["x"] and b.rect["x"] + b.rect["width"] <= card["x"] + card["width"]
                   for b in names)  # each name in full view
    finally:
        browser.set_window_size(1400, 1800)
