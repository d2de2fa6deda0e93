"""Deep graphs and deeply nested tuples and literals never reach Python's recursion limit.

The deep tuples are built as IR (text nesting them is tests/text/test_deep_nesting.py);
the 100k-instruction chain is real text.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

from hloopt import parse
from hloopt.analysis.verifier import verify
from hloopt.ir.literal import Literal, decode_literal, format_literal
from hloopt.ir.module import Computation, Instruction, Module
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, default_layout, leaf_shapes, map_leaves
from hloopt.passes.base import to_f32
from hloopt.passes.pipeline import run_pipeline

DEPTH = 10_000
#: Past the default recursion limit (1000) but not far: every instruction of the converted module
#: carries a depth-d shape (O(d²) text in all).
MODULE_DEPTH = 1_200
LITERAL_DEPTH = 1_500
BF16 = ArrayShape("bf16", (2,), (False,), default_layout(1))


def nested(depth: int, leaf: Shape = BF16, pairs: bool = True) -> TupleShape:
    """((…(leaf, leaf)…, leaf), leaf), or (((…(leaf)…))) without `pairs`: `depth` levels."""
    shape: Shape = leaf
    for _ in range(depth):
        shape = TupleShape((shape, leaf) if pairs else (shape,))
    return shape  # type: ignore[return-value]


@pytest.fixture(autouse=True)
def default_recursion_limit() -> object:
    """Python's default limit, whatever a plugin set: recursion per level must fail here, not pass."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(previous)


@pytest.mark.slow
def test_chain_of_100k_instructions_through_every_pass_the_verifier_and_printer() -> None:
    lines = [
        "HloModule chain",
        "",
        "ENTRY e {",
        "  p = bf16[4] parameter(0)",
        "  c = f16[4] constant({1, 2, 3, 4})",
        "  k = bf16[4] convert(c)",
    ]
    previous = "p"
    for i in range(100_000):  # alternate written and omitted shapes: inference walks the whole chain
        lines.append(f"  a{i} = add({previous}, k)" if i % 2 else f"  a{i} = bf16[4] multiply({previous}, k)")
        previous = f"a{i}"
    lines += [f"  ROOT r = bf16[4] copy({previous})", "}"]
    module = parse("\n".join(lines) + "\n")
    report = run_pipeline(module, "all,fold-constant-converts", check_changed="both")
    assert {p.name: p.rewritten for p in report.passes}["upcast-all-to-fp32"] == 50_004
    verify(module)
    text = module.to_text()
    assert text.count("\n") > 100_000 and "bf16" not in text


def test_deep_tuple_shapes() -> None:
    deep = nested(DEPTH)
    assert len(leaf_shapes(deep)) == DEPTH + 1
    upcast = map_leaves(deep, lambda s: s.with_element_type("f32"))
    assert upcast == to_f32(deep) and upcast != deep and hash(upcast) == hash(to_f32(deep))
    assert map_leaves(deep, lambda s: s) is deep
    assert upcast.to_text().count("f32[2]") == DEPTH + 1


def test_deep_tuple_literals() -> None:
    shape = nested(LITERAL_DEPTH, ArrayShape("f32", (), (), default_layout(0)))
    text = "( " * LITERAL_DEPTH + "1" + ", 2 )" * LITERAL_DEPTH
    literal = Literal(shape, text=text)
    literal.check()
    value = decode_literal(text, shape)
    printed = format_literal(value, shape)
    assert printed.replace(" ", "") == text.replace(" ", "")
    bad = Literal(shape, text=text.replace("2 )", "2, 3 )", 1))
    with pytest.raises(ValueError, match="tuple literal has 3 elements"):
        bad.check()


def deep_module() -> Module:
    """ENTRY: a deep-tuple bf16 parameter into a custom-call (a boundary the upcast pass must convert around)."""
    deep = nested(MODULE_DEPTH, pairs=False)
    module = Module("deep")
    entry = module.add_computation(Computation("e", is_entry=True))
    param = entry.append(Instruction("p", "parameter", deep, parameter_number=0))
    call = entry.append(Instruction("cc", "custom-call", deep, [param], {"custom_call_target": '"x"'}))
    constant = entry.append(Instruction("k", "constant", BF16))
    constant.literal = Literal(BF16, value=np.array([1, 2], dtype=BF16_NUMPY))
    entry.append(Instruction("t", "tuple", TupleShape((deep, BF16)), [call, constant]))
    entry.root = entry.instructions[-1]
    return module


BF16_NUMPY = ml_dtypes.bfloat16


@pytest.mark.slow
def test_deep_tuples_through_the_passes_verifier_and_printer() -> None:
    module = deep_module()
    verify(module)
    report = run_pipeline(module, "all,fold-constant-converts", check_changed="both")
    assert report.changed
    verify(module)
    text = module.to_text()
    converts = text.count(" convert(")
    assert converts == 2  # the leaf narrowed before the custom-call and widened after, at the bottom
    assert text.count("get-tuple-element(") == 2 * MODULE_DEPTH and text.count(" tuple(") == 2 * MODULE_DEPTH + 1
