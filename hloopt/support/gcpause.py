"""Pausing Python's cyclic garbage collector around bulk IR work, for the program to choose.

Parsing, the passes and printing create hundreds of thousands of objects that
stay alive. CPython's collector runs every few hundred allocations and walks
the live young objects each time, which costs a fifth of a 100k-instruction
parse and finds nothing to free. Reference counting still frees everything
as usual; only cycles wait until the collector runs again afterwards.

The collector is the host program's, so library calls (`parse`, the passes)
never touch it: the CLI pauses it around a file, a batch worker around each
of its files, and a library user may wrap their own work in `paused_gc`.

What a block makes goes straight to the oldest generation when it ends,
instead of through the young generations' passes (the first of them was a
tenth of a 100k-instruction parse). CPython runs a full collection once the
objects it has moved into the oldest generation exceed a quarter of those the
last full collection left; it does not count the objects moved here, so this
module keeps that count itself and runs the full collection, when it is due,
as the next block starts. A program that dropped a parsed module, say a
batch worker going from file to file, so gets its cycles back as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: Fewer young objects than this go through the collector as usual: its pass over them is cheap.
_WORTH_MOVING = 50_000
#: What the interpreter itself keeps frozen (Python 3.12 starts with 375 tuples there; 3.11 with none):
#: more than this is the host program's own `gc.freeze`.
_FROZEN_AT_START = gc.get_freeze_count()


@dataclass
class _Moved:
    """The objects moved to the oldest generation since the last full collection that this module saw."""

    objects: int = 0
    #: How many full collections had run (``gc.get_stats()``) when `objects` was last counted from 0.
    full_collections: int = -1
    #: The objects left after the last full collection this module ran (None: not counted yet).
    left: int | None = None


_MOVED = _Moved()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the block; restore its previous state after (nesting is safe).

    What the block allocates then skips the young generations. The host's own `gc.freeze` (after
    hloopt was imported) is left alone: nothing is moved while it has frozen objects, since moving
    thaws every frozen object.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    if was_enabled:
        _collect_if_due()
    try:
        yield
    finally:
        if was_enabled:
            _move_young()
            gc.enable()


def _collect_if_due() -> None:
    """The full collection CPython would have run by now had it counted the objects moved here."""
    full_collections = gc.get_stats()[-1]["collections"]
    if full_collections != _MOVED.full_collections:  # one ran since: it examined everything moved before it
        _MOVED.objects, _MOVED.full_collections = 0, full_collections
        return
    if _MOVED.objects < _WORTH_MOVING:
        return
    if _MOVED.left is None:
        _MOVED.left = len(gc.get_objects())
    if _MOVED.objects > _MOVED.left // 4:
        gc.collect()
        _MOVED.left = len(gc.get_objects())
        _MOVED.objects, _MOVED.full_collections = 0, gc.get_stats()[-1]["collections"]


def _move_young() -> None:
    """The young generations' objects into the oldest one, without a pass over them (freeze, then unfreeze)."""
    young = gc.get_count()[0]
    if young < _WORTH_MOVING or gc.get_freeze_count() > _FROZEN_AT_START:
        return
    gc.freeze()
    gc.unfreeze()
    _MOVED.objects += young
