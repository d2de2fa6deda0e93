"""Errors in literals long enough (4 KB and more) for the vectorised scan, located like short ones.

Long literal texts are read by `hloopt.ir.numbers.scan_numbers` and numpy instead of
token by token; these cases walk each of its ways out (a plain number, an
exponent with a sign or many digits, whole-token inf and nan, a word, a
character that is no number) and check the message is the one the short
reading gives. They are built here, not in tests/errors, to keep kilobyte
lines out of those files.
"""

from __future__ import annotations

import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.errors import HloParseError

#: Enough elements that every literal below is longer than the scan threshold (4096 characters).
N = 1500


def module(shape: str, elements: list[str]) -> str:
    return hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT c = {shape} constant({{{", ".join(elements)}}})
        }}
        """
    )


def ending(last: str, fill: str = "1") -> list[str]:
    """N elements: `fill` repeated, then `last`."""
    return [fill] * (N - 1) + [last]


ACCEPTED = [
    ("s32[1500]", ["-12"] * N),
    ("f32[1500]", ["0.25"] * N),
    ("f32[1500]", ["-inf", "0", "nan"] * (N // 3)),  # an attention mask
    ("f32[1500]", ending("nan(0x1)")),
    ("f64[1500]", ["1e300"] * N),
    ("f16[1500]", ["65504"] * N),
    # The bounds themselves, on both sides (C's strtoll saturates to exactly these).
    ("s64[1500]", ending("-9223372036854775808")),
    ("s64[1500]", ending("9223372036854775807")),
    ("u64[1500]", ending("18446744073709551615")),
    ("u64[1500]", ending("-9223372036854775808")),  # XLA reads a U64 literal's values as int64 or uint64
    # A float literal's integers are lexed in 64 bits too: these fit; so do long decimals and exponents.
    ("f32[1500]", ending("18446744073709551615")),
    ("f64[1500]", ending("-9223372036854775808")),
    ("f64[1500]", ending("99999999999999999999.5")),
    ("f64[1500]", ending("1e-0000000000000000000001")),
    ("f64[1500]", ending("-00000000000000000000000000001")),
]

S64_RANGE = "namely [-9223372036854775808, 9223372036854775807]."
U64_RANGE = "namely [-9223372036854775808, 18446744073709551615]."

REFUSED = [
    ("f32[1500]", ending("18446744073709551616"), "3:4529: unexpected token type in a literal"),
    ("f64[1500]", ending("-9223372036854775809"), "3:4529: unexpected token type in a literal"),
    ("s32[1501]", ["7"] * N, "3:31: literal has 1500 elements but shape s32[1501]{0} has 1501"),
    ("c64[1500]", ["(1, 0)"] * (N - 1), "3:31: literal has 1499 elements but shape c64[1500]{0} has 1500"),
    ("s8[1500]", ending("300"), "3:30: value 300 is out of range for literal's primitive type S8 namely [-128, 127]."),
    ("u8[1500]", ending("-1"), "3:30: value -1 is out of range for literal's primitive type U8 namely [0, 255]."),
    # Just past the 64-bit bounds: fewer digits than the other side's bound is no proof, and C saturates.
    *(
        (shape, ending(value), f"{at}: value {value} is out of range for literal's primitive type {kind} {bounds}")
        for shape, kind, bounds, at in (
            ("s64[1500]", "S64", S64_RANGE, "3:31"),
            ("u64[1500]", "U64", U64_RANGE, "3:31"),
        )
        for value in ("-9223372036854775809", "-9999999999999999999")
    ),
    (
        "s64[1500]",
        ending("9223372036854775808"),
        f"3:31: value 9223372036854775808 is out of range for literal's primitive type S64 {S64_RANGE}",
    ),
    ("s32[1500]", ending("2.5"), "3:4529: expects integer literal values, but sees '2.5'"),
    *(
        (
            "f32[1500]",
            ending(big, "1.5"),
            "3:31: value 1e+39 is out of range for literal's primitive type F32 namely [-3.40282e+38, 3.40282e+38].",
        )
        for big in ("1e39", "1e+39", "1e00039")
    ),
    (
        "f32[1500]",
        ["-inf", "0", "nan"] * (N // 3 - 1) + ["-inf", "0", "3.5e38"],
        "3:31: value 3.5e+38 is out of range for literal's primitive type F32 namely [-3.40282e+38, 3.40282e+38].",
    ),
    ("f64[1500]", ending("1e400"), "3:31: Constant is out of range for double (+/-1.79769e+308) and so is unparsable."),
    *(
        (
            "f32[1500]",
            ending(word),
            f"3:4529: expects number literal values (decimal, integer, inf or nan), but sees '{word}'",
        )
        for word in ("infinity", "info", "xnan", "x", "1-2", "e5")
    ),
    (
        "f32[1500]",
        ending("é"),
        "3:4529: unexpected character U+00E9 (outside strings and comments XLA reads ASCII only)",
    ),
    (
        "f32[1500]",
        [*ending("-inf")[1:], "--inf"],
        "3:4532: expects number literal values (decimal, integer, inf or nan), but sees '--inf'",
    ),
    (
        "bf16[1500]",
        ending("3.4e38"),
        "3:32: value 3.4e+38 is out of range for literal's primitive type BF16 namely [-3.38953e+38, 3.38953e+38].",
    ),
    (
        "f16[1500]",
        ending("65520"),
        "3:31: value 65520 is out of range for literal's primitive type F16 namely [-65504, 65504].",
    ),
    (
        "f8e5m2[1500]",
        ending("70000"),
        "3:34: value 70000 is out of range for literal's primitive type F8E5M2 namely [-57344, 57344].",
    ),
]


@pytest.mark.parametrize("shape, elements", ACCEPTED, ids=[f"{s} {e[-1]}" for s, e in ACCEPTED])
def test_long_literal_is_accepted(shape: str, elements: list[str]) -> None:
    parse(module(shape, elements))


@pytest.mark.parametrize("shape, elements, expected", REFUSED, ids=[f"{s} {e[-1]}" for s, e, _ in REFUSED])
def test_long_literal_error_is_located(shape: str, elements: list[str], expected: str) -> None:
    text = module(shape, elements)
    assert len(text) > 4096
    with pytest.raises(HloParseError) as caught:
        parse(text)
    error = caught.value
    assert f"{error.location.line}:{error.location.column}: {error.message}" == expected
