"""A layout's tail (``{1,0:T(8,128)(2,1)E(4)S(1)}`` after the ``:``) read as XLA's ``ParseLayout`` reads it.

XLA reads the items in one fixed order, each at most once: ``D(…)`` ``T(…)…`` ``L(n)`` ``#(type)``
``*(type)`` ``E(n)`` ``S(n)`` ``SC(…)…`` ``P(shape)`` ``M(n)``, then wants the ``}``. Its parser does
not stop at every missing bracket (``E(4`` is E(4), a bare ``T`` one empty tile), so neither does
this one: what it accepts and refuses was probed against jaxlib (tests/text/test_layout_tail_parity.py).
The tail comes back as the typed fields of a `Layout` (``D`` and default values dropped), which print in
XLA's form (no spaces or comments), so hloopt's output reads back as itself and as XLA prints it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hloopt.ir.element_types import PRIMITIVE_TYPES
from hloopt.ir.shape import COMBINE_DIMENSION, Layout

#: XLA's lexer on a layout tail: blanks and comments, then a name, an int64, or one punctuation character.
_TOKEN = re.compile(r"(?:\s|/\*(?:[^*]|\*(?!/))*\*/|//[^\n\r]*)*+(?:([A-Za-z_][A-Za-z0-9_.\-]*)|(-?\d+)|(.))?", re.S)
_INT64 = range(-(2**63), 2**63)

#: Builds the located error for a message at an offset of the tail.
TailError = Callable[[int, str], Exception]


class _Tokens:
    """The tail's tokens, read one ahead; the end of the text reads as ``}``."""

    def __init__(self, text: str, error: TailError) -> None:
        self._text = text
        self._error = error
        self._at = 0
        self.kind, self.value, self.start = "}", "", len(text)
        self._next()

    def _next(self) -> None:
        match = _TOKEN.match(self._text, self._at)
        if match is None or match.lastindex is None:  # blanks or a comment to the end
            self.kind, self.value, self.start, self._at = "}", "", len(self._text), len(self._text)
            return
        self._at = match.end()
        self.start = match.start(match.lastindex)
        name, number, other = match.groups()
        if name is not None:
            self.kind, self.value = ("type" if name in PRIMITIVE_TYPES else "name"), name
        elif number is not None:
            if int(number) not in _INT64:
                raise self._error(self.start, f"expects an int64 in the layout, found {number[:30]}")
            self.kind, self.value = "int", number
        else:
            self.kind, self.value = other, other

    def eat(self, kind: str, value: str | None = None) -> str | None:
        """The current token's text if it is `kind` (and `value`), moving past it; else None."""
        if self.kind != kind or (value is not None and self.value != value):
            return None
        taken = self.value
        self._next()
        return taken

    def fail(self, message: str) -> Exception:
        return self._error(self.start, message)


def read_layout(minor_to_major: tuple[int, ...], text: str, error: TailError) -> Layout:
    """The layout of `minor_to_major` and the tail `text` (after the layout's ``:``); `error(offset,
    message)` when XLA refuses the tail, where XLA stops (or aborts: a negative tile, a tail padding below 1).
    An item at its default value is dropped, as XLA's print drops it."""
    tokens = _Tokens(text, error)
    fields: dict[str, object] = {}
    if tokens.eat("name", "D") is not None:
        _dim_level_types(tokens)  # read and dropped, as XLA drops them
    if tokens.eat("name", "T") is not None:
        fields["tiles"] = _tiles(tokens)
    for item, int_item, field in (
        ("L", True, "tail_padding_alignment_in_elements"),
        ("#", False, "index_primitive_type"),
        ("*", False, "pointer_primitive_type"),
        ("E", True, "element_size_in_bits"),
        ("S", True, "memory_space"),
    ):
        if tokens.eat("name" if int_item else item, item if int_item else None) is None:
            continue
        value = _int_item(tokens) if int_item else _type_item(tokens)
        if item == "L" and value is not None and int(value) < 1:
            raise tokens.fail(f"L({value}): a tail padding alignment must be at least 1 (XLA aborts on it)")
        if value is not None:
            fields[field] = int(value) if int_item else value
    if tokens.eat("name", "SC") is not None:
        fields["split_configs"] = _split_configs(tokens)
    if tokens.eat("name", "P") is not None:
        fields["physical_shape"] = _physical_shape(tokens, text)
    if tokens.eat("name", "M") is not None:
        value = _int_item(tokens)
        if value is not None and int(value) > 0:
            fields["dynamic_shape_metadata_prefix_bytes"] = int(value)
    if tokens.kind != "}":
        raise tokens.fail("expects '}' at the end of layout")
    return Layout(minor_to_major, **fields)  # type: ignore[arg-type]  # each field's value is its type


