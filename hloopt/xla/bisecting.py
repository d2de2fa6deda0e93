"""``hloopt trace --bisect``: which rewrite sites of a pass move the numbers, by group testing over its
matches, each test one run of the input with the pass applied at some sites only (`SiteFilter`).

A set of sites fails when an output differs from the input's beyond ``trace``'s tolerance in ULPs. A
failing set is split in halves and each failing half searched again, so k culprits among n sites cost
about 2k⌈log₂ n⌉ runs; a failing set neither half of which fails (the error needs sites of both) is
kept whole. Runs in an XLA worker (`bisect_prepared`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hloopt.arrays.tracing import measure, over
from hloopt.cast_engine import Numerics
from hloopt.errors import HloError
from hloopt.passes.base import OpExpanderPass, SiteFilter
from hloopt.xla.bridge import IsolatedPool, isolated_call, worker_pool
from hloopt.xla.running import DEFAULT_MAX_BYTES, _check_runnable, _compile, _host, _prepare, with_numerics
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit


@dataclass(frozen=True)
class BisectReport:
    """The pass's sites, the smallest set found that moves the outputs, the runs used, and the input with
    the pass applied at those sites only: a module to attach to a bug report."""

    sites: tuple[str, ...]
    culprits: tuple[str, ...]
    executions: int
    module: str

    @property
    def ok(self) -> bool:
        return not self.culprits

    def render(self) -> str:
        head = f"{len(self.sites)} sites, {self.executions} executions: "
        if not self.culprits:
            return head + "no site moves the outputs beyond tolerance"
        named = ", ".join(f"%{name}" for name in self.culprits)
        return f"{head}the outputs move with the rewrite of {named}\n\nminimal module:\n{self.module}"

    def to_json(self) -> str:
        return json.dumps({"schema": "hloopt-bisect/1", **asdict(self)}, indent=2)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def expander_of(hlo_pass: object) -> OpExpanderPass:
    """The pass to bisect: one rewrite per matched instruction (an `OpExpanderPass`), else an error."""
    if not isinstance(hlo_pass, OpExpanderPass):
        raise HloError(f"--bisect needs one pass that rewrites instruction by instruction, not {hlo_pass!r}")
    return hlo_pass


def bisect_prepared(
    text: str,
    label: str,
    expander: OpExpanderPass,
    numerics: Numerics,
    inputs: Sequence[np.ndarray] | None,
    seed: int,
    max_bytes: int,
) -> BisectReport:
    """The bisection of `expander` on the module `text`, in this process: what a worker runs."""
    from hloopt.passes.pipeline import run_pipeline
    from hloopt.text.parser import parse

    sites = tuple(instruction.name for instruction in expander.matches(parse(text, label)))
    original = _compile(with_numerics(text, numerics, label), label)
    _check_runnable([original], [label], max_bytes)
    given = _prepare(original, inputs, seed)
    expected = original(given)
    runs = [1]

    def variant(chosen: Sequence[str]) -> str:
        module = parse(text, label)
        run_pipeline(module, [SiteFilter(expander, frozenset(chosen))], numerics)
        return module.to_text()

    def fails(chosen: Sequence[str]) -> bool:
        executable = _compile(with_numerics(variant(chosen), numerics, label), label)
        outputs = executable(_prepare(executable, given, seed))
        runs[0] += 1
        return any(over(measure(a, b)) for a, b in zip(expected, outputs))

    def culprits(chosen: Sequence[str]) -> list[str]:
        if len(chosen) == 1:
            return list(chosen)
        half = len(chosen) // 2
        left, right = chosen[:half], chosen[half:]
        found = (culprits(left) if fails(left) else []) + (culprits(right) if fails(right) else [])
        return found or list(chosen)

    found = culprits(sites) if sites and fails(sites) else []
    return BisectReport(sites, tuple(found), runs[0], variant(found))


def bisect(
    module: str,
    expander: OpExpanderPass,
    numerics: Numerics = "xla",
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> BisectReport:
    """`hloopt trace --bisect` from Python: the sites of `expander` on `module` that move its outputs."""
    with worker_pool(pool) as workers:
        args = (module, "module", expander, numerics, _host(inputs), seed, max_bytes)
        return isolated_call(bisect_prepared, *args, timeout=limit(timeout), label="module", pool=workers)
