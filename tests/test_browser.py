"""The suite's browser launcher (`tests/browser.py`) on local pages: it records console errors, page errors and
every request, and writes screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import open_page, require_browser

PAGE = """<!doctype html>
<html><head><title>t</title></head>
<body><p id="x">hello</p>
<script>console.error("planted console error"); console.log("not an error");</script>
<script>setTimeout(() => { throw new Error("planted page error"); }, 0);</script>
<img src="http://127.0.0.1:9/missing.png">
</body></html>
"""

CLEAN = "<!doctype html><html><body><p id='x'>clean</p></body></html>"


@pytest.mark.slow
def test_records_errors_and_requests(tmp_path: Path) -> None:
    require_browser()
    page_file = tmp_path / "page.html"
    page_file.write_text(PAGE)
    with open_page(page_file.as_uri()) as seen:
        seen.page.wait_for_timeout(200)
        assert seen.page.inner_text("#x") == "hello"
        assert any("planted console error" in text for text in seen.console_errors)
        assert not any("not an error" in text for text in seen.console_errors)
        assert any("planted page error" in text for text in seen.page_errors)
        assert seen.requests[0] == page_file.as_uri()
        assert seen.foreign_requests == ["http://127.0.0.1:9/missing.png"]
        shot = seen.screenshot(tmp_path / "shots" / "page.png")
    assert shot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_clean_page(tmp_path: Path) -> None:
    require_browser()
    page_file = tmp_path / "clean.html"
    page_file.write_text(CLEAN)
    with open_page(page_file.as_uri()) as seen:
        assert seen.page.inner_text("#x") == "clean"
        assert seen.console_errors == []
        assert seen.page_errors == []
        assert seen.foreign_requests == []
