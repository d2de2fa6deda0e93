"""The arithmetic and the report of ``hloopt trace``: per instruction, the propagated error (B's value
against A's) and the local error (B's instruction on A's operand values against A's value), the
three-way verdict against an f64 reference, and where a NaN or Inf was first made.

Errors are `OutputComparison`s (``arrays/comparing``): ULPs in the narrower type of the two, max abs
and max rel. Whether a local error is over tolerance is decided in ULPs of that type (`tolerance`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from hloopt.arrays.comparing import OutputComparison, compare_outputs, value_kind, xla_type_name
from hloopt.ir.element_types import BY_NAME, Kind
from hloopt.support.tolerances import TRACE_ULPS, TRACE_ULPS_NARROW

Verdict = Literal["precision", "better", "suspect"]
_WORST_FIRST: tuple[Verdict, ...] = ("suspect", "better", "precision")


def tolerance(element_type: str) -> int:
    """How many ULPs of `element_type` an instruction's local error may reach (`TRACE_ULPS`)."""
    if element_type in TRACE_ULPS:
        return TRACE_ULPS[element_type]
    row = BY_NAME.get(element_type)
    return TRACE_ULPS_NARROW if row is not None and row.kind in (Kind.FLOAT, Kind.COMPLEX) else 0


def measure(a: np.ndarray, b: np.ndarray) -> OutputComparison:
    """B's value against A's: the errors of `compare_outputs` (its pass/fail is not used here)."""
    return compare_outputs(0, a, b, (xla_type_name(a.dtype), xla_type_name(b.dtype)), 0.0, 0.0)


def over(error: OutputComparison) -> bool:
    """Whether `error` is more than its ULP type's `tolerance`, or has a NaN where the other has none."""
    if error.nan_mismatches:
        return True
    if error.max_ulp is None or error.ulp_type is None:
        return not error.bit_identical and error.max_abs_err > 0
    return error.max_ulp > tolerance(error.ulp_type)


def moved(error: OutputComparison) -> bool:
    """Whether any value differs (a type alone, or the sign of a zero, is no difference here)."""
    return error.nan_mismatches > 0 or error.max_abs_err > 0


def verdict(a: np.ndarray, b: np.ndarray, reference: np.ndarray) -> Verdict | None:
    """B against A as seen from the f64 `reference`, by mean absolute error against it: better when B's is
    smaller than A's, precision when it is larger by no more than the narrower type's `tolerance` (at
    least one) in ULPs at each reference value, suspect beyond; None for values that are not floats.
    A NaN where the reference has a number is as far as can be; elements where the reference is NaN
    are left out. (A mean, not a maximum: near zero one element's ULP count says little.)"""
    if value_kind(a.dtype) != "float" or value_kind(b.dtype) != "float":
        return None
    narrow = min(a.dtype, b.dtype, key=_bits)
    target = reference.astype(np.float64)
    keep = ~np.isnan(target)
    if not keep.any():
        return "precision"
    target = target[keep]
    far_a, far_b = _far(a[keep], target), _far(b[keep], target)
    if far_b < far_a:
        return "better"
    allowed = max(1, tolerance(xla_type_name(np.dtype(narrow)))) * float(np.mean(_spacing(target, narrow)))
    return "precision" if far_b <= far_a + allowed else "suspect"


def _bits(dtype: np.dtype) -> int:
    import ml_dtypes

    return int(ml_dtypes.finfo(dtype).nmant)


