"""Headless Chromium for the browser tests (Debian's `chromium` + `chromium-driver`, installed when missing),
driven with Selenium: `chromium_driver` yields a driver or skips with the reason none could be had."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1800")


def install_chromium() -> str | None:
    """Install Debian's chromium and chromium-driver when missing; the reason it could not, or None."""
    if CHROMIUM.exists() and DRIVER.exists():
        return None
    if shutil.which("apt-get") is None:
        return "apt-get not found"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"]
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900, env=env)
        if done.returncode != 0:  # the package lists may be missing or stale
            subprocess.run(["apt-get", "update", "-q"], check=False, capture_output=True, timeout=600, env=env)
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"apt-get failed: {e}"
    if done.returncode != 0 or not (CHROMIUM.exists() and DRIVER.exists()):
        return f"apt-get install chromium chromium-driver failed: {done.stderr.strip()[-300:]}"
    return None


def chromium_driver(tmp_path_factory: Any) -> Iterator[Any]:
    """A headless Chrome WebDriver with its own profile folder, quit after use."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    reason = install_chromium()
    if reason:
        pytest.skip(f"no headless Chromium for the browser test: {reason}")
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download a driver or browser
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
