"""Unit tests of the checks the differential fuzzer asked for (tests/errors/xla_parity.hlo has the refusals
in XLA's words): shapes XLA infers, computation attributes, stack-frame entries, sharding devices."""

from __future__ import annotations

import pytest

from hloopt import parse
from hloopt.errors import HloParseError
from hloopt.ir.opcodes import BY_NAME
from hloopt.text.validation import _XLA_NEEDS_SHAPE, InvalidHlo, check_computation_attribute, check_stack_frame_entry


def _entry(*lines: str) -> str:
    return "\n".join(["HloModule m", "", "ENTRY e {", *(f"  {line}" for line in lines), "}", ""])


def test_every_opcode_xla_needs_the_shape_of_is_an_opcode() -> None:
    assert set(BY_NAME) >= _XLA_NEEDS_SHAPE


@pytest.mark.parametrize("opcode", sorted(_XLA_NEEDS_SHAPE - {"constant", "parameter"}))  # (refused as they are read)
def test_an_opcode_xla_does_not_infer_needs_its_shape(opcode: str) -> None:
    with pytest.raises(HloParseError) as caught:
        parse(_entry("a = f32[2] parameter(0)", f"ROOT r = {opcode}(a)"))
    assert caught.value.message == f"cannot infer shape for opcode: {opcode}"


@pytest.mark.parametrize(
    "lhs, rhs",
    [("f32[2]", "bf16[2]"), ("f32[?,2]", "f32[3,2]"), ("s32[2]{0}", "s32[2]")],
    ids=["floats of two precisions", "an unbounded dimension", "layouts differ"],
)
def test_a_binary_op_xla_infers_is_read(lhs: str, rhs: str) -> None:
    parse(_entry(f"a = {lhs} parameter(0)", f"b = {rhs} parameter(1)", "ROOT r = add(a, b)"))


def test_operands_without_shapes_are_left_to_xla() -> None:
    parse(_entry("a = f32[2] parameter(0)", "b = add(a, a)", "ROOT r = add(b, a)"))


def test_computation_attributes() -> None:
    check_computation_attribute("execution_thread", '"main"')
    with pytest.raises(InvalidHlo, match='unexpected attribute "is_composite"'):
        check_computation_attribute("is_composite", "true")
    with pytest.raises(InvalidHlo, match="expects string"):
        check_computation_attribute("execution_thread", "main")


@pytest.mark.parametrize(
    "section, value",
    [
        ("FileNames", '"a.py"'),
        ("StackFrames", "{file_location_id=1 parent_frame_id=0}"),
        ("StackFrames", "{parent_frame_id=0, file_location_id=-1}"),
        ("FileLocations", "{file_name_id=1 function_name_id=1 line=2 end_line=2 column=1 end_column=5}"),
    ],
)
def test_stack_frame_entries_xla_reads(section: str, value: str) -> None:
    check_stack_frame_entry(section, value)


@pytest.mark.parametrize(
    "section, value, message",
    [
        ("FunctionNames", "{x=1}", "expects string"),
        ("StackFrames", '"x"', "expects '{' to start sub attributes"),
        ("StackFrames", "{file_location_id=1}", "sub-attribute parent_frame_id is expected but not seen"),
        ("StackFrames", "{file_location_id=0x1 parent_frame_id=0}", "expects integer for file_location_id"),
        ("StackFrames", "{file_location_id=1 parent_frame_id=2147483648}", "value out of range for int32_t"),
    ],
)
def test_stack_frame_entries_xla_refuses(section: str, value: str, message: str) -> None:
    with pytest.raises(InvalidHlo) as caught:
        check_stack_frame_entry(section, value)
    assert caught.value.message.startswith(message)


@pytest.mark.parametrize(
    "sharding",
    [
        "{devices=[2,-2]<=[-4]}",
        "{devices=[2,2]<=[2,2]T(0,0)}",
        "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
        "{devices=[2,2,2]<=[8] last_tile_dims={}}",
        "{devices=[2,2]3,2,1,0}",
        "{mesh['x'=2,'y'=2] [{'y', 'x'}, {?}], unreduced={'y'}, replicated={}}",
        "{mesh['x'=2,'y'=2], device_ids=(3,2,1,0), [{'x'}, {}], replicated={'y'}}",
        "{mesh['x'=2,'y'=2] replicated}",
        "{mesh['x'=8] [{'x':(1)2}, {'x':(2)4}]}",
        "{mesh['x'=2] [{'x'}, {}], metadata={op_name=\"a\"}}",
        "{mesh[] []}",
    ],
)
def test_shardings_jaxlib_reads(sharding: str) -> None:
    parse(_entry(f"ROOT a = f32[8,8] parameter(0), sharding={sharding}"))


def test_async_sugar_needs_its_shape() -> None:
    with pytest.raises(HloParseError) as caught:
        parse(_entry("a = f32[2] parameter(0)", "s = negate-start(a)", "ROOT d = f32[2] negate-done(s)"))
    assert caught.value.message == "cannot infer shape for opcode: async-start"
