"""``hloopt trace --bisect``: which rewrite sites of a pipeline move the numbers, by delta debugging over
the matches of its per-instruction passes, each test one run of the input with those passes applied at
some sites only (`SiteFilter`).

A site is a pass and the input instruction a match stands for (by the provenance of the passes before
it). A set of sites fails when an output differs from the input's beyond ``trace``'s tolerance in ULPs.
A failing set is split in halves and each failing half searched again, so k culprits among n sites cost
about 2k⌈log₂ n⌉ runs; a failing set neither half of which fails (the error needs sites of both) is
minimised by ddmin's finer splits and complements, to a set no one site of which can be dropped.
Runs in an XLA worker (`bisect_prepared`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hloopt.arrays.tracing import measure, over
from hloopt.cast_engine import Numerics
from hloopt.errors import HloError
from hloopt.passes.base import HloPass, OpExpanderPass, PassError, SiteFilter, described, pass_name
from hloopt.xla.bridge import IsolatedPool, isolated_call, worker_pool
from hloopt.xla.running import DEFAULT_MAX_BYTES, _check_runnable, _compile, _host, _prepare, with_numerics
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit


@dataclass(frozen=True)
class Site:
    """One rewrite a pipeline can make: `pass_name` at the input instruction `instruction` (every match
    of that pass standing for it, by the provenance of the passes before)."""

    pass_name: str
    instruction: str

    def render(self) -> str:
        return f"%{self.instruction} ({self.pass_name})"

    def to_dict(self) -> dict[str, str]:
        return {"pass": self.pass_name, "instruction": self.instruction}


@dataclass(frozen=True)
class BisectReport:
    """The pipeline's sites, the smallest set found that moves the outputs, the runs used, and the input
    with the pipeline applied at those sites only: a module to attach to a bug report."""

    sites: tuple[Site, ...]
    culprits: tuple[Site, ...]
    executions: int
    module: str

    @property
    def ok(self) -> bool:
        return not self.culprits

    def render(self) -> str:
        head = f"{len(self.sites)} sites, {self.executions} executions: "
        if not self.culprits:
            return head + "no site moves the outputs beyond tolerance"
        named = ", ".join(site.render() for site in self.culprits)
        return f"{head}the outputs move with the rewrite of {named}\n\nminimal module:\n{self.module}"

    def to_json(self) -> str:
        return json.dumps({"schema": "hloopt-bisect/2", **self.to_dict()}, indent=2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sites": [site.to_dict() for site in self.sites],
            "culprits": [site.to_dict() for site in self.culprits],
            "executions": self.executions,
            "module": self.module,
        }


def bisected_passes(passes: str | Sequence[str | HloPass], numerics: Numerics) -> list[HloPass]:
    """The pipeline in run order, refused unless some pass in it rewrites instruction by instruction (an
    `OpExpanderPass`): only those have sites."""
    from hloopt.passes.pipeline import plan

    steps = [step.hlo_pass for step in plan(passes, numerics)]
    if not any(isinstance(hlo_pass, OpExpanderPass) for hlo_pass in steps):
        names = ", ".join(pass_name(hlo_pass) for hlo_pass in steps)
        raise HloError(
            f"--bisect needs a pass that rewrites instruction by instruction; {names} rewrites the module as a whole"
        )
    return steps


def apply_at(
    text: str, label: str, steps: Sequence[HloPass], numerics: Numerics, chosen: frozenset[Site] | None
) -> tuple[str, list[Site]]:
    """`text` after `steps`, each per-instruction pass applied only at its `chosen` sites (every site when
    None), and the sites met on the way, in pipeline and post order."""
    from hloopt.passes.pipeline import compose, run_pipeline
    from hloopt.text.parser import parse

    module = parse(text, label)
    origin: dict[str, str] = {}  # each instruction made so far -> the input instruction it stands for
    sites: list[Site] = []
    done: list[str] = []
    for hlo_pass in steps:
        step = hlo_pass
        try:
            if isinstance(hlo_pass, OpExpanderPass):
                name = pass_name(hlo_pass)
                matched = {i.name: Site(name, origin.get(i.name, i.name)) for i in hlo_pass.matches(module)}
                sites += dict.fromkeys(matched.values())
                step = SiteFilter(hlo_pass, frozenset(n for n, s in matched.items() if chosen is None or s in chosen))
            provenance = run_pipeline(module, [step], numerics).provenance
        except PassError as err:  # one pass per run_pipeline: the passes before are known here only
            raise err.after(tuple(done)) from err.__cause__
        except HloError:
            raise
        except Exception as err:  # `matches` fails outside the pass's own run
            raise PassError(described(err), pass_name(hlo_pass), after=tuple(done)) from err
        done.append(pass_name(hlo_pass))
        origin.update(compose(origin, tuple(provenance.items())))
    return module.to_text(), sites


def minimal(chosen: list[Site], fails: Callable[[list[Site]], bool], parts: int = 2) -> list[Site]:
    """ddmin (Zeller and Hildebrandt): a failing set cut into `parts`, narrowed to a failing part, else
    to a failing complement, else cut finer, until no one site can be dropped (1-minimal)."""
    while len(chosen) > 1:
        size = len(chosen)
        pieces = [chosen[i * size // parts : (i + 1) * size // parts] for i in range(parts)]
        complements = [] if parts == 2 else [[s for s in chosen if s not in piece] for piece in pieces]
        found = next((i for i, subset in enumerate(pieces + complements) if fails(subset)), None)
        if found is not None:
            chosen = (pieces + complements)[found]
            parts = 2 if found < parts else max(parts - 1, 2)
        elif parts >= size:
            break
        else:
            parts = min(2 * parts, size)
    return chosen


def bisect_prepared(
    text: str,
    label: str,
    passes: str | Sequence[str | HloPass],
    numerics: Numerics,
    inputs: Sequence[np.ndarray] | None,
    seed: int,
    max_bytes: int,
) -> BisectReport:
    """The bisection of the pipeline `passes` on the module `text`, in this process: what a worker runs."""
    steps = bisected_passes(passes, numerics)
    sites = apply_at(text, label, steps, numerics, None)[1]
    original = _compile(with_numerics(text, numerics, label), label)
    _check_runnable([original], [label], max_bytes)
    given = _prepare(original, inputs, seed)
    expected = original(given)
    runs = [1]

    def fails(chosen: Sequence[Site]) -> bool:
        variant = apply_at(text, label, steps, numerics, frozenset(chosen))[0]
        executable = _compile(with_numerics(variant, numerics, label), label)
        outputs = executable(_prepare(executable, given, seed))
        runs[0] += 1
        return any(over(measure(a, b)) for a, b in zip(expected, outputs))

    def culprits(chosen: list[Site]) -> list[Site]:
        if len(chosen) == 1:
            return chosen
        half = len(chosen) // 2
        left, right = chosen[:half], chosen[half:]
        found = (culprits(left) if fails(left) else []) + (culprits(right) if fails(right) else [])
        if found or len(chosen) == 2:
            return found or chosen
        return minimal(chosen, fails, min(4, len(chosen)))  # the halves are known not to fail alone

    whole = [pass_name(hlo_pass) for hlo_pass in steps if not isinstance(hlo_pass, OpExpanderPass)]
    if whole and fails([]):
        raise HloError(f"{', '.join(whole)} move the outputs with no site rewritten: there is nothing to bisect")
    found = culprits(sites) if sites and fails(sites) else []
    return BisectReport(
        tuple(sites), tuple(found), runs[0], apply_at(text, label, steps, numerics, frozenset(found))[0]
    )


def bisect(
    module: str,
    passes: str | Sequence[str | HloPass],
    numerics: Numerics = "xla",
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    pool: IsolatedPool | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> BisectReport:
    """`hloopt trace --bisect` from Python: the sites of the pipeline `passes` on `module` that move its outputs."""
    with worker_pool(pool) as workers:
        args = (module, "module", passes, numerics, _host(inputs), seed, max_bytes)
        return isolated_call(bisect_prepared, *args, timeout=limit(timeout), label="module", pool=workers)
