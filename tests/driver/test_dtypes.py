"""``hloopt dtypes``' table: every dot and convolution listed, types before and after matched through the
passes' provenance, grouped by op_name scope, and the auto-cast's own decision for each op."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from hloopt.driver.dtypes import MATRIX, DtypeTable, Row, auto_cast_decisions, dtype_table
from hloopt.passes.neuron_cc_flags import parse_neuron_cc_flags
from hloopt.text.parser import parse

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.hlo"))
MODES = ("none", "matmult", "all")
TYPES = {"bf16": "bf16", "fp16": "f16", "tf32": "f32", "fp8_e4m3": "f8e4m3"}


def table(text: str, flags: str, passes: str | None = "all") -> DtypeTable:
    pipeline = parse_neuron_cc_flags(flags).with_passes(passes)
    return dtype_table(parse(text, "m.hlo"), pipeline, "m.hlo", plan=auto_cast_decisions)


def rows(result: DtypeTable) -> list[Row]:
    return [row for _, scope_rows in result.scopes for row in scope_rows]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize(
    ("mode", "cast_type", "accumulate"), list(itertools.product(MODES, TYPES, ("enable", "disable")))
)
def test_every_dot_and_convolution_of_the_examples_is_listed(
    example: Path, mode: str, cast_type: str, accumulate: str
) -> None:
    flags = f"--auto-cast {mode} --auto-cast-type {cast_type} --{accumulate}-mixed-precision-accumulation"
    result = table(example.read_text(), flags)
    listed, total = result.coverage
    assert listed == total > 0
    for row in rows(result):
        assert row.after != "(removed)", row
        if row.kind in MATRIX and mode != "none" and row.before.startswith("f32,f32"):
            # an f32 dot the auto-cast covers computes on operands of the auto-cast type, or says why not
            assert row.after.startswith(",".join([TYPES[cast_type]] * 2)) or row.skipped, row


def test_the_int_dot_the_downcast_stamped_is_followed_and_named_stamped() -> None:
    """neuron-int-matmul-downcast makes a new f32 dot: provenance leads back to the s8 dot it replaces."""
    result = table((EXAMPLES[0].parent / "int8_matmul.hlo").read_text(), "--auto-cast matmult")
    (dot,) = [row for row in rows(result) if row.kind == "dot"]
    assert (dot.before, dot.after, dot.skipped) == ("s8,s8 -> s32", "f32,f32 -> f32", "stamped")


MODULE = """HloModule m

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e (x: f32[4,8], w: f32[8,8], i: s32[4]) -> (f32[4], s32[4]) {
  %x = f32[4,8] parameter(0)
  %w = f32[8,8] parameter(1)
  %i = s32[4] parameter(2)
  %d = f32[4,8] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/layer_0/attention/dot_general"}
  %t = f32[4,8] tanh(%d), metadata={op_name="jit(f)/layer_0/attention/tanh"}
  %m = f32[4,8] multiply(%t, %t), metadata={op_name="jit(f)/layer_0/attention/mul"}
  %z = f32[] constant(0)
  %r = f32[4] reduce(%m, %z), dimensions={1}, to_apply=%sum, metadata={op_name="jit(f)/layer_1/reduce_sum"}
  %j = s32[4] add(%i, %i), metadata={op_name="add"}
  ROOT %o = (f32[4], s32[4]) tuple(%r, %j)
}
"""


def test_scopes_rows_and_decisions() -> None:
    result = table(MODULE, "--auto-cast matmult --auto-cast-type bf16")
    assert [scope for scope, _ in result.scopes] == ["%sum", "jit(f)/layer_0/attention", "jit(f)/layer_1", "%e"]
    by_scope = dict(result.scopes)
    dot, elementwise = by_scope["jit(f)/layer_0/attention"]
    assert (dot.kind, dot.names, dot.before, dot.after) == ("dot", ("d",), "f32,f32 -> f32", "bf16,bf16 -> f32")
    assert dot.auto_cast is not None and dot.auto_cast.startswith("cast bf16") and dot.skipped is None
    assert (elementwise.kind, elementwise.names, elementwise.opcodes) == (
        "elementwise",
        ("t", "m"),
        ("tanh", "multiply"),
    )
    assert elementwise.skipped == "not-covered"  # matmult casts dots and convolutions only
    (integer,) = by_scope["%e"]
    assert (integer.names, integer.before, integer.skipped) == (("j",), "s32 -> s32", "integer")
    (reduce,) = by_scope["jit(f)/layer_1"]
    assert (reduce.kind, reduce.before) == ("reduce", "f32,f32 -> f32")


def test_without_passes_before_is_after() -> None:
    result = dtype_table(parse(MODULE, "m.hlo"), None, "m.hlo")
    assert all(row.before == row.after and row.auto_cast is row.skipped is None for row in rows(result))
    assert "after no passes" in result.render()


def test_the_text_and_the_json_say_the_same() -> None:
    result = table(MODULE, "--auto-cast all")
    data = json.loads(result.to_json())
    assert data["dots_and_convolutions"] == {"listed": 1, "total": 1}
    assert data["pipeline"] == "all,neuron-auto-cast{mode=all,type=bf16,accumulate=f32}"
    text = result.render()
    for scope in data["scopes"]:
        assert f"\n{scope['scope']}\n" in text
        for row in scope["rows"]:
            assert row["before"] in text and row["after"] in text
    assert text.endswith("dots and convolutions: 1 of 1 listed\n")


def test_the_module_given_is_left_as_it_is() -> None:
    module = parse(MODULE, "m.hlo")
    before = module.to_text()
    dtype_table(module, "all,neuron-auto-cast{mode=all}", "m.hlo", plan=auto_cast_decisions)
    assert module.to_text() == before
