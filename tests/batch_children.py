"""Programs for worker processes in tests: the real worker, with one thing made to go wrong first.

A pool's workers are fresh interpreters (`hloopt.support.pool.PROGRAM`), so a test cannot patch them
from its own process; it prefixes the program instead (`monkeypatch.setattr(pool, "PROGRAM",
kills_on("boom.hlo"))`, or `Client.run` on each Dask worker).
"""

from __future__ import annotations

from hloopt.support import pool

#: The program every worker runs; read at import, before any test patches it.
REAL = pool.PROGRAM


def kills_on(name: str) -> str:
    """A worker that dies by SIGKILL (what a segfault or the OOM killer looks like) on the file called `name`."""
    return (
        "import os, signal\n"
        "from hloopt.driver import batch, flow\n"
        "def process_file(job, options):\n"
        f"    if os.path.basename(job.path) == {name!r}:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return flow.process_file(job, options)\n"
        "batch.process_file = process_file\n"
    ) + REAL


def slow_to_rename(name: str, seconds: float) -> str:
    """A worker whose atomic write of the file called `name` waits `seconds` before the rename: the
    temporary file is whole on disk and not yet in place."""
    return (
        "import os, time\n"
        "replace = os.replace\n"
        "def slow(source, destination):\n"
        f"    if os.path.basename(destination) == {name!r}:\n"
        f"        time.sleep({seconds})\n"
        "    replace(source, destination)\n"
        "os.replace = slow\n"
    ) + REAL
