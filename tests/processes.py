"""What the tests of worker processes look at: this process's children, and whether a process is still running (Linux)."""

from __future__ import annotations

from pathlib import Path


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
