"""Constant literals: kept as their source text, decoded to numpy only on demand.

A 1M-element constant is one string until a pass asks for its values; then it
is decoded in a handful of vectorised numpy calls. New literals (from folding
or upcasting) are formatted the way XLA's printer formats them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

from hloopt.ir.element_types import (
    BY_NAME,
    COMPLEX_PARTS,
    COMPLEX_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    ROWS,
    Kind,
    numpy_dtype,
)
from hloopt.ir.shape import ArrayShape, Shape, TupleShape, fold_tree, literal_parts

if TYPE_CHECKING:  # numpy is imported when a literal is first scanned or decoded, not for `hloopt run`'s start-up
    import numpy as np

    from hloopt.ir.numbers import NumberScan

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_ELEMENT = re.compile(r"-?nan\(0x[0-9a-fA-F]+\)|[^\s,{}()]+")
_COMPLEX_ELEMENT = re.compile(r"\(\s*([^\s,()]+)\s*,\s*([^\s,()]+)\s*\)")
#: Turns literal separators into spaces, so that ``str.split`` yields the elements.
SEPARATORS = str.maketrans({",": " ", "{": " ", "}": " "})
_NAN_PAYLOAD = re.compile(r"(-?)nan\(0x([0-9a-fA-F]+)\)")

LiteralValue: TypeAlias = "np.ndarray | tuple[LiteralValue, ...]"


class LiteralError(ValueError):
    """A literal that does not fit its shape; `offset` is relative to the literal text."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


#: Element types whose literal (``token``) has no braces to check.
_NO_DATA = frozenset({"token", "opaque"})


class Literal:
    """The value of a `constant`: source text plus, once decoded, a numpy array.

    A long array literal read from a file is `_source[_start:_end]` of the module's text rather than a
    copy of it (`in_source`): checked, decoded and printed a piece at a time, so the text of a constant
    of a gigabyte is held once, in the source, until something asks for `text` itself.
    """

    __slots__ = ("_elided", "_end", "_plain", "_source", "_start", "_text", "_value", "shape")

    def __init__(self, shape: Shape, text: str | None = None, value: LiteralValue | None = None) -> None:
        if text is None and value is None:
            raise ValueError("a literal needs text or a value")
        self.shape = shape
        self._text = text
        self._value = value
        self._plain: str | None = None
        self._elided: bool | None = None
        self._source: str | None = None
        self._start = self._end = 0

    @classmethod
    def from_value(cls, shape: Shape, value: LiteralValue) -> Literal:
        return cls(shape, value=value)

    @classmethod
    def in_source(cls, shape: Shape, source: str, start: int, end: int) -> Literal:
        """The literal written at `source[start:end]`: a long array literal keeps a view of `source` (no copy)."""
        if end - start <= _PIECE or not isinstance(shape, ArrayShape):
            return cls(shape, text=source[start:end])
        literal = cls(shape, value=None, text="")
        literal._text, literal._source, literal._start, literal._end = None, source, start, end
        return literal

    def _view(self) -> tuple[str, int, int] | None:
        """(source, start, end) of a literal that is a view of its module's text without comments, else None."""
        source = self._source
        if source is None or source.find("/*", self._start, self._end) >= 0:
            return None
        return source, self._start, self._end

    @property
    def is_elided(self) -> bool:
        """True for ``{...}``: XLA's placeholder for a large constant whose data was not printed."""
        if self._elided is None:
            source = self._source
            if source is not None:
                found = source.find("...", self._start, self._end) >= 0
                self._elided = found and _ELISION.search(source, self._start, self._end) is not None
            else:
                self._elided = (
                    self._text is not None and "..." in self._text and _ELISION.search(self._text) is not None
                )
        return self._elided

    @property
    def plain_text(self) -> str:
        """The text with its ``/*index=K*/`` comments blanked out (offsets unchanged)."""
        if self._plain is None:
            self._plain = strip_comments(self.text)
        return self._plain

    @property
    def text(self) -> str:
        """The whole text (a view's is copied out of the source once asked for; printing uses `text_pieces`)."""
        if self._text is None:
            if self._source is not None:
                self._text = self._source[self._start : self._end]
                self._source = None
            else:
                assert self._value is not None
                self._text = format_literal(self._value, self.shape)
        return self._text

    @property
    def is_large(self) -> bool:
        """Whether the text is long enough to print in pieces: a view of the source, or a large value not yet printed."""
        if self._source is not None:
            return True
        return self._text is None and isinstance(self.shape, ArrayShape) and self.shape.element_count >= _TABLE_FROM

    def text_pieces(self) -> Iterator[str]:
        """The text in pieces of about `_PIECE` characters, for a printer that streams: a view is sliced
        out of its source a piece at a time, and a large value formatted a piece at a time and not kept."""
        source = self._source
        if source is not None:
            for position in range(self._start, self._end, _PIECE):
                yield source[position : min(position + _PIECE, self._end)]
        elif self.is_large:
            assert self._value is not None and isinstance(self.shape, ArrayShape)
            yield from _literal_pieces(self._value, self.shape)
        else:
            yield self.text  # held whole already (or short): the writer encodes it a piece at a time

    @property
    def value(self) -> LiteralValue:
        if self._value is None:
            view = self._view()
            if view is not None:
                assert isinstance(self.shape, ArrayShape)  # `in_source` keeps views of arrays only
                self._value = _decode_array(view[0], self.shape, view[1], view[2])
            else:
                self._value = decode_literal(self.text, self.shape)
        return self._value

    def converted(self, shape: ArrayShape, convert: Callable[[np.ndarray], np.ndarray]) -> Literal:
        """This array literal with `convert` applied to its values, as a literal of `shape`.

        What it costs is bounded by the literal's text, not its shape: ``{...}`` stays elided, and one
        value written for many elements (XLA reads it as that value, then zeros) stays one value when
        `convert` keeps zero a zero; `f16[99999999999] constant(1)` never becomes 186 GiB of array.
        """
        import numpy as np

        if self.is_elided:
            return Literal(shape, text=self.text)
        own = _array_shape(self.shape)
        written_length = self._end - self._start if self._source is not None else len(self.plain_text)
        if self._value is None and own.element_count > written_length:  # fewer values written than held
            written = _decode_array(self.plain_text, ArrayShape(own.element_type, (1,)))
            pair = convert(np.concatenate([written, np.zeros(1, written.dtype)]))
            if pair[1] == 0:
                return Literal(shape, text=_format_element(pair[0], shape.element_type, scalar=True))
        value = self.value
        assert isinstance(value, np.ndarray)  # an array shape's value is an array
        return Literal.from_value(shape, convert(value).reshape(shape.dims))

    def check_once(self, check: Callable[[], None], seen: set[tuple[int, str]]) -> None:
        """Run `check` (`self.check` or `self.check_nesting`) unless a short literal of the same shape and text
        passed it already; `seen` holds those that did. `f32[] constant(1)` recurs, and a parse interns its
        shapes, so a shape's id names it while the module it was read into is alive."""
        key = None if self.is_large else (id(self.shape), self.text)
        if key is not None and key in seen:
            return
        check()
        if key is not None:
            seen.add(key)

    def check(self) -> None:
        """Raise LiteralError if the text does not fit the shape: element count, value range (no decode).

        The parser calls this as it builds each constant; `check_nesting` runs later, with the
        other semantic checks, so a module with several faults reports the one XLA reports.
        """
        if self.is_elided or (self._text is None and self._source is None):
            return
        view = self._view()
        if view is not None:
            assert isinstance(self.shape, ArrayShape)  # `in_source` keeps views of arrays only
            if self.shape.element_type != "token":
                _check_array(view[0], self.shape, view[1], view[2])
        else:
            _check_counts(self.plain_text, self.shape)

    def check_nesting(self) -> None:
        """Raise LiteralError if the braces do not nest as the shape's dimensions (after `check`)."""
        if (self._text is None and self._source is None) or self.is_elided:
            return
        shape = self.shape
        view = self._view()
        if view is not None and isinstance(shape, ArrayShape) and shape.rank == 1 and _one_row(*view):
            return  # a long rank-1 literal, its count checked by `check`: no copy of its text to look at
        if isinstance(shape, ArrayShape):  # most constants: no tuple to walk
            if shape.element_type not in _NO_DATA:
                _check_nesting(self.plain_text, shape)
            return
        for body, _, leaf in array_parts(self.plain_text, shape):
            if leaf.element_type not in _NO_DATA:
                _check_nesting(body, leaf)


