"""The one literal checker: what it refuses, where it points, and in which order it reports (issue #10 §4, §6)."""

from __future__ import annotations

from textwrap import dedent

import numpy as np
import pytest

from hloopt import parse
from hloopt.errors import HloParseError
from hloopt.ir.literal import Literal, LiteralError, array_parts, decode_literal, format_literal
from hloopt.ir.shape import ArrayShape, BufferShape, Shape, TupleShape


def parse_error(text: str) -> tuple[str, int, int]:
    """(message, line, column) of the error parsing `text` raises."""
    with pytest.raises(HloParseError) as caught:
        parse(dedent(text).lstrip(), "t.hlo")
    error = caught.value
    return error.message, error.location.line, error.location.column


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            """
            HloModule m
            ENTRY e {
              ROOT c = b(f32[2]{0}) constant({1, 2})
            }
            """,
            ("expects an array or tuple shape for a literal, not b(f32[2]{0})", 3, 34),
            id="buffer-shaped-constant",
        ),
        pytest.param(
            """
            HloModule m
            ENTRY e {
              ROOT c = (f32[2]{0}, b(f32[2]{0})) constant(({1, 2}, {3, 4}))
            }
            """,
            ("expects an array or tuple shape for a literal, not b(f32[2]{0})", 3, 56),
            id="buffer-in-a-tuple-points-at-its-part",
        ),
        pytest.param(
            """
            HloModule m
            ENTRY e {
              ROOT c = ((f32[], b(s32[1])), f32[]) constant(((1, {2}), 3))
            }
            """,
            ("expects an array or tuple shape for a literal, not b(s32[1]{0})", 3, 54),
            id="buffer-in-a-nested-tuple",
        ),
        pytest.param(
            """
            HloModule m
            ENTRY e {
              ROOT n = f32[2]{0} negate(b(f32[2]{0}) constant({1, 2}))
            }
            """,
            ("expects an array or tuple shape for a literal, not b(f32[2]{0})", 3, 51),
            id="buffer-shaped-nested-constant",
        ),
        pytest.param(
            """
            HloModule m
            ENTRY e {
              ROOT c = (f32[2,2], f32[]) constant(({1, 2, 3, 4}, 5))
            }
            """,
            ("expects nested array in rank 2, but sees 1", 3, 3),
            id="nesting-inside-a-tuple-points-at-the-instruction",
        ),
        pytest.param(
            """
            HloModule m
            ENTRY e {
              ROOT c = s32[2,2] constant({{1, 2, 3}, {4}})
            }
            """,
            ("expects 2 elements in the [0]th element, but sees more", 3, 3),
            id="row-length",
        ),
        pytest.param(
            """
            HloModule m
            ENTRY e {
              a = f32[2,2] constant({1, 2, 3, 4})
              ROOT b = f32[2] constant({1, 2, 3})
            }
            """,
            ("literal has 3 elements but shape f32[2]{0} has 2", 4, 28),
            id="counts-are-checked-as-parsed-before-any-nesting",
        ),
    ],
)
def test_parse_error(text: str, expected: tuple[str, int, int]) -> None:
    assert parse_error(text) == expected


def array(element_type: str, *dims: int) -> ArrayShape:
    return ArrayShape(element_type, dims, (False,) * len(dims))


_F32_2 = array("f32", 2)
_BUFFER = BufferShape(_F32_2)


def test_array_parts_walks_tuples_in_order_with_offsets() -> None:
    shape = TupleShape((_F32_2, TupleShape((array("s32"),)), _F32_2))
    text = "( {1, 2}, (3), {4, 5} )"
    assert [(part.strip(), offset, leaf) for part, offset, leaf in array_parts(text, shape)] == [
        ("{1, 2}", 1, _F32_2),
        ("3", 11, array("s32")),
        ("{4, 5}", 14, _F32_2),
    ]


