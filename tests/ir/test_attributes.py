"""Adding entries to typed metadata and frontend attributes (hloopt/ir/attributes.py, attribute_values.py)."""

from __future__ import annotations

import pytest

from hloopt.ir.attribute_values import FrontendAttributes, Metadata
from hloopt.ir.attributes import MapSyntaxError, with_frontend_attribute, with_op_name_suffix
from hloopt.ir.module import AttributeValue


def test_frontend_attributes_are_added_sorted_and_existing_entries_kept() -> None:
    attributes = FrontendAttributes((("z", '"1"'), ("a", '"2"')))
    added = with_frontend_attribute(attributes, "auto_cast", "none")
    assert added.to_text() == '{a="2",auto_cast="none",z="1"}'
    kept = FrontendAttributes((("auto_cast", '"keep"'),))
    assert with_frontend_attribute(kept, "auto_cast", "none").to_text() == '{auto_cast="keep"}'
    assert with_frontend_attribute(None, "k", 'a"b').to_text() == '{k="a\\"b"}'


def test_op_name_suffix_follows_op_type() -> None:
    metadata = Metadata((("source_line", "3"), ("op_type", '"dot"')))
    assert with_op_name_suffix(metadata, " x").to_text() == '{op_type="dot" op_name=" x" source_line=3}'
    assert with_op_name_suffix(None, ' "q"').to_text() == '{op_name=" \\"q\\""}'


def test_op_name_suffix_keeps_the_escapes_of_the_name_it_extends() -> None:
    metadata = Metadata((("op_name", '"a\\nb"'), ("source_line", "3")))
    assert with_op_name_suffix(metadata, "\\").to_text() == '{op_name="a\\nb\\\\" source_line=3}'


def test_an_edited_value_prints_as_xla_not_as_it_was_read() -> None:
    """`dataclasses.replace` and the operations make a value without the text the parser read."""
    from hloopt.ir.attribute_kinds import Kind
    from hloopt.text.attribute_reader import read_value

    read = read_value(Kind.FRONTEND_ATTRIBUTES, '{ b="1", a="2" }')
    assert isinstance(read, FrontendAttributes) and read.to_text() == '{ b="1", a="2" }'
    assert read.with_entry("c", "3").to_text() == '{a="2",b="1",c="3"}'


@pytest.mark.parametrize("value", ['{op_type="x"}', FrontendAttributes()])
def test_a_value_of_another_kind_cannot_be_edited_as_a_map(value: AttributeValue) -> None:
    """Text the parser kept (no reader took it) is never taken apart by a pass: the pass says so."""
    with pytest.raises(MapSyntaxError):
        with_op_name_suffix(value, "x")