# ---------------------------------------------------------------------------
# decoding


def _one_row(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` (stripped) is one row ``{…}`` with no other brace: `_check_nesting`'s rank-1
    case, told without copying the text."""
    first = start
    while first < end and text[first].isspace():
        first += 1
    last = end
    while last > first and text[last - 1].isspace():
        last -= 1
    return (
        text.startswith("{", first, last)
        and text.endswith("}", first, last)
        and text.count("{", first, last) == 1
        and text.count("}", first, last) == 1
    )


def strip_comments(text: str) -> str:
    """Literal text with its ``/*index=K*/`` annotations blanked out (offsets unchanged)."""
    return _COMMENT.sub(lambda m: " " * len(m.group()), text) if "/*" in text else text


#: What splitting a tuple literal looks at: a bracket or a comma (the rest is skipped at C speed).
_TUPLE_MARK = re.compile(r"[(){}\[\],]")
_CLOSERS = {"(": ")", "{": "}", "[": "]"}
#: The first character of a part that is not a blank.
_NOT_BLANK = re.compile(r"\S")
#: XLA's `...` token, which elides a constant's data: standing alone (`{...}`), not the end of a number (`{3...}`).
_ELISION = re.compile(r"(?<![^\s{,])\.\.\.(?![^\s},])")


def _split_tuple(text: str, opening: int) -> dict[int, list[tuple[int, int]]]:
    """The top-level parts, (start, end) in `text`, of the tuple whose `(` is at `opening` and of every
    tuple inside it, keyed by the offset of each one's `(`: one pass for all levels, so a tuple `d` levels
    deep costs `d`, not `d²`. A bracket closed by the wrong one, or never closed, is a LiteralError where
    it stands (XLA refuses those too)."""
    tuples: dict[int, list[tuple[int, int]]] = {}
    #: Each open bracket: the bracket that closes it, where it opens, where its current part begins.
    stack: list[tuple[str, int, int]] = [(")", opening, opening + 1)]
    tuples[opening] = []
    for mark in _TUPLE_MARK.finditer(text, opening + 1):
        ch, i = mark.group(), mark.start()
        if ch in _CLOSERS:
            stack.append((_CLOSERS[ch], i, i + 1))
            if ch == "(":
                tuples[i] = []
        elif ch == ",":
            closer, at, begin = stack[-1]
            if closer == ")":
                tuples[at].append((begin, i))
                stack[-1] = (closer, at, i + 1)
        else:
            closer, at, begin = stack.pop()
            if ch != closer:
                raise LiteralError(f"unexpected '{ch}' in a tuple literal", i)
            if ch == ")" and text[begin:i].strip():
                tuples[at].append((begin, i))
            if not stack:  # the outer tuple's own ")"
                return tuples
    raise LiteralError("a tuple literal is not closed", opening)


def array_parts(text: str, shape: Shape) -> Iterator[tuple[str, int, ArrayShape]]:
    """The array leaves of a literal's text: (text, offset, shape), tuple parts in order.

    A tuple that does not fit its shape, or a buffer shape (no literal has one),
    raises LiteralError at its part's offset. A stack, not recursion: tuples nest freely.
    """
    tuples: dict[int, list[tuple[int, int]]] | None = None  # every level's parts, split once
    stack: list[tuple[int, int, Shape]] = [(0, len(text), shape)]
    while stack:
        start, end, current_shape = stack.pop()
        if not isinstance(current_shape, TupleShape):
            current = text[start:end]
            yield current, start, _array_shape(current_shape, start + len(current) - len(current.lstrip()))
            continue
        first = _NOT_BLANK.search(text, start, end)
        if first is None or first.group() != "(":
            raise LiteralError(f"expects a tuple literal for shape {current_shape.to_text()}", start)
        if tuples is None:
            tuples = _split_tuple(text, first.start())
        parts = tuples[first.start()]
        if len(parts) != len(current_shape.elements):
            raise LiteralError(
                f"tuple literal has {len(parts)} elements, shape {current_shape.to_text()} has "
                f"{len(current_shape.elements)}",
                start,
            )
        stack.extend(
            (part_start, part_end, element)
            for (part_start, part_end), element in reversed(list(zip(parts, current_shape.elements)))
        )


def _array_shape(shape: Shape, offset: int = 0) -> ArrayShape:
    """A literal leaf's shape: arrays only, a buffer shape (``b(...)``) has no literal."""
    if not isinstance(shape, ArrayShape):
        raise LiteralError(f"expects an array or tuple shape for a literal, not {shape.to_text()}", offset)
    return shape


def _check_counts(text: str, shape: Shape) -> None:
    """Element counts and values against the shape; `text` has no comments and no elided part."""
    if isinstance(shape, ArrayShape):  # most constants: no tuple to walk
        if shape.element_type != "token":
            _check_array(text, shape)
        return
    for body, base, leaf in array_parts(text, shape):
        if leaf.element_type == "token":
            continue
        try:
            _check_array(body, leaf)
        except LiteralError as err:
            raise LiteralError(str(err), base + err.offset) from None


def _count(body: str) -> int:
    """How many elements a non-complex literal text holds."""
    # Splitting on separators counts them at C speed; NaN payloads need the regex.
    return len(_ELEMENT.findall(body)) if "(" in body else len(body.translate(SEPARATORS).split())


#: One element as XLA's lexer reads it in a literal of each kind (grammar §1): a number starts
#: with a digit or ``-`` (no ``+``, no leading ``.``, no ``_``); ``inf``/``nan`` in lower case.
_FLOAT_TOKEN = r"-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|-\.\d+(?:[eE][+-]?\d+)?|-?inf|-?nan(?:\(0x[0-9a-fA-F]+\))?"
_INTEGER_TOKEN = re.compile(r"-?\d+")
_ELEMENT_TOKENS = {
    Kind.SIGNED: _INTEGER_TOKEN,
    Kind.UNSIGNED: _INTEGER_TOKEN,
    Kind.PRED: re.compile(r"true|false|-?\d+"),
    Kind.FLOAT: re.compile(_FLOAT_TOKEN),
    Kind.COMPLEX: re.compile(rf"\(\s*(?:{_FLOAT_TOKEN})\s*,\s*(?:{_FLOAT_TOKEN})\s*\)"),
}
_EXPECTED_ELEMENTS = {
    Kind.SIGNED: "integer literal values",
    Kind.UNSIGNED: "integer literal values",
    Kind.PRED: "true, false or integer literal values",
    Kind.FLOAT: "number literal values (decimal, integer, inf or nan)",
    Kind.COMPLEX: "complex literal values written (real, imag)",
}
_COMPLEX_OR_ELEMENT = re.compile(r"\([^()]*\)?|-?nan\(0x[0-9a-fA-F]+\)|[^\s,{}()]+")


def _check_tokens(body: str, kind: Kind) -> None:
    """Refuse an element XLA's lexer does not read as a literal of this kind (Python's int() and
    float() take more: ``+1``, ``.5``, ``1_000``, ``Infinity``)."""
    token = _ELEMENT_TOKENS.get(kind)
    if token is None:
        return
    for match in _COMPLEX_OR_ELEMENT.finditer(body):
        if match.group().startswith("(") and kind is not Kind.COMPLEX:
            if match.start() == 0 or body[:1] == "{":  # where XLA reads a value: a scalar's `)` comes first
                raise LiteralError(
                    "unexpected '(' in literal. Parens are only valid for complex literals", match.start()
                )
            continue
        if not token.fullmatch(match.group()):
            raise LiteralError(f"expects {_EXPECTED_ELEMENTS[kind]}, but sees {match.group()!r}", match.start())


#: A scalar constant's usual text: one decimal number (what `_FLOAT_TOKEN` and `_INTEGER_TOKEN` take, and less).
_PLAIN_SCALAR = re.compile(r"\s*(-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*")


def _plain_scalar_fits(body: str, element_type: str) -> bool:
    """True when `body` is one plain number well inside `element_type`'s range: most constants are, and
    then the tokens, the count and the range need no further look (False: let them say what is wrong)."""
    match = _PLAIN_SCALAR.fullmatch(body)
    if match is None or len(match.group(1)) >= _LONG_DIGITS:  # a long one is read by the careful path
        return False
    number = match.group(1)
    limit = _SAFE_LIMITS.get(element_type)
    if limit is not None:
        return abs(float(number)) < limit
    if element_type in INT_TYPES and number.lstrip("-").isdigit():
        low, high = _integer_range(element_type)
        return low <= int(number) <= high
    return False


#: Digits from which an integer may not fit the 64 bits XLA's lexer reads it in.
_LONG_DIGITS = 19
#: A number written as an integer (no point, no exponent) of that many digits or more.
_LONG_INTEGER = re.compile(rf"(?<![\w.+-])-?\d{{{_LONG_DIGITS},}}(?![\w.])")


def _check_long_integers(body: str, kind: Kind, start: int = 0, end: int | None = None) -> None:
    """XLA's lexer reads a number written as an integer as a 64-bit one (unsigned when positive), even in a
    floating-point literal, and has no token for one past that: ``f32[] constant(18446744073709551616)`` is
    refused where ``…616.0`` is read."""
    for match in _LONG_INTEGER.finditer(body, start, len(body) if end is None else end):
        number = match.group()  # its length first: int() refuses thousands of digits
        if len(number.lstrip("-").lstrip("0")) > 20 or not _INT64_MIN <= int(number) < 1 << 64:
            said = "expects decimal or integer" if kind is Kind.COMPLEX else "unexpected token type in a literal"
            raise LiteralError(said, match.start() - start)


def _check_one_scalar(body: str) -> None:
    """A scalar constant is one value: XLA reads it and expects the `)` (``constant(42,)``, ``constant(false())``)."""
    first = _COMPLEX_OR_ELEMENT.match(body)
    if first is not None and first.end() < len(body):  # `body` is stripped: something follows the value
        raise LiteralError("expects ')' after constant literal", len(body) - len(body[first.end() :].lstrip()))


def _check_one_group(text: str, start: int, end: int) -> None:
    """XLA reads one top-level item of an array literal, a comma or a braced group, then expects the `)`
    (``constant(,{1, 2})``, ``constant({1, 2},)``); the literal `text[start:end]` is stripped."""
    after = start + 1 if text[start] == "," else text.rfind("}", start, end) + 1
    following = _NOT_BLANK.search(text, after, end)
    if following is not None:
        raise LiteralError("expects ')' after constant literal", following.start() - start)


def _check_array(text: str, shape: ArrayShape, start: int = 0, end: int | None = None) -> None:
    """The literal `text[start:end]` (all of `text` by default) against `shape`. A view of a long literal
    in its module's text is read in pieces; only the careful paths (odd spellings) copy it out whole."""
    end = len(text) if end is None else end
    whole = (start, end) == (0, len(text))

    def body() -> str:
        return text if whole else text[start:end]

    if not shape.dims and _plain_scalar_fits(body(), shape.element_type):
        return
    scan = _scan(text, start, end) if end - start >= _SCAN_FROM and text.find("(", start, end) < 0 else None
    kind = BY_NAME[shape.element_type].kind
    if scan is None:
        _check_tokens(body(), kind)
    if kind in (Kind.FLOAT, Kind.COMPLEX) and (scan is None or scan.integer_digits >= _LONG_DIGITS):
        _check_long_integers(text, kind, start, end)
    braces = text.find("{", start, end) >= 0
    if end > start and (text[start] == "," or (text[start] == "{" and text[end - 1] != "}")):
        _check_one_group(text, start, end)
    if not shape.dims and not text.startswith("{", start, end):
        _check_one_scalar(body())
    if shape.element_type in COMPLEX_TYPES:
        found = len(_COMPLEX_ELEMENT.findall(text, start, end))
    elif scan is not None:
        found = scan.count
    else:
        found = sum(_count(piece) for piece in pieces(text, start, end))
    expected = shape.element_count
    if shape.rank and not braces and not body().lstrip().startswith("(") and (found != 1 or not expected):
        # XLA takes one bare scalar for an array constant (it pads with zeros), never a bare list.
        raise LiteralError(f"expects nested array in rank {shape.rank}, but sees 0: write an array constant in braces")
    if found != expected and not (found == 1 and not braces):
        raise LiteralError(f"literal has {found} elements but shape {shape.to_text()} has {expected}")
    _check_values(text, shape, scan, start, end)


def pieces(body: str, start: int = 0, end: int | None = None) -> Iterator[str]:
    """`body` in pieces of about `_PIECE` characters, each cut just after a separator (space, comma or
    brace), so that no element is cut; one piece when `body` holds a parenthesis (complex numbers and
    NaN payloads are read whole). A long literal is scanned, checked and decoded piece by piece, so the
    arrays and lists made from its text stay a small fraction of the text itself. `start` and `end`
    bound a literal inside a longer text (its module's), which is never copied whole."""
    end = len(body) if end is None else end
    if end - start <= _PIECE or body.find("(", start, end) >= 0:
        yield body if (start, end) == (0, len(body)) else body[start:end]
        return
    while end - start > _PIECE:
        stop = start + _PIECE
        last = _LAST_SEPARATOR.search(body, max(start, stop - _SEPARATOR_WINDOW), stop)
        if last is None:  # no separator near: cut at the next one (or nowhere)
            following = _SEPARATOR.search(body, stop, end)
            if following is None:
                break
            cut = following.end()
        else:
            cut = last.start() + 1
        yield body[start:cut]
        start = cut
    yield body[start:end]


#: How many characters a piece of a long literal holds (about; see `pieces`).
_PIECE = 1 << 20
#: How far back from a piece's end a separator is looked for.
_SEPARATOR_WINDOW = 4096
_SEPARATOR = re.compile(r"[ \t\n\r,{}]")
_LAST_SEPARATOR = re.compile(r"[ \t\n\r,{}](?=[^ \t\n\r,{}]*\Z)")


def _scan(body: str, start: int = 0, end: int | None = None) -> NumberScan | None:
    """`scan_numbers` over the pieces of `body[start:end]`, their findings merged (None if any piece is not
    plain numbers)."""
    from hloopt.ir.numbers import NumberScan, scan_numbers

    scans: list[NumberScan] = []
    for piece in pieces(body, start, end):
        scan = scan_numbers(piece)
        if scan is None:
            return None
        scans.append(scan)
    if len(scans) == 1:
        return scans[0]
    return NumberScan(
        count=sum(scan.count for scan in scans),
        integer_digits=max(scan.integer_digits for scan in scans),
        exponent=max(scan.exponent for scan in scans),
        fractional=any(scan.fractional for scan in scans),
        negative=any(scan.negative for scan in scans),
        non_finite=sum(scan.non_finite for scan in scans),
    )


def _check_nesting(text: str, shape: ArrayShape) -> None:
    """The braces of an array literal against its rank and dimensions (after the counts are right)."""
    body = text.strip()
    if not body.startswith("{"):
        if shape.rank and body.startswith("(") and shape.element_type not in COMPLEX_TYPES:
            raise LiteralError(f"expects nested array in rank {shape.rank}, but sees a tuple")
        return  # a bare scalar: XLA accepts it even for arrays (it pads with zeros)
    if shape.rank == 0:
        raise LiteralError("expects a scalar literal, but sees an array")
    if shape.rank == 1 and body.endswith("}") and body.count("{") == 1 and body.count("}") == 1:
        return  # `{...}`: one row, counted by `check` (counting braces beats collecting them)
    skeleton = "".join(_BRACE.findall(body))
    if skeleton != _skeleton(shape.dims):
        depth = max_depth = 0
        for ch in skeleton:
            depth += 1 if ch == "{" else -1
            max_depth = max(max_depth, depth)
        if max_depth > shape.rank:
            raise LiteralError(f"expects nested array in rank {shape.rank}, but sees larger")
        if max_depth < shape.rank:
            raise LiteralError(f"expects nested array in rank {shape.rank}, but sees {max_depth}")
        raise LiteralError(f"literal nesting does not match the dimensions {list(shape.dims)}")
    # Rank 1 is one row, and `check` has already counted it.
    if shape.rank >= 2 and shape.element_count > 0:
        row_length = shape.dims[-1]
        complex_rows = shape.element_type in COMPLEX_TYPES
        for index, match in enumerate(_ROW.finditer(body)):  # one row's text at a time, never a list of them
            row = match.group(1)
            count = len(_ROW_COMPLEX.findall(row)) if complex_rows else sum(_count(piece) for piece in pieces(row))
            if count != row_length:
                more = "more" if count > row_length else "fewer"
                raise LiteralError(f"expects {row_length} elements in the [{index}]th element, but sees {more}")


_BRACE = re.compile(r"[{}]")
_ROW = re.compile(r"\{([^{}]*)\}")
#: A complex element as a row count sees it: any parenthesised group.
_ROW_COMPLEX = re.compile(r"\([^()]*\)")


def _skeleton(dims: tuple[int, ...]) -> str:
    """The braces alone of a well-nested literal: ``{{}{}}`` for dims (2, 3)."""
    inner = ""
    for dim in reversed(dims):
        inner = "{" + inner * max(dim, 0) + "}"
    return inner


# ---------------------------------------------------------------------------
# values: what XLA's literal parser refuses beyond the element count

_FLOATS = [row for row in ROWS if row.kind is Kind.FLOAT]
#: Explicit mantissa bits of the float types whose NaNs carry a payload.
_PAYLOAD_BITS = {row.name: row.mantissa_bits for row in _FLOATS if row.nan_payload}
#: Below 10**digits a value is finite in the type whatever its rounding: no conversion needed.
_SAFE_DIGITS = {row.name: row.safe_digits for row in _FLOATS}
_SAFE_LIMITS = {name: 10.0**digits for name, digits in _SAFE_DIGITS.items()}
#: Literal texts at least this long are scanned with numpy (`scan_numbers`); shorter ones are read by Python.
_SCAN_FROM = 4096
#: A whole token `inf`, `-inf`, `nan` or `-nan` (not `infinity`, not `nan(0x1)`).
_WRITTEN_NON_FINITE = re.compile(r"(?<![^\s,{}])-?(?:inf|nan)(?![^\s,{}])")


def _check_values(
    body: str, shape: ArrayShape, scan: NumberScan | None, start: int = 0, end: int | None = None
) -> None:
    """Raise LiteralError for a value in `body[start:end]` XLA refuses: not a number, or out of its type's range."""
    element_type = shape.element_type
    for piece in pieces(body, start, end):  # the scan's bounds hold for every piece
        if element_type in INT_TYPES:
            _check_integers(piece, element_type, scan)
        elif element_type in FLOAT_TYPES or element_type in COMPLEX_TYPES:
            _check_floats(piece, shape, scan)


def _integer_range(element_type: str) -> tuple[int, int]:
    row = BY_NAME[element_type]
    # XLA reads a negative u64 literal as the int64 bit pattern.
    low = -(1 << 63) if element_type == "u64" else int(row.lowest)
    return low, int(row.highest)


#: C's strtoll saturates out-of-range values to these.
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _check_integers(body: str, element_type: str, scan: NumberScan | None) -> None:
    import numpy as np

    low, high = _integer_range(element_type)
    if (
        scan is not None
        and not scan.fractional
        and not scan.non_finite
        and scan.integer_digits < len(str(high))
        and (not scan.negative or scan.integer_digits < len(str(-low)))
    ):
        return  # every value has fewer digits than the bound on its side (a negative one: than |low|)
    fast = _c_numbers(body, np.int64) if element_type != "u64" and len(body) >= _SCAN_FROM else None
    if fast is not None and fast.size and (fast.min() == _INT64_MIN or fast.max() == _INT64_MAX):
        fast = None  # C's strtoll saturates out-of-range values to the int64 bounds: read those in Python
    if fast is not None:
        values = [int(fast.min()), int(fast.max())] if fast.size else []
    else:
        try:
            values = [int(t) for t in _ELEMENT.findall(body) if t not in ("true", "false")]
        except ValueError as err:
            _check_tokens(body, BY_NAME[element_type].kind)  # says which element, and where
            raise LiteralError(f"expects integer literal values: {err}") from None
    for value in (min(values), max(values)) if values else ():
        if not low <= value <= high:
            raise LiteralError(
                f"value {value} is out of range for literal's primitive type {element_type.upper()} namely [{low}, {high}]."
            )


def _check_floats(body: str, shape: ArrayShape, scan: NumberScan | None) -> None:
    import numpy as np

    element_type = shape.element_type
    part_type = COMPLEX_PARTS.get(element_type, element_type)
    safe_digits = _SAFE_DIGITS.get(part_type)
    if scan is not None and safe_digits is not None and scan.integer_digits + scan.exponent <= safe_digits:
        return  # every finite value is below 10**safe_digits (inf and nan are allowed)
    if len(body) >= _SCAN_FROM:
        numbers = _c_numbers(body, np.float64)
    else:
        values = _python_floats(body)
        if values is not None and safe_digits is not None and all(abs(v) < _SAFE_LIMITS[part_type] for v in values):
            return  # most constants are a few small numbers: no array needed (inf and nan fail `<`)
        numbers = None if values is None else np.array(values, dtype=np.float64)
    if numbers is not None:
        finite = np.isfinite(numbers)
        if not finite.all():
            # Keep the finite values when every inf and nan is written as such (an attention mask's
            # -inf, say); otherwise an overflow or an odd spelling: the careful path says which.
            written = len(_WRITTEN_NON_FINITE.findall(body)) == numbers.size - int(finite.sum())
            numbers = numbers[finite] if written else None
    if numbers is not None:
        if safe_digits is not None and (not numbers.size or float(np.abs(numbers).max()) < 10.0**safe_digits):
            return
        tokens: list[str] = []
    else:
        tokens = _ELEMENT.findall(body)
    for token in tokens:
        if "(" in token:
            payload = int(token.split("(0x")[1].rstrip(")"), 16)
            mantissa = _PAYLOAD_BITS.get(part_type)
            shape_text = shape.to_text(False)
            if mantissa is None:
                raise LiteralError(
                    f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape_text}, "
                    f"but {part_type} does not support NaN payloads"
                )
            if payload == 0 or payload >= 1 << mantissa:
                raise LiteralError(
                    f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape_text}, "
                    "but the NaN payload is out of range"
                )
    if tokens:
        try:
            numbers = np.array(
                [t for t in tokens if "(" not in t and t not in ("nan", "-nan", "inf", "-inf")], dtype=np.float64
            )
        except ValueError as err:
            _check_tokens(body, BY_NAME[element_type].kind)
            raise LiteralError(f"expects number literal values: {err}") from None
    assert numbers is not None
    if numbers.size and not np.isfinite(numbers).all():
        raise LiteralError("Constant is out of range for double (+/-1.79769e+308) and so is unparsable.")
    if part_type == "f64" or not numbers.size:
        return  # a finite double is a finite f64
    limit = BY_NAME[part_type].highest
    # XLA rejects values that round past the largest finite value of the type.
    with np.errstate(over="ignore"):
        rounded = numbers.astype(numpy_dtype(part_type)).astype(np.float64)
    if part_type in ("f16", "bf16", "f32"):
        bad = np.flatnonzero(~np.isfinite(rounded) & np.isfinite(numbers))
    else:
        bad = np.flatnonzero(np.abs(numbers) > limit * 1.0625)
    if bad.size:
        raise LiteralError(
            f"value {numbers[bad[0]]:g} is out of range for literal's primitive type {element_type.upper()} "
            f"namely [{-limit:g}, {limit:g}]."
        )


def _python_floats(body: str) -> list[float] | None:
    """The numbers of a short literal read by Python's float(), or None if one is not a number."""
    try:
        return [float(t) for t in body.translate(SEPARATORS).split()]
    except ValueError:
        return None


def _c_numbers(body: str, dtype: type[np.int64 | np.float64]) -> np.ndarray | None:
    """All numbers of a long literal parsed in C, or None when it needs the careful path."""
    import numpy as np

    if "(" in body:
        return None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return np.fromstring(body.translate(SEPARATORS), dtype=dtype, sep=" ")
        except (ValueError, DeprecationWarning):
            return None


def _stored_floats(doubles: np.ndarray, element_type: str) -> np.ndarray:
    """`doubles` in `element_type` as XLA's literal parser stores them: numpy's cast, but for e8m0's lowest binade.

    XLA (jaxlib 0.10 to 0.12) stores every double strictly between 2^-127 and 2^-126 as 2^-126: its cast rounds
    on the grid of an IEEE subnormal step (0, 2^-126), where 2^-127 is the tie. ml_dtypes 0.7 rounds such a
    double to the nearer power of two; 0.6 rounded it up, but its array cast went through float32 first.
    """
    values = doubles.astype(numpy_dtype(element_type))
    if element_type == "f8e8m0fnu":
        values[(doubles > 2.0**-127) & (doubles < 2.0**-126)] = 2.0**-126
    return values


def _decode_floats(tokens: list[str], element_type: str) -> np.ndarray:
    import numpy as np

    dtype = numpy_dtype(element_type)
    payload_tokens = [i for i, t in enumerate(tokens) if "(" in t]
    if not payload_tokens:
        return _stored_floats(np.array(tokens, dtype=np.float64), element_type)
    values = _stored_floats(np.array([t.split("(")[0] for t in tokens], dtype=np.float64), element_type)
    bits_dtype = np.dtype(f"u{dtype.itemsize}")
    bits = values.view(bits_dtype)
    mask = (1 << _PAYLOAD_BITS.get(element_type, 0)) - 1
    for i in payload_tokens:
        match = _NAN_PAYLOAD.fullmatch(tokens[i])
        if match is None:
            raise LiteralError(f"bad NaN literal {tokens[i]!r}")
        payload = int(match.group(2), 16)
        bits[i] = (int(bits[i]) & ~mask) | (payload & mask)
    return values


def _decode_piece(body: str, element_type: str) -> np.ndarray:
    """The elements of a non-complex literal text (or a piece of one), flat, in `element_type`."""
    import numpy as np

    if element_type in FLOAT_TYPES and len(body) >= _SCAN_FROM and "nan" not in body:
        # Correctly rounded, as Python's float() and XLA's strtod (numpy reads `-nan` without its sign).
        numbers = _c_numbers(body, np.float64)
        if numbers is not None:
            return _stored_floats(numbers, element_type)
    tokens = _ELEMENT.findall(body)
    if element_type == "pred":
        return np.array([t in ("true", "1") for t in tokens], dtype=np.bool_)
    if element_type in FLOAT_TYPES:
        return _decode_floats(tokens, element_type)
    if element_type == "u64":
        return np.array([int(t) % (1 << 64) for t in tokens], dtype=np.uint64)
    return np.array(tokens, dtype=np.int64).astype(numpy_dtype(element_type))


def _decode_array(text: str, shape: ArrayShape, start: int = 0, end: int | None = None) -> np.ndarray:
    """The array written at `text[start:end]` (all of `text`, comments and all, by default; a span, a view of
    a long literal in its module's text, has no comments and is read a piece at a time)."""
    import numpy as np

    if end is None:
        text = strip_comments(text)
        end = len(text)
    element_type = shape.element_type
    dtype = numpy_dtype(element_type)
    if text.find("...", start, end) >= 0:
        # XLA fills elided constants with data of its own choosing; zeros are ours.
        return np.zeros(shape.dims, dtype=dtype)
    if element_type in COMPLEX_TYPES:
        pairs = _COMPLEX_ELEMENT.findall(text, start, end)
        flat = np.array([float(r) + 1j * float(i) for r, i in pairs], dtype=dtype)
    elif end - start > _PIECE and text.find("(", start, end) < 0:
        # Piece by piece into the array itself: no list of a string per element, no float64 copy of it all.
        flat = np.empty(shape.element_count, dtype)
        filled = 0
        for piece in pieces(text, start, end):
            values = _decode_piece(piece, element_type)
            if filled + values.size > flat.size:
                raise LiteralError(f"literal has more elements than its shape's {flat.size}")
            flat[filled : filled + values.size] = values
            filled += values.size
        flat = flat[:filled]
    else:
        flat = _decode_piece(text[start:end] if (start, end) != (0, len(text)) else text, element_type)
    if flat.size == 1 and shape.element_count != 1:
        padded = np.zeros(shape.element_count, dtype=dtype)
        padded[:1] = flat
        flat = padded
    if flat.size != shape.element_count:
        raise LiteralError(f"literal has {flat.size} elements but shape has {shape.element_count}")
    return flat.reshape(shape.dims)


def decode_literal(text: str, shape: Shape) -> LiteralValue:
    """Decode literal text to a numpy array (a tuple of them for tuple shapes, at any depth)."""
    if not isinstance(shape, TupleShape):
        return _decode_array(text, _array_shape(shape))
    plain = strip_comments(text)
    tuples: dict[int, list[tuple[int, int]]] = {}  # every level's parts, split once

    def parts(item: tuple[int, int, Shape]) -> Iterator[tuple[int, int, Shape]] | None:
        start, end, part_shape = item
        if not isinstance(part_shape, TupleShape):
            return None
        opening = plain.index("(", start, end)
        if not tuples:
            tuples.update(_split_tuple(plain, opening))
        return ((*span, element) for span, element in zip(tuples[opening], part_shape.elements))

    def leaf(item: tuple[int, int, Shape]) -> LiteralValue:
        return _decode_array(plain[item[0] : item[1]], _array_shape(item[2]))

    def node(_: tuple[int, int, Shape], values: list[LiteralValue]) -> LiteralValue:
        return tuple(values)

    return fold_tree((0, len(text), shape), parts, leaf, node)


# ---------------------------------------------------------------------------
# formatting (xla/literal.cc and RoundTripFpToString in xla/util.cc)

#: ``%.*g`` precision of the narrow float types (f32 and f64 have their own rule).
_MAX_DIGITS10 = {row.name: row.max_digits10 for row in _FLOATS}


def format_float(value: Any, element_type: str) -> str:
    """One float as XLA prints it: shortest ``%g`` that reads back, NaN payloads kept."""
    import numpy as np

    as_double = float(value)
    if math.isnan(as_double):
        dtype = numpy_dtype(element_type)
        bits = int(np.array(value, dtype=dtype).view(f"u{dtype.itemsize}"))
        # The sign bit is the storage's top bit (fnuz NaN is 0x80: "-nan"); e8m0 has none.
        negative = BY_NAME[element_type].sign_bit and bits >> (8 * dtype.itemsize - 1) & 1
        sign = "-" if negative else ""
        mantissa = _PAYLOAD_BITS.get(element_type)
        if mantissa is not None:
            payload = bits & ((1 << mantissa) - 1)
            if payload != 1 << (mantissa - 1):
                return f"{sign}nan(0x{payload:x})"
        return f"{sign}nan"
    if math.isinf(as_double):
        return "-inf" if as_double < 0 else "inf"
    if as_double == 0 and math.copysign(1.0, as_double) < 0:
        # XLA prints "-0", which its parser reads as the integer 0: "-0.0" keeps the sign.
        return "-0.0"
    if element_type == "f32":
        text = f"{as_double:.6g}"
        return text if np.float32(float(text)) == np.float32(as_double) else f"{as_double:.9g}"
    if element_type == "f64":
        text = f"{as_double:.15g}"
        return text if float(text) == as_double else f"{as_double:.17g}"
    return _narrow_float_text(as_double, element_type)


def _narrow_float_text(as_double: float, element_type: str) -> str:
    """``%.{max_digits10}g``, with more digits where XLA would read that back as another value.

    XLA reads a literal as a double and stores it as `_stored_floats` does, so
    max_digits10 is not always enough: e8m0's 2^-127 prints as 5.9e-39, which
    is above 2^-127 and reads back as 2^-126.
    """
    digits = _MAX_DIGITS10[element_type]
    text = f"{as_double:.{digits}g}"
    while digits < 17 and not _reads_back(text, as_double, element_type):
        digits += 1
        text = f"{as_double:.{digits}g}"
    return text


def _reads_back(text: str, as_double: float, element_type: str) -> bool:
    """Whether XLA's parser stores `text` as the `element_type` value `as_double` (a finite one)."""
    import numpy as np

    if element_type == "f8e8m0fnu":  # the one type where numpy's cast is not XLA's: see `_stored_floats`
        read, exact = _stored_floats(np.array([float(text), as_double]), element_type)
        return bool(read == exact)
    scalar = numpy_dtype(element_type).type
    return scalar(float(text)) == scalar(as_double)


def _format_element(value: Any, element_type: str, scalar: bool) -> str:
    if element_type == "pred":
        if scalar:
            return "true" if value else "false"
        return "1" if value else "0"
    if element_type in COMPLEX_TYPES:
        part = COMPLEX_PARTS[element_type]
        return f"({format_float(value.real, part)}, {format_float(value.imag, part)})"
    if element_type in FLOAT_TYPES:
        return format_float(value, element_type)
    return str(int(value))


#: Arrays with at least this many elements are formatted per distinct value (`_element_texts`).
_TABLE_FROM = 4096
#: How many elements of a large array are formatted, and joined, at a time.
_FORMAT_PIECE = 1 << 18


def _element_texts(flat: np.ndarray, element_type: str, known: dict[int, str]) -> list[str]:
    """The texts of the elements of the 1-D array `flat`, each distinct value formatted once.

    Large constants are mostly repeated values (a mask, an upcast bf16 array has at most 65,536), and
    formatting one element costs microseconds of Python: the distinct bit patterns are found with numpy,
    and `known` (bit pattern → text) carries them from one piece of an array to the next, up to 65,536.
    """
    import numpy as np

    if flat.size < _TABLE_FROM or element_type in COMPLEX_TYPES:
        return [_format_element(v, element_type, scalar=False) for v in flat]
    bits = flat.view(f"u{flat.dtype.itemsize}")
    distinct, inverse = np.unique(bits, return_inverse=True)
    texts: list[str] = []
    for pattern, value in zip(distinct.tolist(), distinct.view(flat.dtype)):
        text = known.get(pattern)
        if text is None:
            text = _format_element(value, element_type, scalar=False)
            if len(known) < 1 << 16:
                known[pattern] = text
        texts.append(text)
    return np.array(texts, dtype=object)[inverse].tolist()


def _row_pieces(array: np.ndarray, element_type: str) -> Iterator[str]:
    """A rank-1 array's text a piece of `_FORMAT_PIECE` elements at a time (a list of every element's
    text would be eight bytes an element more, and a streaming printer writes each piece as it comes)."""
    known: dict[int, str] = {}
    yield "{"
    for start in range(0, array.size, _FORMAT_PIECE):
        piece = ", ".join(_element_texts(array[start : start + _FORMAT_PIECE], element_type, known))
        yield ", " + piece if start else piece
    yield "}"


def _literal_pieces(value: LiteralValue, shape: ArrayShape) -> Iterator[str]:
    """An array literal's text in pieces: a rank-1 array's formatted a piece at a time, any other whole."""
    import numpy as np

    array = np.asarray(value, dtype=numpy_dtype(shape.element_type))
    if array.ndim == 1:
        yield from _row_pieces(array, shape.element_type)
    else:
        yield _format_array(array, shape.element_type)


def _format_array(array: np.ndarray, element_type: str) -> str:
    if array.ndim == 0:
        return _format_element(array[()], element_type, scalar=True)
    if array.ndim == 1:
        return "".join(_row_pieces(array, element_type))
    known: dict[int, str] = {}
    flat = _element_texts(array.reshape(-1), element_type, known)
    dims = array.shape
    rank = len(dims)
    row = dims[-1]
    rows = (
        [
            ("{ " + ", ".join(flat[i : i + row]) + " }") if row > 1 else ("{" + ", ".join(flat[i : i + row]) + "}")
            for i in range(0, len(flat), row)
        ]
        if row
        else ["{}"] * (len(flat) // max(row, 1))
    )
    # Group rows into higher dimensions, innermost first.
    for level in range(rank - 2, -1, -1):
        size = dims[level]
        grouped: list[str] = []
        for start in range(0, len(rows), max(size, 1)):
            chunk = rows[start : start + size]
            index = start // max(size, 1)
            prefix = ""
            if rank > 3 and 0 < level < rank - 1:
                prefix = f"/*i{level - 1}={index % dims[level - 1]}*/ "
            grouped.append("{ " + prefix + ", ".join(chunk) + " }")
        rows = grouped
    return rows[0] if rows else "{}"


def format_literal(value: LiteralValue, shape: Shape) -> str:
    """Literal text in XLA's one-line print style (tuples at any depth)."""
    import numpy as np

    def leaf(item: tuple[object, Shape]) -> str:
        element_type = _array_shape(item[1]).element_type
        return _format_array(np.asarray(item[0], dtype=numpy_dtype(element_type)), element_type)

    def node(_: tuple[object, Shape], parts: list[str]) -> str:
        return "( " + ", ".join(parts) + " )"

    root: tuple[object, Shape] = (value, shape)
    return fold_tree(root, literal_parts, leaf, node)
