"""How long one XLA call on a user's module may take before its worker is killed.

A call is what runs in one worker: reading or writing one `.pb`/`.mlir` file, or compiling and running
one module (or one comparison). XLA has no limit of its own, and a ``while`` whose condition is always
true, or a flipped byte in MLIR bytecode, runs forever. Imported by the CLI's option definitions, so it
imports nothing.
"""

from __future__ import annotations

from hloopt.errors import HloError

#: The default limit, in seconds: far above what XLA's CPU compiler and a run of any module a user would
#: compare on a CPU take, yet short enough that a forgotten endless loop ends within a coffee break.
DEFAULT_TIMEOUT: float = 600


def limit(seconds: float | None) -> float | None:
    """The pool's timeout for `seconds`: 0 (as ``--timeout 0`` says) and None are no limit."""
    if seconds is not None and seconds < 0:
        raise HloError(f"a timeout is 0 (no limit) or a number of seconds, not {seconds:g}")
    return seconds or None
