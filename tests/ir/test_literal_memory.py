"""Long literals are scanned, decoded and printed piece by piece, with the same results as whole.

`pieces` cuts a literal's text only after a separator; a long text's checks, decoded values
and printed text must be exactly what the element-by-element reading gives, bit for bit, at
every piece boundary; and decoding or printing one must not hold a Python string per element
(measured with tracemalloc against the text's size).
"""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest
from conftest import sampled

from hloopt.errors import HloParseError
from hloopt.ir import literal as literal_module
from hloopt.ir.element_types import numpy_dtype
from hloopt.ir.literal import Literal, LiteralError, _format_element, decode_literal, pieces
from hloopt.ir.shape import ArrayShape

#: Types whose large constants take the pieces and the table; each with values of its own kind.
TYPES = ["f32", "bf16", "f16", "f64", "f8e4m3fn", "s32", "u8", "s64", "u64", "pred"]


def sample(element_type: str, count: int, seed: int = 0) -> np.ndarray:
    """`count` values of `element_type`: random, with zeros of both signs, inf and nan where the type has them."""
    rng = np.random.default_rng(seed)
    dtype = numpy_dtype(element_type)
    if element_type == "pred":
        return rng.integers(0, 2, count).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max), count, dtype=dtype, endpoint=True)
    values = (rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)).astype(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=np.float64).astype(dtype)
    values[rng.integers(0, count, 40)] = np.resize(specials, 40)
    return values


def element_by_element(values: np.ndarray, element_type: str) -> str:
    """A rank-1 literal's text as XLA prints it, one element at a time (the reference)."""
    return "{" + ", ".join(_format_element(v, element_type, scalar=False) for v in values) + "}"


def bits(values: np.ndarray) -> np.ndarray:
    return values.view(f"u{values.dtype.itemsize}") if values.dtype != np.bool_ else values


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces and print batches of a few KB, so a test-sized literal crosses many boundaries."""
    monkeypatch.setattr(literal_module, "_PIECE", 5000)
    monkeypatch.setattr(literal_module, "_FORMAT_PIECE", 1000)


def test_pieces_cut_only_after_separators() -> None:
    body = "{" + ", ".join(str(i * 7919) for i in range(400_000)) + "}"
    found = list(pieces(body))
    assert "".join(found) == body and len(found) > 1
    assert all(piece[-1] in " ,{}" for piece in found[:-1])
    assert list(pieces("{(1, 2), (3, 4)}" * 100_000)) == ["{(1, 2), (3, 4)}" * 100_000]  # parentheses: whole
    assert list(pieces("1" * 3_000_000)) == ["1" * 3_000_000]  # no separator to cut at


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize("element_type", TYPES)
def test_long_literal_prints_and_reads_back_as_element_by_element(element_type: str) -> None:
    values = sample(element_type, 20_011)
    shape = ArrayShape(element_type, (values.size,))
    text = Literal.from_value(shape, values).text
    assert text == element_by_element(values, element_type)
    Literal(shape, text=text).check()
    decoded = decode_literal(text, shape)
    assert isinstance(decoded, np.ndarray)
    assert np.array_equal(bits(decoded), bits(values))


@pytest.mark.usefixtures("small_pieces")
def test_rank_two_literal_prints_as_element_by_element() -> None:
    values = sample("bf16", 6 * 1001).reshape(6, 1001)
    shape = ArrayShape("bf16", (6, 1001))
    rows = [element_by_element(row, "bf16")[1:-1] for row in values]
    assert Literal.from_value(shape, values).text == "{ " + ", ".join("{ " + row + " }" for row in rows) + " }"


@pytest.mark.usefixtures("small_pieces")
def test_long_literal_errors_are_found_in_any_piece() -> None:
    shape = ArrayShape("f16", (30_000,))
    body = ["1.5"] * 30_000
    body[29_000] = "70000"
    with pytest.raises(LiteralError, match="out of range"):
        Literal(shape, text="{" + ", ".join(body) + "}").check()
    with pytest.raises(LiteralError, match="literal has 30001 elements"):
        Literal(shape, text="{" + ", ".join(["1"] * 30_001) + "}").check()
    with pytest.raises(LiteralError, match="more elements than its shape's 30000"):
        decode_literal("{" + ", ".join(["1"] * 30_001) + "}", shape)


def test_long_negative_nan_keeps_its_sign() -> None:
    shape = ArrayShape("f32", (3000,))
    decoded = decode_literal("{" + ", ".join(["-nan", "1"] * 1500) + "}", shape)
    assert isinstance(decoded, np.ndarray)
    assert np.signbit(decoded[0]) and np.isnan(decoded[0]) and decoded[1] == 1


@pytest.mark.parametrize("element_type", sampled(["f32", "bf16"], 2))
def test_decoding_and_printing_hold_no_string_per_element(element_type: str) -> None:
    """Before: a 2M-element constant's decode held a token string per element (about 60 bytes each)."""
    count = 2_000_000
    values = np.resize(sample(element_type, 4096), count)
    shape = ArrayShape(element_type, (count,))
    text = Literal.from_value(shape, values).text
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        literal = Literal(shape, text=text)
        literal.check()
        decoded = literal.value
        check_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        printed = Literal.from_value(shape, decoded).text
        print_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert printed == text
    assert isinstance(decoded, np.ndarray)
    # The value itself, and pieces of a MB or two at a time, never a string or float64 per element.
    assert check_peak < decoded.nbytes + 0.5 * len(text) + 40e6
    # The printed text, its pieces joined, the value's table: within three times the text.
    assert print_peak < 3 * len(text) + 40e6


