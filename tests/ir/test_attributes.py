"""Reading and writing the text of metadata and frontend attributes (hloopt/ir/attributes.py)."""

from __future__ import annotations

import pytest

from hloopt.ir.attributes import MapSyntaxError, parse_map, with_frontend_attribute, with_op_name_suffix


def test_entries_keep_their_raw_value_text() -> None:
    text = '{op_type="dot" op_name="a{b}\\"c" source_line=41, profile_type={1,2}}'
    assert parse_map(text) == {
        "op_type": '"dot"',
        "op_name": '"a{b}\\"c"',
        "source_line": "41",
        "profile_type": "{1,2}",
    }


def test_blanks_after_the_equals_sign_are_allowed_as_in_xla() -> None:
    assert parse_map('{op_type= "x"  op_name=\t"y"}') == {"op_type": '"x"', "op_name": '"y"'}


def test_empty_and_missing_maps() -> None:
    assert parse_map(None) == parse_map("") == parse_map("{}") == {}


@pytest.mark.parametrize("text", ["{oops}", "{=1}", "{a=}", "oops", '{a="1"'])
def test_text_that_is_no_map_is_a_map_syntax_error(text: str) -> None:
    with pytest.raises(MapSyntaxError):
        parse_map(text)


def test_frontend_attributes_are_added_sorted_and_existing_entries_kept() -> None:
    assert with_frontend_attribute('{z="1",a="2"}', "auto_cast", '"none"') == '{a="2",auto_cast="none",z="1"}'
    assert with_frontend_attribute('{auto_cast="keep"}', "auto_cast", '"none"') == '{auto_cast="keep"}'


def test_op_name_suffix_follows_op_type() -> None:
    assert with_op_name_suffix('{source_line=3 op_type="dot"}', " x") == '{op_type="dot" op_name=" x" source_line=3}'
    assert with_op_name_suffix(None, ' "q"') == '{op_name=" \\"q\\""}'
