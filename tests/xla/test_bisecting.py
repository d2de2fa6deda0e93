"""``trace --bisect``: a pass's output with k planted culprits among n sites is bisected to exactly those k,
within about 2k⌈log₂ n⌉ runs, and the minimal module shows the difference."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest
from conftest import sampled
from planted_passes import WrongAtSome
from xla_workers import on_worker_path

from hloopt.xla.bisecting import bisect
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
    report = bisect(adds(n, seed), WrongAtSome(wrong), pool=pool)
    assert len(report.sites) == n
    assert set(report.culprits) == wrong
    assert report.executions <= 2 + 2 * max(k, 1) * math.ceil(math.log2(n))
    assert (report.module.count("subtract(") == k and "add(" in report.module) or k == 0
