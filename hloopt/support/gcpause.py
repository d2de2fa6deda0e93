"""Pausing Python's cyclic garbage collector around bulk IR work.

Parsing, the passes and printing create hundreds of thousands of objects that
stay alive. CPython's collector runs every few hundred allocations and walks
the live young objects each time, which costs a fifth of a 100k-instruction
parse and finds nothing to free. Reference counting still frees everything
as usual; only cycles wait until the collector runs again afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the block; restore its previous state after (nesting is safe)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
