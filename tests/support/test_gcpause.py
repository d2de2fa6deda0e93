"""`paused_gc(survives=True)`: a parse's objects skip the young generations, and what a program drops is still
collected, as CPython's own schedule would (a batch worker parses file after file)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import hloopt
from hloopt.support.gcpause import paused_gc


def chain(instructions: int) -> str:
    lines = ["HloModule chain", "", "ENTRY %e (p: f32[4]) -> f32[4] {", "  %v0 = f32[4]{0} parameter(0)"]
    lines += [f"  %v{i} = f32[4]{{0}} negate(f32[4]{{0}} %v{i - 1})" for i in range(1, instructions)]
    lines.append(f"  ROOT %r = f32[4]{{0}} copy(f32[4]{{0}} %v{instructions - 1})")
    return "\n".join([*lines, "}", ""])


def test_a_parsed_module_goes_straight_to_the_oldest_generation() -> None:
    text = chain(30_000)
    gc.collect()
    module = hloopt.parse(text)
    assert gc.get_count()[0] < 1_000  # no young objects left for the collector's first pass
    assert any(item is module for item in gc.get_objects(generation=2))
    small = hloopt.parse(chain(10))  # a few young objects go through the collector as usual
    assert not any(item is small for item in gc.get_objects(generation=2))


def _run(script: str) -> str:
    """`script` in a fresh interpreter (few objects, nothing frozen, no full collection pending), its stdout."""
    prelude = """
        import gc, weakref
        from hloopt.support.gcpause import paused_gc

        class Node:
            __slots__ = ("other", "__weakref__")

        def cycles(count):
            nodes = [Node() for _ in range(count)]
            for a, b in zip(nodes, nodes[1:] + nodes[:1]):
                a.other = b
            return nodes
    """
    code = textwrap.dedent(prelude) + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_what_a_program_drops_is_collected_when_the_next_block_starts() -> None:
    out = _run("""
        with paused_gc(survives=True):
            made = cycles(200_000)
        dropped = weakref.ref(made[0])
        del made
        print(dropped() is not None)  # in the oldest generation, in a cycle: waiting for a full collection
        with paused_gc(survives=True):
            print(dropped() is None)  # which was due as the next parse started
    """)
    assert out.split() == ["True", "True"]


def test_memory_stays_bounded_over_many_dropped_modules() -> None:
    out = _run("""
        most = 0
        for _ in range(12):
            with paused_gc(survives=True):
                made = cycles(200_000)
            del made
            most = max(most, len(gc.get_objects()))
        print(most)
    """)
    assert int(out) < 3 * 200_000  # about one module's worth waits at a time, not twelve


def test_a_host_that_froze_objects_keeps_them_frozen() -> None:
    out = _run("""
        gc.freeze()
        frozen = gc.get_freeze_count()
        with paused_gc(survives=True):
            made = cycles(200_000)
        print(gc.get_freeze_count() == frozen, not any(item is made[0] for item in gc.get_objects(2)))
    """)
    assert out.split() == ["True", "True"]


def test_nested_blocks_leave_the_collector_to_the_outermost() -> None:
    assert gc.isenabled()
    with paused_gc():
        with paused_gc(survives=True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