def _framed(text: str) -> tuple[str, int, int]:
    """`text` inside a longer one, as a constant's literal sits in its module's text."""
    before, after = "  c = T[N]{0} constant(", ")\n  ROOT n = negate(c)\n}\n"
    return before + text + after, len(before), len(before) + len(text)


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize("element_type", TYPES)
def test_a_view_reads_checks_and_prints_as_its_text(element_type: str) -> None:
    """A long literal kept as a view of its module's text is checked, decoded and printed exactly as a copy
    of its text would be, without being copied out (its `text` is made only when asked for)."""
    values = sample(element_type, 20_011)
    shape = ArrayShape(element_type, (values.size,))
    text = Literal.from_value(shape, values).text
    source, start, end = _framed(text)
    view = Literal.in_source(shape, source, start, end)
    assert view.is_large and not view.is_elided
    view.check()
    view.check_nesting()
    decoded = view.value
    assert isinstance(decoded, np.ndarray) and np.array_equal(bits(decoded), bits(values))
    printed = list(view.text_pieces())
    assert "".join(printed) == text and len(printed) > 1
    assert view._text is None  # nothing so far made a copy
    assert view.text == text


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    ("element_type", "fault", "at"),
    [
        ("f16", "70000", 5000),  # out of range
        ("f32", "1e400", 9000),  # past a double
        ("f32", "+1", 7000),  # a spelling XLA's lexer refuses
        ("f32", "123456789012345678901234", 3000),  # an integer past 64 bits
        ("s8", "300", 8000),
        ("u8", "256", 100),
        ("pred", "maybe", 4000),  # not plain numbers: the careful path
        ("f32", "1, 2", 6000),  # one element too many
        ("f32", "nan(0x0)", 6000),  # a payload: parentheses
    ],
)
def test_a_view_refuses_what_its_text_refuses_where_it_does(element_type: str, fault: str, at: int) -> None:
    values = ["1"] * 10_000
    values[at] = fault
    shape = ArrayShape(element_type, (10_000,))
    text = "{" + ", ".join(values) + "}"
    with pytest.raises(LiteralError) as whole:
        Literal(shape, text=text).check()
    source, start, end = _framed(text)
    with pytest.raises(LiteralError) as viewed:
        Literal.in_source(shape, source, start, end).check()
    assert (str(viewed.value), viewed.value.offset) == (str(whole.value), whole.value.offset)


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    ("dims", "text"),
    [
        ((6000,), "{ {" + ", ".join(["1"] * 6000) + "} }"),  # rank 1, nested once more
        ((2, 3000), "{" + ", ".join(["1"] * 6000) + "}"),  # rank 2, one row
        ((2, 3000), "{ {" + ", ".join(["1"] * 3000) + "}, {" + ", ".join(["1"] * 3000) + "} }"),  # fits
        ((2, 3000), "{ {" + ", ".join(["1"] * 2999) + "}, {" + ", ".join(["1"] * 3001) + "} }"),
    ],
)
def test_a_view_s_nesting_is_checked_as_its_text_s(dims: tuple[int, ...], text: str) -> None:
    shape = ArrayShape("f32", dims)
    source, start, end = _framed(text)
    outcomes = []
    for literal in (Literal(shape, text=text), Literal.in_source(shape, source, start, end)):
        try:
            literal.check()
            literal.check_nesting()
            outcomes.append("ok")
        except LiteralError as err:
            outcomes.append(str(err))
    assert outcomes[0] == outcomes[1]


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize("dims", [(20_011,), (7, 2001), (0,)])
def test_a_large_value_prints_in_pieces_as_whole(dims: tuple[int, ...]) -> None:
    count = int(np.prod(dims))
    shape = ArrayShape("bf16", dims)
    values = sample("bf16", max(count, 1))[:count].reshape(dims)
    streamed = list(Literal.from_value(shape, values).text_pieces())
    assert "".join(streamed) == Literal.from_value(shape, values).text
    assert len(streamed) > 2 or len(dims) > 1 or not count


@pytest.mark.usefixtures("small_pieces")
def test_a_parsed_long_constant_is_a_view_and_the_module_prints_the_same_in_pieces() -> None:
    from hloopt.text.parser import parse
    from hloopt.text.printer import print_module, print_module_pieces

    values = sample("f32", 5000)
    body = Literal.from_value(ArrayShape("f32", (5000,)), values).text
    text = (
        "HloModule m, entry_computation_layout={()->f32[5000]{0}}\n\n"
        f"ENTRY %e () -> f32[5000] {{\n  %c = f32[5000]{{0}} constant({body})\n"
        "  ROOT %n = f32[5000]{0} negate(%c)\n}\n\n"
    )
    module = parse(text)
    literal = module.entry.instructions[0].literal
    assert literal is not None and literal._source is text  # the module's text, not a copy of the literal
    pieces = list(print_module_pieces(module))
    assert "".join(pieces) == print_module(module) == text
    assert all(len(piece) <= 5000 for piece in pieces)
    with pytest.raises(HloParseError, match=r"<string>:4:\d+: value 1e\+39 is out of range"):
        parse(re.sub(r"constant\(\{[^,]+,", "constant({1e39,", text, count=1))
