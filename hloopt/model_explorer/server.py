"""Model Explorer's server as ``hloopt view`` runs it: in a process of its own, which lives as long as its
parent holds its stdin open.

``python -c 'from hloopt.model_explorer.server import serve; serve()'`` reads two JSON lines on stdin:
first ``{"remove": DIR | null}`` (a directory to delete when it ends: the view's temporary one), then
``{"port": N, "models": [path, …], "node_data": [[path, model file name], …], "panes": [[model file
name, graph id], …]}`` (two panes: Model Explorer's compare of the two graphs). It starts Model Explorer
on 127.0.0.1 with the hloopt adapter, prints the page's address on a line of stdout, and serves until
stdin ends: its parent exited, however it ended (Ctrl-C, `kill`, a crash). Nothing is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
from typing import Any
from urllib.parse import quote, unquote

#: Model Explorer's host: the loopback interface only, never the network.
HOST = "127.0.0.1"


def serve() -> None:
    remove = json.loads(sys.stdin.readline() or "{}").get("remove")
    line = sys.stdin.readline()
    if not line:  # the parent ended before it had anything to show
        _end(remove)
    threading.Thread(target=_end_with_parent, args=(remove,), daemon=True).start()
    request = json.loads(line)
    from model_explorer import server
    from model_explorer.config import ModelExplorerConfig

    settings = ModelExplorerConfig()
    for path in request["models"]:
        settings.add_model_from_path(path)
    for path, model in request["node_data"]:
        settings.add_node_data_from_path(path, model)
    port = request["port"] or _free_port()
    if not _free(port):
        sys.stderr.write(f"hloopt: error: port {port} of {HOST} is in use\n")
        _end(remove, 2)
    address = f"http://{HOST}:{port}/?data={_page_data(settings, request.get('panes', []))}"
    server._get_latest_version_from_repo = lambda url: "0"  # no network: PyPI is not asked for a newer release
    threading.Thread(target=_announce, args=(port, address), daemon=True).start()
    sys.stdout = sys.stderr  # stdout carries the address alone; the server's messages go to the log
    server.start(
        host=HOST,
        port=port,
        config=settings,
        extensions=["hloopt.model_explorer"],
        no_open_in_browser=True,
        skip_health_check=True,
    )


def _page_data(settings: Any, panes: list[list[str]]) -> str:
    """The page's ``data`` parameter: Model Explorer's own, and with two `panes` (each a model file's
    collection label and a graph id) the two-pane compare, its navigation synced by node id."""
    data = json.loads(unquote(settings.to_url_param_value()))
    if len(panes) == 2:
        data["uiState"] = {
            "paneStates": [
                {
                    "deepestExpandedGroupNodeIds": [],
                    "selectedNodeId": "",
                    "selectedGraphId": graph,
                    "selectedCollectionLabel": label,
                    "widthFraction": 0.5,
                }
                for label, graph in panes
            ]
        }
        data["sync"] = {"mode": "match_node_id"}
    return quote(json.dumps(data))


def _announce(port: int, address: str) -> None:
    """The address on stdout once the server answers (the parent waits for this line)."""
    import urllib.request

    while True:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/check_health", timeout=5):
                break
        except OSError:
            threading.Event().wait(0.05)
    sys.__stdout__.write(address + "\n")  # type: ignore[union-attr]
    sys.__stdout__.flush()  # type: ignore[union-attr]


def _end_with_parent(remove: Any) -> None:
    sys.stdin.read()
    _end(remove)


def _end(remove: Any, status: int = 0) -> None:
    if isinstance(remove, str):
        shutil.rmtree(remove, ignore_errors=True)
    os._exit(status)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]