@pytest.mark.parametrize(
    ("shape", "text", "message", "offset"),
    [
        (TupleShape((_F32_2,)), "{1, 2}", "expects a tuple literal for shape (f32[2])", 0),
        (TupleShape((_F32_2, _F32_2)), "({1, 2})", "tuple literal has 1 elements, shape (f32[2], f32[2]) has 2", 0),
        (
            TupleShape((_F32_2, _BUFFER)),
            "({1, 2}, {3, 4})",
            "expects an array or tuple shape for a literal, not b(f32[2])",
            9,
        ),
        (_F32_2, "{1, 2, 3}", "literal has 3 elements but shape f32[2] has 2", 0),
        (array("s8"), "300", "value 300 is out of range for literal's primitive type S8 namely [-128, 127].", 0),
    ],
)
def test_check_refuses(shape: Shape, text: str, message: str, offset: int) -> None:
    with pytest.raises(LiteralError) as caught:
        Literal(shape, text=text).check()
    assert (str(caught.value), caught.value.offset) == (message, offset)


@pytest.mark.parametrize(
    ("shape", "text", "message"),
    [
        (array("f32", 2, 2), "{1, 2, 3, 4}", "expects nested array in rank 2, but sees 1"),
        (array("f32"), "{1}", "expects a scalar literal, but sees an array"),
        (array("f32", 2), "{{1, 2}}", "expects nested array in rank 1, but sees larger"),
        (TupleShape((array("s32", 1, 2),)), "({{1}, {2}})", "literal nesting does not match the dimensions [1, 2]"),
    ],
)
def test_check_nesting_refuses(shape: Shape, text: str, message: str) -> None:
    with pytest.raises(LiteralError) as caught:
        Literal(shape, text=text).check_nesting()
    assert str(caught.value) == message


def test_elided_and_token_literals_pass_both_checks() -> None:
    for literal in (Literal(array("f32", 3, 3), text="{...}"), Literal(array("token"), text="token")):
        literal.check()
        literal.check_nesting()


def test_decode_and_format_refuse_a_buffer_shape() -> None:
    """A literal built in code, not parsed, reaches these without `check`: a LiteralError, not an AttributeError."""
    with pytest.raises(LiteralError, match="not b"):
        decode_literal("{1, 2}", _BUFFER)
    with pytest.raises(LiteralError, match="not b"):
        format_literal(np.zeros(2, np.float32), _BUFFER)


@pytest.mark.parametrize(
    ("literal", "message", "column"),
    [
        ("(1.0, {2.0,] 3.0, 4.0, 5.0})", "unexpected ']' in a tuple literal", 48),
        ("(1.0, {2.0, 3.0, 4.0, 5.0)}", "unexpected ')' in a tuple literal", 62),
        ("(1.0, ({2.0, 3.0, 4.0, 5.0}]))", "unexpected ']' in a tuple literal", 64),
    ],
)
def test_a_tuple_literal_with_crossed_brackets_is_refused_where_they_cross(
    literal: str, message: str, column: int
) -> None:
    """Found by the parity fuzzer: the tuple splitter raised a bare ValueError (XLA refuses these too)."""
    text = f"HloModule m\nENTRY e {{\n  ROOT c = (f32[], f32[4]) constant({literal})\n}}\n"
    assert parse_error(text) == (message, 3, column)


def test_check_once_skips_a_short_literal_that_passed_and_nothing_else() -> None:
    """A short literal's check runs once per shape and text that passed it; a failure is not remembered, and a
    large literal (one printed in pieces) is checked every time."""
    shape = ArrayShape("f32", (2,))
    runs: list[str] = []
    seen: set[tuple[int, str]] = set()
    one, same, other = Literal(shape, text="{1, 2}"), Literal(shape, text="{1, 2}"), Literal(shape, text="{1, 3}")
    for literal in (one, same, other, same):
        literal.check_once(lambda literal=literal: runs.append(literal.text), seen)
    assert runs == ["{1, 2}", "{1, 3}"] and seen == {(id(shape), "{1, 2}"), (id(shape), "{1, 3}")}

    bad = Literal(shape, text="{1}")
    for _ in range(2):
        with pytest.raises(LiteralError):
            bad.check_once(bad.check, seen)
    assert (id(shape), "{1}") not in seen

    large = Literal.from_value(ArrayShape("f32", (5000,)), np.zeros(5000, np.float32))  # printed in pieces
    assert large.is_large
    for _ in range(2):
        large.check_once(lambda: runs.append("large"), seen)
    assert runs[-2:] == ["large", "large"]
