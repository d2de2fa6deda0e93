"""``hloopt dtypes``: which element types each layer computes in, before and after a pipeline.

Users ask "which datatype is used for each layer" of a Neuron compile. This answers it without the compiler:
every dot, convolution, reduce and reduce-window, and each layer's elementwise ops as groups, with the types
going in and coming out before the passes and after them, grouped by the ``op_name`` metadata scope (the
layers a user wrote), and for each op the auto-cast left alone, why. An op after the passes is matched to
the op it comes from through each pass's `PassResult.provenance`, so a rewrite that renames is followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hloopt.ir.attribute_values import Metadata
from hloopt.ir.element_types import FLOAT_TYPES
from hloopt.ir.module import Instruction, Module
from hloopt.ir.opcodes import BY_NAME as OPCODES_BY_NAME
from hloopt.ir.opcodes import Elementwise
from hloopt.ir.shape import ArrayShape, leaf_shapes
from hloopt.passes.base import HloPass, PassResult
from hloopt.passes.pipeline import run_pipeline
from hloopt.passes.simplify_converts import preserves_values

#: The ops listed one by one; elementwise ops are listed as groups.
LISTED = ("dot", "convolution", "reduce", "reduce-window")
#: Those the coverage line counts: every one must appear.
MATRIX = ("dot", "convolution")
#: What the auto-cast does to each op, given the module as the pass sees it and the pass: instruction name →
#: (what it does: ``cast bf16``, ``accumulate f32``; or None and why it leaves the op alone: ``stamped``, ``io``,
#: ``integer``, ``not-covered``). Empty for any other pass.
Plan = Callable[[Module, HloPass], dict[str, tuple[str | None, str | None]]]


@dataclass(frozen=True)
class Row:
    """One line of the table: a listed op, or a layer's elementwise ops of one before/after signature."""

    kind: str
    names: tuple[str, ...]
    opcodes: tuple[str, ...]
    before: str
    after: str
    #: What the auto-cast did to it (``cast bf16``), or None.
    auto_cast: str | None = None
    #: Why the auto-cast left it alone, or None.
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "instructions": list(self.names),
            "opcodes": list(self.opcodes),
            "before": self.before,
            "after": self.after,
            "auto_cast": self.auto_cast,
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class DtypeTable:
    """The answer for one module: its rows by scope, in the order the module first reaches each scope."""

    module: str
    pipeline: str | None
    scopes: tuple[tuple[str, tuple[Row, ...]], ...]
    #: The dots and convolutions of the input, which the rows must all list.
    matrix_ops: int

    @property
    def coverage(self) -> tuple[int, int]:
        """(dots and convolutions listed, dots and convolutions in the input)."""
        listed = sum(len(row.names) for _, rows in self.scopes for row in rows if row.kind in MATRIX)
        return listed, self.matrix_ops

    def render(self) -> str:
        """The table as text: a heading per scope, a line per row."""
        lines = [f"{self.module}: after {self.pipeline or 'no passes'}"]
        header = ("kind", "instruction", "before", "after", "auto-cast")
        body: list[tuple[str, ...]] = []
        heads: list[int] = []
        for scope, rows in self.scopes:
            heads.append(len(body))
            body.append((scope,))
            for row in rows:
                what = row.names[0] if len(row.names) == 1 else f"{len(row.names)}× {','.join(row.opcodes)}"
                note = f"skipped: {row.skipped}" if row.skipped else row.auto_cast or ""
                body.append((row.kind, what, row.before, row.after, note))
        widths = [max(len(r[i]) for r in [header, *body] if len(r) > 1) for i in range(len(header))]
        lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        for cells in body:
            if len(cells) == 1:
                lines.append(cells[0])
            else:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        listed, total = self.coverage
        lines.append(f"dots and convolutions: {listed} of {total} listed")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        listed, total = self.coverage
        return {
            "module": self.module,
            "pipeline": self.pipeline,
            "dots_and_convolutions": {"listed": listed, "total": total},
            "scopes": [{"scope": scope, "rows": [row.to_dict() for row in rows]} for scope, rows in self.scopes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


def dtype_table(
    module: Module,
    pipeline: str | None,
    name: str = "module",
    plan: Plan | None = None,
    numerics: str = "xla",
) -> DtypeTable:
    """The table of `module` (left as it is) before and after `pipeline`; `plan` says what the auto-cast
    pass does to each op, and why it leaves one alone (`auto_cast_plan`)."""
    before = module.clone()
    after = module.clone()
    trace = _Trace(plan)
    if pipeline is not None:
        run_pipeline(after, pipeline, numerics=numerics, observe=trace.observe)
    by_origin: dict[str, list[Instruction]] = {}
    for instruction in after.instructions():
        by_origin.setdefault(trace.origin(instruction.name), []).append(instruction)
    scopes: dict[str, list[tuple[str, Instruction, Instruction | None, tuple[str | None, str | None]]]] = {}
    for instruction in before.instructions():
        kind = _kind(instruction)
        if kind is None:
            continue
        made = [i for i in by_origin.get(instruction.name, []) if i.opcode == instruction.opcode]
        now = next((i for i in made if i.name == instruction.name), made[0] if made else None)
        decided = trace.decided.get(now.name if now is not None else instruction.name, (None, None))
        now = now or _applying(instruction, by_origin.get(instruction.name, []))
        scopes.setdefault(_scope(instruction), []).append((kind, instruction, now, decided))
    table = tuple((scope, _rows(entries)) for scope, entries in scopes.items())
    total = sum(1 for i in before.instructions() if i.opcode in MATRIX)
    return DtypeTable(name, pipeline, table, total)


class _Trace:
    """What the pipeline did, pass by pass: provenance (made → source), and the auto-cast's plan."""

    def __init__(self, plan: Plan | None) -> None:
        self.steps: list[dict[str, str]] = []
        self.decided: dict[str, tuple[str | None, str | None]] = {}
        self._plan = plan

    def observe(self, hlo_pass: HloPass, module: Module, result: PassResult | None) -> None:
        if result is None:
            if self._plan is not None and not self.decided:
                self.decided = self._plan(module, hlo_pass)
            return
        step: dict[str, str] = {}
        for made, source in result.provenance:
            step.setdefault(made, source)
        self.steps.append(step)

    def origin(self, name: str) -> str:
        """The input instruction `name` (in the module after every pass) comes from."""
        for step in reversed(self.steps):
            name = step.get(name, name)
        return name


def _applying(instruction: Instruction, made: list[Instruction]) -> Instruction | None:
    """Of the instructions `instruction` was rewritten as, the one applying its computations (a reduce rounded
    after each step is a loop whose ``map`` applies the reducer): it shows the types the op computes in."""
    calls = [c.name for c in instruction.called_computations()]
    return next((i for i in made if calls and [c.name for c in i.called_computations()] == calls), None)


def _kind(instruction: Instruction) -> str | None:
    if instruction.opcode in LISTED:
        return instruction.opcode
    row = OPCODES_BY_NAME.get(instruction.opcode)
    if row is not None and row.elementwise not in (Elementwise.NONE, Elementwise.CONVERT):
        return "elementwise"
    return None


def _scope(instruction: Instruction) -> str:
    """The ``op_name`` without its last part (the primitive: ``jit(f)/layer_3/attention``); the computation
    for an op without a scope (no ``op_name``, or one of a single part, as jax writes inside a loop body)."""
    metadata = instruction.attributes.get("metadata")
    quoted = metadata.get("op_name") if isinstance(metadata, Metadata) else None
    scope = re.sub(r"\\(.)", r"\1", quoted[1:-1]).rpartition("/")[0] if quoted else ""
    if scope:
        return scope
    return f"%{instruction.parent.name}" if instruction.parent is not None else "%?"


def _types(instruction: Instruction | None, distinct: bool = False) -> str:
    """``f32,f32 -> bf16``: the element types going in (each type once when `distinct`, so that an
    elementwise group holds unary and binary ops alike) and coming out. A listed op's operand widened by a
    convert shows the type it was rounded to: the auto-cast's bf16 operands reach XLA's CPU dot as f32, exactly."""
    if instruction is None:
        return "(removed)"
    listed = instruction.opcode in LISTED
    ins = [_leaf_types(_rounded(o) if listed else o) for o in instruction.operands]
    return f"{','.join(dict.fromkeys(ins) if distinct else ins)} -> {_leaf_types(instruction)}"


def _rounded(operand: Instruction) -> Instruction:
    """The value a widening float `convert` carries unchanged (`preserves_values`, as simplify-converts reads it)."""
    if operand.opcode != "convert" or len(operand.operands) != 1:
        return operand
    source = operand.operands[0]
    if not isinstance(source.shape, ArrayShape) or not isinstance(operand.shape, ArrayShape):
        return operand
    narrow, wide = source.shape.element_type, operand.shape.element_type
    floats = narrow in FLOAT_TYPES and wide in FLOAT_TYPES
    return source if floats and narrow != wide and preserves_values(narrow, wide) else operand


def _leaf_types(instruction: Instruction) -> str:
    if instruction.shape is None:
        return "?"
    leaves = [leaf.element_type for leaf in leaf_shapes(instruction.shape)]
    return leaves[0] if len(leaves) == 1 else "(" + ",".join(leaves) + ")"


def _rows(
    entries: Sequence[tuple[str, Instruction, Instruction | None, tuple[str | None, str | None]]],
) -> tuple[Row, ...]:
    """A row per listed op, in order; the scope's elementwise ops after them, one row per signature."""
    rows: list[Row] = []
    groups: dict[tuple[str, str, str | None, str | None], tuple[list[str], list[str]]] = {}
    for kind, before, after, decided in entries:
        if kind != "elementwise":
            rows.append(Row(kind, (before.name,), (before.opcode,), _types(before), _types(after), *decided))
            continue
        names, opcodes = groups.setdefault((_types(before, True), _types(after, True), *decided), ([], []))
        names.append(before.name)
        if before.opcode not in opcodes:
            opcodes.append(before.opcode)
    for (was, now, action, skipped), (names, opcodes) in groups.items():
        rows.append(Row("elementwise", tuple(names), tuple(opcodes), was, now, action, skipped))
    return tuple(rows)


def auto_cast_decisions(module: Module, hlo_pass: HloPass) -> dict[str, tuple[str | None, str | None]]:
    """What the auto-cast pass does to each op of `module`, from the plan it acts on (`auto_cast_plan`), so
    the table and the rewrite cannot disagree; nothing for any other pass."""
    from hloopt.passes.neuron_auto_cast import NeuronAutoCast, auto_cast_plan

    if not isinstance(hlo_pass, NeuronAutoCast):
        return {}
    decided: dict[str, tuple[str | None, str | None]] = {}
    for op, decision in auto_cast_plan(module, hlo_pass).items():
        done = [f"cast {decision.cast}"] * (decision.cast is not None) + ["accumulate f32"] * decision.accumulate_f32
        done += ["accumulate per step"] * decision.per_step
        decided[op.name] = (", ".join(done) or None, decision.reason)
    return decided
