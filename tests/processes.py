"""What the tests of worker processes look at: this process's children, a process's pool workers, and whether a
process is still running (Linux); and waiting for such a thing to come true."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 120) -> None:
    """Wait until `condition()` holds (a process ends after its parent a moment later, not at once); fail
    with `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def children() -> set[int]:
    """This process's child processes (a thread that ends while they are listed had none left to list)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except FileNotFoundError:
            continue
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def workers_of(pid: int) -> set[int]:
    """The running `hloopt.support.pool` workers that `pid` started, found by their command line's marker
    (``python -c PROGRAM FD FD FD PARENT_PID …``), whatever their process group."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            len(argv) > 6
            and b"hloopt.support.pool" in argv[2]
            and argv[6] == str(pid).encode()
            and alive(int(entry.name))
        ):
            found.add(int(entry.name))
    return found
