"""Counting and bounding the numbers of a literal's text without converting any.

A 1M-element constant must be checked at parse time (XLA refuses a wrong
element count or a value its type cannot hold) but never tokenised number by
number. `scan_numbers` reads the text as bytes in a few vectorised numpy
passes: it checks that every token is a plain decimal number
``-?D+(.D*)?([eE][+-]?D+)?`` or a whole ``-?inf`` or ``-?nan``, counts them,
and finds the most integer digits and the largest positive exponent, which
bound every finite value's magnitude. Anything else (true, NaN payloads, odd
spellings) makes it return None, and the caller takes its careful path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Byte classes. DIGIT must be 0: the marks are the nonzero classes. A sign
# right after an exponent mark is reclassified as EXPONENT_SIGN.
DIGIT, SEPARATOR, MINUS, PLUS, POINT, EXPONENT, EXPONENT_SIGN, OTHER = range(8)

_CLASS = np.full(256, OTHER, np.uint8)
_CLASS[np.frombuffer(b"0123456789", np.uint8)] = DIGIT
_CLASS[np.frombuffer(b" \t\n\r,{}", np.uint8)] = SEPARATOR
_CLASS[ord("-")] = MINUS
_CLASS[ord("+")] = PLUS
_CLASS[ord(".")] = POINT
_CLASS[np.frombuffer(b"eE", np.uint8)] = EXPONENT


def _pair(first: int, second: int, digits: int) -> int:
    """A code for two neighbouring marks with no digit (0) or some digits (1) between them."""
    return first * 16 + second * 2 + digits


# Which neighbouring marks may follow each other.
_ALLOWED = np.zeros(256, np.bool_)
for _first, _second, _digits in [
    (SEPARATOR, SEPARATOR, 0),
    (SEPARATOR, SEPARATOR, 1),  # between numbers; a number of digits only
    (SEPARATOR, MINUS, 0),  # a leading minus sign
    (SEPARATOR, POINT, 1),
    (SEPARATOR, EXPONENT, 1),  # integer digits, then a point or an exponent
    (MINUS, SEPARATOR, 1),
    (MINUS, POINT, 1),
    (MINUS, EXPONENT, 1),
    (POINT, SEPARATOR, 0),
    (POINT, SEPARATOR, 1),
    (POINT, EXPONENT, 1),  # `5.`, `5.25`, `5.25e3`
    (EXPONENT, SEPARATOR, 1),
    (EXPONENT, EXPONENT_SIGN, 0),
    (EXPONENT_SIGN, SEPARATOR, 1),  # `e5`, `e-5`
]:
    _ALLOWED[_pair(_first, _second, _digits)] = True
_STARTS_NUMBER = np.zeros(256, np.bool_)
_STARTS_NUMBER[[_pair(SEPARATOR, second, 0) for second in (MINUS, POINT, EXPONENT)]] = True
_STARTS_NUMBER[[_pair(SEPARATOR, second, 1) for second in (SEPARATOR, MINUS, POINT, EXPONENT)]] = True
_FRACTIONAL = np.zeros(256, np.bool_)
_FRACTIONAL[[_pair(f, s, d) for f in range(8) for s in (POINT, EXPONENT) for d in (0, 1)]] = True

#: An exponent with more digits than this is reported as this many digits' worth.
_EXPONENT_DIGITS = 4


@dataclass(frozen=True, slots=True)
class NumberScan:
    """What `scan_numbers` learns: every value v has ``|v| < 10 ** (integer_digits + exponent)``."""

    count: int
    #: The most digits any number has before its point or exponent.
    integer_digits: int
    #: The largest positive exponent written (0 when none is).
    exponent: int
    #: Some number has a point or an exponent (not an integer literal).
    fractional: bool
    #: Some number has a leading minus sign.
    negative: bool
    #: How many tokens are `inf` or `nan` (read as three digits for the bounds above).
    non_finite: int = 0


def scan_numbers(body: str) -> NumberScan | None:
    """Scan a literal's text (commas, braces, whitespace and plain decimal numbers), or None."""
    try:
        raw = np.frombuffer(body.encode("ascii"), np.uint8)
    except UnicodeEncodeError:
        return None
    classes = _CLASS[raw]
    words = 0
    if (classes == OTHER).any():
        classes, words = _words_as_digits(raw, classes)
        if classes is None:
            return None
    marks = np.flatnonzero(classes)  # every byte that is not a digit
    # Bracket the text with separators, so every number has a mark on each side.
    kinds = np.concatenate(([SEPARATOR], classes[marks], [SEPARATOR])).astype(np.uint8)
    digits = np.diff(np.concatenate(([-1], marks, [raw.size]))) - 1  # digits between neighbouring marks
    exponents = np.flatnonzero(kinds == EXPONENT)
    after = kinds[exponents + 1]
    has_sign = ((after == MINUS) | (after == PLUS)) & (digits[exponents] == 0)
    signed, unsigned = exponents[has_sign], exponents[~has_sign]
    kinds[signed + 1] = EXPONENT_SIGN
    pairs = kinds[:-1] * np.uint8(16) + kinds[1:] * np.uint8(2) + (digits > 0).view(np.uint8)
    counts = np.bincount(pairs, minlength=256)
    if counts[~_ALLOWED].any():
        return None
    leading = digits[kinds[:-1] <= MINUS]  # digits after a separator or a minus sign: integer digits
    # Kinds index i is the mark at marks[i - 1]; a sign at index i + 1 sits at marks[i].
    plus = signed[raw[marks[signed]] == ord("+")]
    return NumberScan(
        count=int(counts[_STARTS_NUMBER].sum()),
        integer_digits=int(leading.max()) if leading.size else 0,
        exponent=_largest_exponent(
            raw,
            np.concatenate((marks[unsigned - 1] + 1, marks[plus] + 1)),
            np.concatenate((digits[unsigned], digits[plus + 1])),
        ),
        fractional=bool(counts[_FRACTIONAL].any()),
        negative=bool(counts[_pair(SEPARATOR, MINUS, 0)]),
        non_finite=words,
    )


