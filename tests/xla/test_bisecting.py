"""``trace --bisect``: a pass's output with k planted culprits among n sites is bisected to exactly those k,
within about 2k⌈log₂ n⌉ runs, and the minimal module shows the difference."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator

import pytest
from conftest import sampled
from planted_passes import BrokenMatching, BrokenMultiply, WrongAtSome, WrongMultiplyAtSome
from xla_workers import on_worker_path

from hloopt.passes.base import PassError
from hloopt.xla.bisecting import Site, bisect, minimal
from hloopt.xla.bridge import IsolatedPool


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedPool]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        on_worker_path(monkeypatch)
        with IsolatedPool(1) as workers:
            yield workers


def adds(n: int, seed: int) -> str:
    """n adds, each of two earlier values, every one an output (so no site's error can be masked)."""
    rng = random.Random(seed)
    names = ["p0", "p1"]
    lines = ["p0 = f32[8] parameter(0)", "p1 = f32[8] parameter(1)"]
    for index in range(n):
        x, y = rng.sample(names, 2)
        lines.append(f"sum{index} = f32[8] add({x}, {y})")
        names.append(f"sum{index}")
    outputs = ", ".join(names[2:])
    body = "\n  ".join(lines)
    shape = ", ".join(["f32[8]"] * n)
    return f"HloModule adds\nENTRY main {{\n  {body}\n  ROOT out = ({shape}) tuple({outputs})\n}}\n"


@pytest.mark.parametrize(
    ("n", "k", "seed"), sampled([(16, 1, 0), (16, 2, 1), (32, 3, 2), (9, 0, 3), (24, 2, 4)], 2, unpack=True)
)
def test_planted_culprits_are_found_exactly(n: int, k: int, seed: int, pool: IsolatedPool) -> None:
    wrong = frozenset(random.Random(seed).sample([f"sum{i}" for i in range(n)], k))
    report = bisect(adds(n, seed), [WrongAtSome(wrong)], pool=pool)
    assert len(report.sites) == n
    assert {site.instruction for site in report.culprits} == wrong
    assert report.executions <= 2 + 2 * max(k, 1) * math.ceil(math.log2(n))
    assert (report.module.count("subtract(") == k and "add(" in report.module) or k == 0


def adds_and_multiplies(n: int, seed: int) -> str:
    """`adds` with every other instruction a multiply: sites of two passes."""
    text = adds(n, seed)
    for index in range(1, n, 2):
        text = text.replace(f"sum{index} = f32[8] add(", f"sum{index} = f32[8] multiply(")
    return text


@pytest.mark.parametrize(("n", "k", "seed"), sampled([(12, 2, 5), (20, 3, 6), (16, 4, 7)], 1, unpack=True))
def test_planted_culprits_across_two_passes_are_found_exactly(n: int, k: int, seed: int, pool: IsolatedPool) -> None:
    wrong = frozenset(random.Random(seed).sample([f"sum{i}" for i in range(n)], k))
    passes = [WrongAtSome(wrong), WrongMultiplyAtSome(wrong)]
    report = bisect(adds_and_multiplies(n, seed), passes, pool=pool)
    by_pass = {"test-wrong-at-some": {f"sum{i}" for i in range(0, n, 2)}}
    by_pass["test-wrong-multiply-at-some"] = {f"sum{i}" for i in range(1, n, 2)}
    assert {(s.pass_name, s.instruction) for s in report.sites} == {
        (p, i) for p, names in by_pass.items() for i in names
    }
    assert {(s.pass_name, s.instruction) for s in report.culprits} == {
        (p, i) for p, names in by_pass.items() for i in names & wrong
    }
    assert report.executions <= 2 + 2 * k * math.ceil(math.log2(n))
    assert report.module.count("subtract(") == k


def test_two_sites_that_fail_only_together_are_both_found(pool: IsolatedPool) -> None:
    """u and v are equal, and the output their maximum: making one a subtract (smaller, as |p1| >= 0) is
    masked by the other; only both move the output. Decoy adds around them are rewritten correctly."""
    before, after = ("\n  ".join(f"d{i} = f32[8] add(p0, p{i % 2})" for i in part) for part in ((0, 1, 2), (3, 4, 5)))
    module = f"""HloModule pair
ENTRY main {{
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  {before}
  a1 = f32[8] abs(p1)
  u = f32[8] add(p0, a1)
  {after}
  v = f32[8] add(p0, a1)
  m = f32[8] maximum(u, v)
  ROOT out = (f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8]) tuple(m, d0, d1, d2, d3, d4, d5)
}}
"""
    report = bisect(module, [WrongAtSome(frozenset({"u", "v"}))], pool=pool)
    # In post order u and v fall in different halves, so neither half fails and ddmin takes over.
    assert [site.instruction for site in report.sites] == ["d0", "d1", "d2", "u", "d3", "d4", "d5", "v"]
    assert {site.instruction for site in report.culprits} == {"u", "v"}
    assert report.module.count("subtract(") == 2
    assert report.executions <= 8 * 8  # ddmin's bound, n² runs


@pytest.mark.parametrize("n", range(1, 7))
def test_ddmin_finds_each_set_that_fails_only_whole(n: int) -> None:
    """Exhaustive over every non-empty set S of n sites, when a set fails exactly when it holds all of S:
    `minimal` from the whole returns S, and from the whole with halves known to pass (granularity 4)."""
    sites = [Site("p", f"s{i}") for i in range(n)]
    for size in range(1, n + 1):
        for needed in itertools.combinations(sites, size):

            def fails(chosen: list[Site], needed: tuple[Site, ...] = needed) -> bool:
                return set(needed) <= set(chosen)

            assert minimal(sites, fails) == list(needed)
            assert minimal(sites, fails, min(4, n)) == list(needed)


@pytest.mark.parametrize("broken", [BrokenMultiply(), BrokenMatching()], ids=lambda p: p.name)
def test_a_pass_failing_while_bisected_is_named_not_its_site_filter(broken: WrongAtSome, pool: IsolatedPool) -> None:
    """The bisection runs each pass wrapped in a site filter, one pass at a time: its error still names the
    real pass and the passes before it, as a pipeline's does."""
    with pytest.raises(PassError) as raised:
        bisect(adds_and_multiplies(6, 0), [WrongAtSome(), broken], pool=pool)
    message = str(raised.value)
    assert message.startswith(f"in pass {broken.name} (after test-wrong-at-some): ")
    assert "site-filter" not in message