def _int_item(tokens: _Tokens) -> str | None:
    """``(n)`` after an item's letter; XLA stops at the first piece missing and keeps what it read."""
    if tokens.eat("(") is None:
        return None
    number = tokens.eat("int")
    if number is None:
        return None
    tokens.eat(")")
    return str(int(number))


def _type_item(tokens: _Tokens) -> str | None:
    """``(type)`` after ``#`` or ``*``: XLA reads each of the three pieces only if it is there."""
    tokens.eat("(")
    element_type = tokens.eat("type")
    tokens.eat(")")
    return element_type


def _tiles(tokens: _Tokens) -> tuple[tuple[int, ...], ...]:
    """``(8,128)(2,1)``: each tile's sizes (``*`` combines); a bare ``T`` is one empty tile. XLA reads
    tiles while a ``(`` follows a whole one; a tile cut short (``T(8(``, ``T(8)(``) is the last."""
    tiles: list[tuple[int, ...]] = []
    while True:
        sizes: list[int] = []
        whole = tokens.eat("(") is not None and (tokens.eat(")") is not None or _tile_sizes(tokens, sizes))
        tiles.append(tuple(sizes))
        if not whole or tokens.kind != "(":
            return tuple(tiles)


def _tile_sizes(tokens: _Tokens, sizes: list[int]) -> bool:
    """One tile's sizes after its ``(`` into `sizes`, and its ``)``; False where XLA stops short."""
    while True:
        if tokens.eat("*") is not None:
            sizes.append(COMBINE_DIMENSION)
        else:
            number = tokens.eat("int")
            if number is None:
                return False
            if int(number) < 0:
                raise tokens.fail(f"tile size {number} is negative (XLA aborts on it)")
            sizes.append(int(number))
        if tokens.eat(",") is None:
            return tokens.eat(")") is not None


def _dim_level_types(tokens: _Tokens) -> None:
    """``(D,C+~,S)``: each a D, C, S or H, marked ``+`` (not unique) and/or ``~`` (not ordered)."""
    if tokens.eat("(") is None or tokens.eat(")") is not None:
        return
    while True:
        if tokens.eat("name", "D") is None and all(tokens.eat("name", kind) is None for kind in "CSH"):
            raise tokens.fail("expected a DimLevelType abbreviation (D, C, or S)")
        tokens.eat("+")
        tokens.eat("~")
        if tokens.eat(",") is None:
            tokens.eat(")")
            return


def _split_configs(tokens: _Tokens) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """``(0:1,2)(1:4)``: a dimension, ``:``, its split indices; XLA keeps a config once its ``:`` is read,
    and reads no further once one is cut short."""
    configs: list[tuple[int, tuple[int, ...]]] = []
    while tokens.eat("(") is not None:
        dimension = tokens.eat("int")
        if dimension is None or tokens.eat(":") is None:
            break
        indices: list[int] = []
        whole = True
        while (index := tokens.eat("int")) is not None:
            indices.append(int(index))
            if tokens.eat(",") is None:
                break
            if tokens.kind != "int":
                whole = False
                break
        configs.append((int(dimension), tuple(indices)))
        if not whole or tokens.eat(")") is None or tokens.kind != "(":
            break
    return tuple(configs)


def _physical_shape(tokens: _Tokens, text: str) -> str:
    """``(shape)`` after ``P``, as written: only a sparse array may have one, which validation refuses."""
    tokens.eat("(")
    start = tokens.start
    while tokens.kind not in (")", "}"):
        tokens.eat(tokens.kind)
    end = tokens.start
    tokens.eat(")")
    return text[start:end].strip()
