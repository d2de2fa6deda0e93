"""Long literals are scanned, decoded and printed piece by piece, with the same results as whole.

`pieces` cuts a literal's text only after a separator; a long text's checks, decoded values
and printed text must be exactly what the element-by-element reading gives, bit for bit, at
every piece boundary; and decoding or printing one must not hold a Python string per element
(measured with tracemalloc against the text's size).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

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


@pytest.mark.parametrize("element_type", ["f32", "bf16"])
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
