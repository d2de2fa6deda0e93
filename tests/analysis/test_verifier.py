"""The verifier the pass manager runs after each changing pass: what it accepts and what it names."""

from __future__ import annotations

import pickle

import pytest

from hloopt import parse
from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.analysis.verifier import VerificationError, verify
from hloopt.ir import ArrayShape, Instruction, Module


def _module(body: str, params: str = "a = f32[4] parameter(0)\n  b = f32[4] parameter(1)") -> Module:
    return parse(f"HloModule m\nENTRY e {{\n  {params}\n  {body}\n}}\n")


def _problems(module: Module) -> list[str]:
    try:
        verify(module)
    except VerificationError as err:
        return err.problems
    return []


@pytest.mark.parametrize(
    "body",
    [
        "ROOT r = f32[4] add(a, b)",
        "ROOT r = f32[4] negate(a)",
        "ROOT r = pred[4] compare(a, b), direction=LT",
        "c = pred[4] compare(a, b), direction=LT\n  ROOT r = f32[4] select(c, a, b)",
        "ROOT r = (f32[4], f32[4]) tuple(a, b)",
        "ROOT r = f32[4] shuffle(a), dimensions={0}, mode=rotate, shifts={1}",
    ],
)
def test_valid_modules_pass(body: str) -> None:
    assert _problems(_module(body)) == []


@pytest.mark.parametrize(
    ("body", "params", "expected"),
    [
        (
            "ROOT r = f32[4] add(a, b)",
            "a = f32[4] parameter(0)\n  b = bf16[4] parameter(1)",
            "add operands have different element types: f32, bf16",
        ),
        ("ROOT r = f32[8] add(a, b)", None, "shape f32[8] does not follow from the operands (f32[4])"),
        ("ROOT r = bf16[4] multiply(a, b)", None, "shape bf16[4] does not follow from the operands (f32[4])"),
        ("ROOT r = f32[4] and(a, b)", None, "and needs integer or pred operands, not f32, f32"),
        ("ROOT r = f32[4] popcnt(a)", None, "popcnt needs integer operands, not f32"),
        ("ROOT r = f32[4] mulhi(a, b)", None, "mulhi needs integer operands, not f32, f32"),
        ("ROOT r = f32[2] acosh(a)", None, "shape f32[2] does not follow from the operands (f32[4])"),
        (
            "ROOT r = f32[2,2] shuffle(a), dimensions={0}, mode=rotate, shifts={1}",
            None,
            "shape f32[2,2] does not follow from the operands (f32[4])",
        ),
        (
            "ROOT r = c64[4] abs(a)",
            "a = c64[4] parameter(0)",
            "shape c64[4] does not follow from the operands (f32[4])",
        ),
    ],
)
def test_wrong_shapes_and_types_are_named(body: str, params: str | None, expected: str) -> None:
    module = _module(body, params) if params else _module(body)
    assert _problems(module) == [f"%r in %e: {expected}"]


def test_a_real_abs_of_a_complex_number_passes() -> None:
    assert _problems(_module("ROOT r = f32[4] abs(a)", "a = c64[4] parameter(0)")) == []


def test_graph_mistakes_are_named() -> None:
    module = _module("ROOT r = f32[4] add(a, b)")
    entry = module.entry
    _, _, root = entry.instructions
    stray = Instruction("r", "negate", ArrayShape("f32", (4,), (False,)))
    stray.append_operand(root)
    entry.instructions.insert(0, stray)  # uses %r before it is defined, and reuses its name
    stray.parent = entry
    problems = _problems(module)
    assert "%r in %e: operand %r is used before it is defined" in problems
    assert "%r in %e: name used twice" in problems


def test_entry_layout_must_match_the_entry() -> None:
    module = _module("ROOT r = f32[4] add(a, b)")
    assert _problems(module) == []
    text = module.to_text().replace("->f32[4]{0}}", "->f32[5]{0}}")
    assert "->f32[5]{0}}" in text
    assert _problems(parse(text)) == ["entry result is f32[4], entry_computation_layout says f32[5]"]


def test_the_pass_is_named_in_the_message() -> None:
    with pytest.raises(VerificationError, match=r"^after pass upcast-all-to-fp32: invalid module:\n  %r in %e: "):
        verify(_module("ROOT r = f32[8] add(a, b)"), culprit="upcast-all-to-fp32")


@pytest.mark.parametrize("index", ["2", "-1", "-9999999999"])
def test_a_tuple_index_out_of_range_is_named_not_a_crash(index: str) -> None:
    module = _module(f"t = (f32[4], f32[4]) tuple(a, b)\n  ROOT r = f32[4] get-tuple-element(t), index={index}")
    assert _problems(module) == [f"%r in %e: index {int(index)} is out of range for a tuple of 2 elements"]


def test_negative_dot_dimensions_are_not_read_from_the_end() -> None:
    """Python would read dims[-1]; XLA's dimension numbers are never negative, so the shape is unknown."""
    from hloopt.analysis.shape_inference import dot_shape
    from hloopt.ir.attribute_values import DotDimensionNumbers

    matrix = ArrayShape("f32", (2, 3), (False, False))
    assert dot_shape(matrix, matrix, DotDimensionNumbers(lhs_contracting=(-1,), rhs_contracting=(1,)), "f32") is None
    assert dot_shape(
        matrix, matrix, DotDimensionNumbers(lhs_contracting=(1,), rhs_contracting=(1,)), "f32"
    ) == ArrayShape("f32", (2, 2), (False, False))


@pytest.mark.parametrize("opcode", ["acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh", "exp2", "log2"])
def test_every_unary_elementwise_opcode_is_inferred(opcode: str) -> None:
    """The opcode table marks these unary-same as XLA does, so an omitted shape is the operand's."""
    module = parse(f"HloModule m\nENTRY e {{\n  a = f64[3] parameter(0)\n  ROOT r = {opcode}(a)\n}}\n")
    inferred = ShapeResolver(module)(module.entry.instructions[-1])
    assert inferred is not None and inferred.to_text() == "f64[3]{0}"


@pytest.mark.parametrize(
    "body",
    [
        "ROOT r = s16[] bitcast(h)",
        "ROOT r = f16[2,4]{1,0} bitcast(u)",
        "ROOT r = s16[] bitcast-convert(h)",
        "ROOT r = u8[4,4]{1,0} bitcast-convert(u)",
        "ROOT r = bf16[9] bitcast(h)",  # one element type: XLA's parser takes any size
    ],
)
def test_bitcasts_keeping_the_bits_pass(body: str) -> None:
    assert _problems(_module(body, "h = bf16[] parameter(0)\n  u = u32[4] parameter(1)")) == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("ROOT r = f32[] bitcast(h)", "changes the byte size (2 → 4)"),
        ("ROOT r = f16[4]{0} bitcast(u)", "changes the byte size (16 → 8)"),
        ("ROOT r = f32[] bitcast-convert(h)", "changes the bit width"),
        ("ROOT r = u8[4,2]{1,0} bitcast-convert(u)", "changes the bit width"),
    ],
)
def test_bitcasts_breaking_the_bits_are_named(body: str, words: str) -> None:
    (problem,) = _problems(_module(body, "h = bf16[] parameter(0)\n  u = u32[4] parameter(1)"))
    assert "%r" in problem and words in problem


def test_a_verification_error_crosses_a_process_boundary_as_itself() -> None:
    """Worker processes pickle errors home; a plain HloError in its place would lose the kind."""
    error = VerificationError(["%a in %e: add operands differ"], before_passes=True)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is VerificationError and str(back) == str(error) and back.problems == error.problems
