"""The test suite's one browser: headless Debian Chromium driven by Playwright, for the pages hloopt writes or
serves (HTML reports, Model Explorer).

Each `open_page` starts a fresh browser with a fresh profile, so that no test sees another's cache or cookies,
and records what a page must not do: print console errors, throw, or fetch anything from the network.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import every_tier

if TYPE_CHECKING:
    from playwright.sync_api import Page

#: Debian's package: the browser CI installs (`.ci/run`); Playwright's own downloaded builds are not used.
CHROMIUM = Path("/usr/bin/chromium")

#: Headless, without the sandbox (containers), and without the browser's own traffic (updates, sync, field
#: trials), so that every request recorded is one the page made.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def require_browser() -> None:
    """Skip the calling test when Chromium or Playwright is missing; fail instead under HLOOPT_REQUIRE_SHARED=1
    (CI installs both, so a missing one there is a broken setup, not a reason to skip)."""
    missing = [
        what
        for what, present in (
            (f"chromium at {CHROMIUM} (apt-get install chromium)", CHROMIUM.is_file()),
            ("playwright (pip install 'hloopt[test]')", importlib.util.find_spec("playwright") is not None),
        )
        if not present
    ]
    if not missing:
        return
    reason = "needs " + " and ".join(missing)
    if every_tier():
        pytest.fail(reason + " — HLOOPT_REQUIRE_SHARED=1 makes it required")
    pytest.skip(reason)


@dataclass
class BrowserPage:
    """An open page and what it did since it started loading."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    #: The URL of every request the page made, in order, the page's own document included.
    requests: list[str] = field(default_factory=list)

    @property
    def foreign_requests(self) -> list[str]:
        """The requests other than for the page's own document: a self-contained page makes none."""
        return [url for url in self.requests if url != self.page.url]

    def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        """The page as a PNG at `path` (its parent made if needed), for a person to look at."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


@contextmanager
def open_page(url: str, *, width: int = 1280, height: int = 900, timeout_ms: float = 60_000) -> Iterator[BrowserPage]:
    """`url` loaded in a new headless Chromium with a fresh profile; closed, profile and all, on exit. Call
    `require_browser` first."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="hloopt-chromium-")
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=list(CHROMIUM_ARGS),
                viewport={"width": width, "height": height},
            )
            try:
                context.set_default_timeout(timeout_ms)
                page = context.pages[0] if context.pages else context.new_page()
                seen = BrowserPage(page)
                page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
                context.on("request", lambda r: seen.requests.append(r.url))
                page.goto(url, wait_until="load")
                yield seen
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
