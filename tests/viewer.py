"""``hloopt view`` run by a test: the command in a process of its own, its address, its server, and Model
Explorer's JSON API on that server."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import every_tier


def require_model_explorer() -> None:
    """Skip without ai-edge-model-explorer (``hloopt[viz]``); fail under HLOOPT_REQUIRE_SHARED=1."""
    if importlib.util.find_spec("model_explorer") is not None:
        return
    reason = "needs ai-edge-model-explorer (pip install 'hloopt[viz]')"
    if every_tier():
        pytest.fail(reason + " — HLOOPT_REQUIRE_SHARED=1 makes it required")
    pytest.skip(reason)


@dataclass
class RunningView:
    process: subprocess.Popen[str]
    address: str

    @property
    def origin(self) -> str:
        parts = urllib.parse.urlsplit(self.address)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def page_data(self) -> dict[str, Any]:
        """The page's ``data`` parameter: the models, node data and panes it opens."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.address).query)
        return json.loads(query["data"][0])

    def servers(self) -> set[int]:
        """The Model Explorer servers this view started (its children running the server)."""
        found: set[int] = set()
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:
                found.update(int(pid) for pid in (task / "children").read_text().split())
            except FileNotFoundError:
                continue
        return {pid for pid in found if b"hloopt.model_explorer.server" in _cmdline(pid)}

    def get(self, route: str, **params: str) -> Any:
        """Model Explorer's JSON API: ``GET route?params``."""
        url = f"{self.origin}{route}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=300) as response:
            return json.loads(response.read())

    def post(self, route: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            f"{self.origin}{route}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())

    def read_json(self, path: str) -> Any:
        """A file the page reads, as the server hands it to the page (its ``read_text_file``)."""
        return json.loads(self.get("/api/v1/read_text_file", path=path)["content"])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@contextmanager
def running_view(*args: object, timeout: float = 600) -> Iterator[RunningView]:
    """``hloopt view ARGS… --no-browser`` until its address is printed; ended with SIGINT (Ctrl-C) on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "hloopt", "view", *map(str, args), "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROWSER": "false"},
    )
    try:
        assert process.stdout is not None
        address = process.stdout.readline().strip()
        if not address:
            _, stderr = process.communicate(timeout=timeout)
            raise AssertionError(f"hloopt view ended ({process.returncode}) without an address: {stderr}")
        yield RunningView(process, address)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(60)
