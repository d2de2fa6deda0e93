"""The vectorised number scanner against a plain-Python reading of the same text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from hloopt.ir.literal import SEPARATORS
from hloopt.ir.numbers import NumberScan, scan_numbers

#: What the scanner accepts: a plain decimal number (a point directly before the exponent is left to the careful path).
_ACCEPTED = re.compile(r"(-?)(\d+)(?:\.\d+(?:[eE]([+-]?)(\d+))?|\.|[eE]([+-]?)(\d+))?")
_CAP = 10**4


def reference(body: str) -> NumberScan | None:
    if set(body) - set("0123456789-+.eE \t\n\r,{}inftam"):
        return None
    tokens = body.translate(SEPARATORS).split()
    words = [t for t in tokens if t in ("inf", "-inf", "nan", "-nan")]
    matches = [_ACCEPTED.fullmatch(t.replace("inf", "000").replace("nan", "000")) for t in tokens]
    if any(m is None for m in matches) or any(c in t for t in tokens if t not in words for c in "infa"):
        return None
    exponents = [0]
    for m in matches:
        assert m is not None
        sign, digits = (m.group(3), m.group(4)) if m.group(4) else (m.group(5), m.group(6))
        if digits and sign != "-":
            exponents.append(_CAP if len(digits) > 4 else int(digits))
    return NumberScan(
        count=len(tokens),
        integer_digits=max([len(m.group(2)) for m in matches if m] or [0]),
        exponent=max(exponents),
        fractional=any("." in t or "e" in t or "E" in t for t in tokens),
        negative=any(t.startswith("-") for t in tokens),
        non_finite=len(words),
    )


def test_plain_literal() -> None:
    assert scan_numbers("{1, -2.5, 3e+07, 0.125, 4.}") == NumberScan(5, 1, 7, True, True)
    assert scan_numbers("{ {1, 2}, {3, 40000} }") == NumberScan(4, 5, 0, False, False)
    assert scan_numbers("") == NumberScan(0, 0, 0, False, False)


def test_negative_exponents_do_not_raise_the_bound() -> None:
    assert scan_numbers("{1e-300, 2E-5}") == NumberScan(2, 1, 0, True, False)


def test_inf_and_nan_are_whole_tokens_read_as_three_digits() -> None:
    assert scan_numbers("{-inf, 0.5, nan, inf, -nan}") == NumberScan(5, 3, 0, True, True, non_finite=4)


def test_long_exponents_are_capped() -> None:
    found = scan_numbers("1e123456")
    assert found is not None and found.exponent == _CAP


def test_anything_else_is_left_to_the_careful_path() -> None:
    for body in [
        "{infinity}",
        "{+inf}",
        "{5inf}",
        "{inf5}",
        "{1e-inf}",
        "{-nan(0x1)}",
        "{true}",
        "{+1}",
        "{1-2}",
        "{--1}",
        "{1e}",
        "{1e+}",
        "{e5}",
        "{.5}",
        "{-.5}",
        "{5.e3}",
        "{1.2.3}",
        "{1e5e5}",
        "{1e5.5}",
        "{-}",
        "{1e--5}",
        "{1e+-5}",
        "{1_0}",
        "{é}",
        "{0x10}",
    ]:
        assert scan_numbers(body) is None, body


_ALPHABET = "0123456789" * 3 + "-+.eE" + ", {}\n" * 3 + "ax" + "infa" * 2


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
def test_scanner_agrees_with_the_reference(body: str) -> None:
    assert scan_numbers(body) == reference(body)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=40),
    st.sampled_from(["{:.6g}", "{:.9g}", "{!r}", "{:e}"]),
)
def test_printed_floats_scan_with_their_count(values: list[float], style: str) -> None:
    body = "{" + ", ".join(style.format(v) for v in values) + "}"
    found = scan_numbers(body)
    assert found == reference(body)
    if found is not None:
        assert found.count == len(values)