def _spacing(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The ULP of `dtype` at each of `values` (its smallest subnormal step near zero)."""
    import ml_dtypes

    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.maximum(np.abs(values), float(info.smallest_normal))))
    return np.maximum(np.exp2(exponent - int(info.nmant)), tiny)


def _far(values: np.ndarray, target: np.ndarray) -> float:
    """The mean absolute distance of `values` from `target`; infinite when one is NaN alone."""
    wide = values.astype(np.float64)
    if np.any(np.isnan(wide)):
        return float("inf")
    with np.errstate(invalid="ignore", over="ignore"):
        distance = np.abs(wide - target)
    return float(np.mean(np.where(wide == target, 0.0, distance)))


@dataclass(frozen=True)
class Traced:
    """One instruction of A, the one of B that stands for it, and how B's value differs."""

    origin: str
    a: str
    b: str
    scope: str
    propagated: OutputComparison
    #: B's instruction on A's operand values, against A; None where it could not be recomputed.
    local: OutputComparison | None
    verdict: Verdict | None = None
    #: For an instruction of a called computation, a loop body or a branch: where it was copied (the call,
    #: while or conditional, itself maybe inside another: ``while.3@call.1``); None in the entry.
    site: str | None = None
    #: The iteration of the innermost loop it ran in (None outside loops).
    iteration: int | None = None

    @property
    def makes_error(self) -> bool:
        return self.local is not None and over(self.local)

    @property
    def instruction(self) -> str:
        """The instruction this value is of, the same in every iteration: its origin without ``#i``."""
        return self.origin if self.iteration is None else self.origin.rpartition("#")[0]

    @property
    def shown(self) -> str:
        """How people are told of it: A's name, or for a copy its origin (``x@while.3#2``)."""
        return self.a if self.site is None else self.origin

    def to_dict(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "a": self.a,
            "b": self.b,
            "scope": self.scope,
            "propagated": _error_dict(self.propagated),
            "local": None if self.local is None else _error_dict(self.local),
            "local_over_tolerance": self.makes_error,
            "verdict": self.verdict,
            "site": self.site,
            "iteration": self.iteration,
            "instruction": self.instruction,
        }


def instance_of(origin: str) -> tuple[str | None, int | None]:
    """The site and innermost loop iteration an origin names (``x@while.3#2`` → ``while.3``, 2); HLO names
    hold neither ``@`` nor ``#``."""
    if "@" not in origin:
        return None, None
    site = origin.partition("@")[2]
    _, mark, iteration = origin.rpartition("#")
    if not mark or not iteration.isdigit():
        return site, None
    return site.rpartition("#")[0] if site.endswith(f"#{iteration}") else site, int(iteration)


@dataclass(frozen=True)
class LoopTrace:
    """A while loop: how many times it ran in A and in B (None: B has no loop of that origin), and the
    iterations traced (the first ``cap - 1`` and the last when it ran more than `cap` times)."""

    site: str
    iterations_a: int
    iterations_b: int | None
    traced: tuple[int, ...]
    cap: int


@dataclass(frozen=True)
class BranchTrace:
    """A conditional: the branch A took and B took (None: B has no conditional of that origin), of how
    many; the others did not run, so their instructions have no values."""

    site: str
    taken_a: int
    taken_b: int | None
    branches: int

    @property
    def not_executed(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.branches) if i not in (self.taken_a, self.taken_b))


@dataclass(frozen=True)
class Iterated:
    """One instruction of a loop body over its traced iterations: the iteration of its worst propagated
    error and of its worst local error."""

    instruction: str
    iterations: int
    worst_propagated: int
    worst_local: int | None
    #: Whether B's value differs from A's in any iteration.
    moved: bool


def finite(value: float) -> float | str:
    """`value`, or for JSON (which has no infinities) its name: "inf", "-inf", "nan"."""
    return value if np.isfinite(value) else str(value)


def _error_dict(error: OutputComparison) -> dict[str, Any]:
    return {
        "type_a": error.type_a,
        "type_b": error.type_b,
        "bit_identical": error.bit_identical,
        "max_ulp": error.max_ulp,
        "ulp_type": error.ulp_type,
        "max_abs_err": finite(error.max_abs_err),
        "max_rel_err": finite(error.max_rel_err),
        "nan_mismatches": error.nan_mismatches,
        "worst_index": None if error.worst_index is None else list(error.worst_index),
        "worst_a": error.worst_a,
        "worst_b": error.worst_b,
    }


@dataclass(frozen=True)
class OutputTrace:
    """One output: the instruction of A it is, the path back from it to where its error entered (output
    first; the last entry makes error when any does), and its verdict."""

    index: int
    instruction: str | None
    path: tuple[str, ...]
    verdict: Verdict | None


