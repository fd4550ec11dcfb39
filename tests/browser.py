"""One headless Chromium for the whole test session, driven through selenium's WebDriver client
with Debian's chromedriver (``./scripts/test`` installs ``chromium`` and ``chromium-driver``).

The fixture never skips: a missing browser fails the tests that need it with the command that
installs it, as the registry fixtures do. Selenium Manager (which would download a driver and a
browser from the network) is never used: the driver is the one on PATH, named explicitly.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

#: the window the pages (and their screenshots: tests/serve/test_serve_browser.py's IMAGES) are rendered in
WINDOW = (1200, 800)
INSTALL = "apt-get install chromium chromium-driver (./scripts/test does)"


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def start_chromium(profile: Path) -> WebDriver:
    """A headless Chromium whose profile is the throw-away folder ``profile``, or a pytest failure
    saying why not."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = chromium_binary(), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.fail(f"the browser tests need Chromium and its driver: {INSTALL}", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    options.add_argument("--headless=new")
    # The suite runs as root on CI machines (scripts/test needs root for apt-get and containerd), and
    # Chromium refuses to start its renderer sandbox as root: --no-sandbox is the only way it runs
    # there. The pages it loads are serve's own, from a loopback server the test started.
    options.add_argument("--no-sandbox")
    # containers give /dev/shm 64 MiB: Chromium then crashes on large pages; /tmp is used instead
    options.add_argument("--disable-dev-shm-usage")
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument("--no-first-run")
    options.add_argument("--disable-gpu")
    options.add_argument("--disable-extensions")
    try:
        return webdriver.Chrome(options=options, service=Service(executable_path=driver))
    except Exception as e:  # noqa: BLE001 - any failure to start is the fixture's failure, said once
        pytest.fail(f"Chromium did not start ({binary}, {driver}): {e}", pytrace=False)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """The session's one headless Chromium (a selenium ``WebDriver``), shared by every browser test:
    each test starts by loading its own page and clearing the cookies it depends on. Its profile lies
    in pytest's temporary folders, which pytest prunes: a run leaves none behind in /tmp."""
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()