def _words_as_digits(raw: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray | None, int]:
    """Classes with each whole-token `inf` or `nan` (a leading minus allowed) read as three digits,
    and how many there were; None when any other letter or symbol remains."""
    starts = np.concatenate(
        [np.flatnonzero((raw[:-2] == a) & (raw[1:-1] == b) & (raw[2:] == c)) for a, b, c in (b"inf", b"nan")]
    )
    if not starts.size:
        return None, 0
    padded = np.concatenate(([SEPARATOR], classes, [SEPARATOR]))  # padded[i + 1] is the class of byte i
    before, before_minus = padded[starts], padded[np.maximum(starts - 1, 0)]
    whole = (padded[starts + 4] == SEPARATOR) & (
        (before == SEPARATOR) | ((before == MINUS) & (before_minus == SEPARATOR))
    )
    if not whole.all():
        return None, 0
    classes = classes.copy()
    for offset in range(3):
        classes[starts + offset] = DIGIT
    if (classes == OTHER).any():
        return None, 0
    return classes, int(starts.size)


def _largest_exponent(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> int:
    """The largest of the exponents whose digits start at `starts` (at most _EXPONENT_DIGITS counted)."""
    if not starts.size:
        return 0
    if int(lengths.max()) > _EXPONENT_DIGITS:
        return 10**_EXPONENT_DIGITS
    values = np.zeros(starts.size, np.int64)
    for k in range(int(lengths.max())):
        present = lengths > k
        digit = raw[np.minimum(starts + k, raw.size - 1)].astype(np.int64) - ord("0")
        values = np.where(present, values * 10 + digit, values)
    return int(values.max())