@dataclass(frozen=True)
class TraceReport:
    """Everything ``hloopt trace`` found; `to_dict` is the ``--json`` form (docs/trace-json.md)."""

    instructions: tuple[Traced, ...]
    outputs: tuple[OutputTrace, ...]
    rounds: int
    executions: int
    matched_by: Literal["provenance", "names"]
    reference: str | None = None
    #: Why the f64 reference could not be computed, when it was asked for.
    reference_error: str | None = None
    warnings: tuple[str, ...] = ()
    top: int = 10
    loops: tuple[LoopTrace, ...] = ()
    branches: tuple[BranchTrace, ...] = ()
    #: Computations applied per element (a reduce's, a sort's comparator…) and the instructions calling them:
    #: they have no tensor values of their own; their callers' values cover them.
    covered: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def first(self) -> Traced | None:
        """The first instruction in dependency order whose local error is over tolerance."""
        return next((traced for traced in self.instructions if traced.makes_error), None)

    @property
    def ok(self) -> bool:
        return self.first is None

    def ranked(self) -> list[tuple[str, list[Traced]]]:
        """The `top` instructions by local error (ULPs, then max rel), grouped by ``op_name`` scope, the
        group of the worst first; a loop body's instruction once, at its worst iteration."""
        made = [t for t in self.instructions if t.local is not None and moved(t.local)]
        made.sort(key=lambda t: (t.makes_error, _ulps(t.local), _rel(t.local)), reverse=True)
        once = list({t.instruction: t for t in reversed(made)}.values())[::-1]
        groups: dict[str, list[Traced]] = {}
        for traced in once[: self.top]:
            groups.setdefault(traced.scope, []).append(traced)
        return list(groups.items())

    def iterated(self) -> list[Iterated]:
        """Each loop body's instruction (A's dependency order) with the iterations of its worst errors."""
        by: dict[str, list[Traced]] = {}
        for traced in self.instructions:
            if traced.iteration is not None:
                by.setdefault(traced.instruction, []).append(traced)
        found = []
        for name, members in by.items():
            propagated = max(members, key=lambda t: _worst(t.propagated))
            local = [t for t in members if t.local is not None]
            worst = max(local, key=lambda t: _worst(t.local)) if local else None
            assert propagated.iteration is not None
            found.append(
                Iterated(
                    name,
                    len(members),
                    propagated.iteration,
                    None if worst is None else worst.iteration,
                    moved(propagated.propagated),
                )
            )
        return found

    @property
    def verdict(self) -> Verdict | None:
        """The module's: suspect when an output is, else better when one is, else precision."""
        verdicts = {output.verdict for output in self.outputs} - {None}
        return next((kind for kind in _WORST_FIRST if kind in verdicts), None)

    def to_dict(self) -> dict[str, Any]:
        first = self.first
        return {
            "schema": "hloopt-trace/1",
            "ok": self.ok,
            "matched_by": self.matched_by,
            "rounds": self.rounds,
            "executions": self.executions,
            "first": None if first is None else first.a,
            "reference": self.reference,
            "reference_error": self.reference_error,
            "verdict": self.verdict,
            "warnings": list(self.warnings),
            "top": [{"scope": scope, "instructions": [t.a for t in members]} for scope, members in self.ranked()],
            "outputs": [asdict(output) for output in self.outputs],
            "instructions": [traced.to_dict() for traced in self.instructions],
            "loops": [{**asdict(loop), "traced": list(loop.traced)} for loop in self.loops],
            "branches": [{**asdict(branch), "not_executed": list(branch.not_executed)} for branch in self.branches],
            "iterated": [asdict(each) for each in self.iterated()],
            "covered_by_caller": [{"computation": name, "callers": list(callers)} for name, callers in self.covered],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def _control_flow(self) -> list[str]:
        """The loops (iterations run and traced), branches (taken, not executed), and per-element computations."""
        lines = []
        for loop in self.loops:
            runs = f"{loop.iterations_a} iterations in A" + (
                "" if loop.iterations_b is None else f", {loop.iterations_b} in B"
            )
            traced = ", ".join(map(str, loop.traced)) if len(loop.traced) <= 8 else f"{len(loop.traced)} of them"
            lines.append(f"loop %{loop.site}: {runs}; traced: {traced or 'none'} (cap {loop.cap})")
        worst = [each for each in self.iterated() if each.moved]
        for each in worst:
            local = "" if each.worst_local is None else f", local at {each.worst_local}"
            lines.append(f"  %{each.instruction}: worst propagated error at iteration {each.worst_propagated}{local}")
        for branch in self.branches:
            other = "" if branch.taken_b is None else f", B took {branch.taken_b}"
            idle = ", ".join(map(str, branch.not_executed))
            lines.append(
                f"conditional %{branch.site}: A took branch {branch.taken_a}{other}; not executed: {idle or 'none'}"
            )
        if self.covered:
            named = "; ".join(f"%{name} by {', '.join('%' + c for c in callers)}" for name, callers in self.covered)
            lines.append(f"applied per element, covered by their callers' values: {named}")
        return lines

    def render(self) -> str:
        """For people: the first instruction that makes error, the top ones by scope, each output's path."""
        lines = [
            f"matched {len(self.instructions)} instructions by {self.matched_by}; "
            f"{self.rounds} rounds, {self.executions} executions"
        ]
        first = self.first
        if first is None:
            lines.append("no instruction's local error is over tolerance")
        else:
            lines.append(f"first local error over tolerance: %{first.shown} (B: %{first.b}): {error_said(first.local)}")
        ranked = self.ranked()
        if ranked:
            lines.append(f"largest local errors (top {self.top}), by op_name scope:")
            for scope, members in ranked:
                lines.append(f"  {scope or '(no op_name)'}:")
                lines += [
                    f"    %{t.shown}: local {error_said(t.local)}; propagated {error_said(t.propagated)}"
                    for t in members
                ]
        for output in self.outputs:
            said = f"output {output.index}: "
            if output.instruction is None:
                lines.append(said + "not an instruction of the entry (not traced)")
                continue
            shown = {t.a: t.shown for t in self.instructions}
            said += " <- ".join(f"%{shown.get(name, name)}" for name in output.path)
            if output.verdict is not None:
                said += f"  [{output.verdict}]"
            lines.append(said)
        lines += self._control_flow()
        if self.reference_error:
            lines.append(f"no f64 reference: {self.reference_error}")
        elif self.verdict is not None:
            lines.append(f"verdict against {self.reference}: {self.verdict}")
        return "\n".join(lines)


def _worst(error: OutputComparison | None) -> tuple[int, int, float]:
    return (0, 0, 0.0) if error is None else (error.nan_mismatches, _ulps(error), _rel(error))


def _ulps(error: OutputComparison | None) -> int:
    return 0 if error is None or error.max_ulp is None else error.max_ulp


def _rel(error: OutputComparison | None) -> float:
    return 0.0 if error is None else error.max_rel_err


def error_said(error: OutputComparison | None) -> str:
    """An instruction's error in a few words, as `render` and the HTML report say it."""
    if error is None:
        return "not recomputed"
    if error.bit_identical:
        return "bit-identical"
    ulps = "" if error.max_ulp is None else f"{error.max_ulp} ULP ({error.ulp_type}), "
    nans = f", {error.nan_mismatches} NaN mismatches" if error.nan_mismatches else ""
    return f"{ulps}max abs {error.max_abs_err:.3g}, max rel {error.max_rel_err:.3g}{nans}"


def path_back(start: str, by_a: Mapping[str, Traced], inputs: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """From `start` back through the operand whose propagated error is largest, until an instruction that
    makes error itself, or one whose operands carry none."""
    path = [start]
    current = by_a.get(start)
    while current is not None and not current.makes_error:
        carried = [by_a[name] for name in inputs.get(current.a, ()) if name in by_a]
        carried = [t for t in carried if moved(t.propagated) and t.a not in path]
        if not carried:
            break
        current = max(carried, key=lambda t: (t.propagated.nan_mismatches, _ulps(t.propagated), _rel(t.propagated)))
        path.append(current.a)
    return tuple(path)


@dataclass(frozen=True)
class NanOrigin:
    """The first instruction, in dependency order, that makes NaN or Inf from operands that are all finite:
    its first such element, the value there and each operand's value there (or its range, for an operand
    of other dimensions)."""

    instruction: str
    opcode: str
    index: tuple[int, ...]
    value: str
    operands: tuple[tuple[str, str], ...]

    def render(self) -> str:
        at = ",".join(map(str, self.index))
        head = f"first NaN/Inf from finite operands: %{self.instruction} ({self.opcode}) at [{at}] = {self.value}"
        return "\n".join([head, *(f"  operand %{name} = {value}" for name, value in self.operands)])

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "index": list(self.index), "operands": [list(pair) for pair in self.operands]}


def first_nonfinite(array: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first NaN or Inf in `array`, or None when every element is finite (or not a float)."""
    if value_kind(array.dtype) not in ("float", "complex") or array.size == 0:
        return None
    bad = ~np.isfinite(array.astype(np.complex128 if array.dtype.kind == "c" else np.float64))
    if not bad.any():
        return None
    return tuple(int(i) for i in np.argwhere(bad)[0])


def value_at(array: np.ndarray, index: tuple[int, ...]) -> str:
    """`array`'s element at `index` when the shapes agree, else its range."""
    if len(index) == array.ndim and all(i < n for i, n in zip(index, array.shape)):
        return str(array[index])
    if array.size == 0 or value_kind(array.dtype) == "complex":
        return f"{array.dtype.name}{list(array.shape)}"
    wide = array.astype(np.float64)
    return f"{array.dtype.name}{list(array.shape)} in [{wide.min():.6g}, {wide.max():.6g}]"
