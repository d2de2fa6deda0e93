"""`paused_gc`: what a block makes skips the young generations, and what a program drops is still collected,
as CPython's own schedule would (a batch worker parses file after file). The pause is the program's to choose:
the CLI and batch workers take it; library calls (`parse`, the passes) leave the collector alone."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from cli_invoke import invoke

import hloopt
from hloopt.passes.pipeline import run_pipeline
from hloopt.support.gcpause import paused_gc


def chain(instructions: int) -> str:
    lines = ["HloModule chain", "", "ENTRY %e (p: f32[4]) -> f32[4] {", "  %v0 = f32[4]{0} parameter(0)"]
    lines += [f"  %v{i} = f32[4]{{0}} negate(f32[4]{{0}} %v{i - 1})" for i in range(1, instructions)]
    lines.append(f"  ROOT %r = f32[4]{{0}} copy(f32[4]{{0}} %v{instructions - 1})")
    return "\n".join([*lines, "}", ""])


def test_a_parsed_module_goes_straight_to_the_oldest_generation() -> None:
    text = chain(30_000)
    gc.collect()
    with paused_gc():
        module = hloopt.parse(text)
    assert gc.get_count()[0] < 1_000  # no young objects left for the collector's first pass
    assert any(item is module for item in gc.get_objects(generation=2))
    with paused_gc():
        small = hloopt.parse(chain(10))  # a few young objects go through the collector as usual
    assert not any(item is small for item in gc.get_objects(generation=2))


def _collections(work: Callable[[], object]) -> int:
    """How many times the cyclic collector ran during `work`."""
    runs: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(phase)

    gc.callbacks.append(count)
    try:
        work()
    finally:
        gc.callbacks.remove(count)
    return len(runs)


def test_library_calls_leave_the_collector_alone() -> None:
    """A parse and a pipeline run with the collector as the program left it: running, nothing moved or frozen."""
    text = chain(30_000)
    frozen = gc.get_freeze_count()
    assert _collections(lambda: run_pipeline(hloopt.parse(text), "all")) > 10
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.disable()
    try:
        assert _collections(lambda: run_pipeline(hloopt.parse(text), "all")) == 0
        assert not gc.isenabled()  # a program that paused it itself finds it paused still
    finally:
        gc.enable()


def test_the_cli_pauses_the_collector_around_a_file(tmp_path: Path) -> None:
    source = tmp_path / "chain.hlo"
    source.write_text(chain(30_000))
    assert _collections(lambda: invoke("run", source, "--passes", "all", "-o", tmp_path / "out.hlo")) < 10


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
        with paused_gc():
            made = cycles(200_000)
        dropped = weakref.ref(made[0])
        del made
        print(dropped() is not None)  # in the oldest generation, in a cycle: waiting for a full collection
        with paused_gc():
            print(dropped() is None)  # which was due as the next parse started
    """)
    assert out.split() == ["True", "True"]


def test_memory_stays_bounded_over_many_dropped_modules() -> None:
    out = _run("""
        most = 0
        for _ in range(12):
            with paused_gc():
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
        with paused_gc():
            made = cycles(200_000)
        print(gc.get_freeze_count() == frozen, not any(item is made[0] for item in gc.get_objects(2)))
    """)
    assert out.split() == ["True", "True"]


def test_nested_blocks_leave_the_collector_to_the_outermost() -> None:
    assert gc.isenabled()
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
