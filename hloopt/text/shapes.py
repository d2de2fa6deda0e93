"""Shape text → `Shape`, each distinct text read once per parse.

A 100k-instruction module writes a few hundred distinct shapes, so the reader
keeps every shape it has read by its text: the same text gives the same
object, which also lets validation check each shape once. Array shapes are
read with a regex; tuple and buffer shapes go through the grammar's `shape`
rule, whose callbacks come back here for the arrays inside.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hloopt.errors import HloParseError
from hloopt.ir.element_types import PRIMITIVE_TYPES
from hloopt.ir.module import ProgramLayout
from hloopt.ir.shape import UNBOUNDED, ArrayShape, BufferShape, Layout, Shape, TupleShape, default_layout
from hloopt.text.layout_tail import read_layout

_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\s*\[([^\]]*)\](?:\s*\{\s*([^{}]*?)\s*\})?")
#: A dimension, layout entry or parameter number: XLA's int64, so at most 18 digits here (``-0`` is 0 to XLA).
SIZE = re.compile(r"[0-9]{1,18}|-0{1,18}")

#: A comma after the last parameter shape of entry_computation_layout, and the blanks after it (group 1).
_LAST_COMMA = re.compile(r",([ \t\r\n]*)\)$")
#: What opens a layout after a shape's `{` (XLA's parser looks for a number or `:`).
_LAYOUT_STARTS = frozenset("0123456789:-")
#: Builds the located error for a message at an offset of the source.
ErrorAt = Callable[[int, str], HloParseError]
#: Reads a tuple or buffer shape's text standing at an offset of the source (with the grammar).
NestedReader = Callable[[str, int], Shape]


class ShapeReader:
    """The shapes of one source text, interned by their text."""

    def __init__(self, error: ErrorAt, read_nested: NestedReader) -> None:
        self._error = error
        self._read_nested = read_nested
        self._cache: dict[str, Shape] = {}
        #: The shape already read for a text, if any (so a caller computes an offset only when needed):
        #: the dict's own lookup, with no Python call around it (the parser asks once per instruction).
        self.get: Callable[[str], Shape | None] = self._cache.get

    def read(self, text: str, offset: int) -> Shape:
        """The shape written as `text` at `offset` of the source."""
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        nested = text[:1] == "(" or text[:2] == "b("
        shape = self._read_nested(text, offset) if nested else self.array(text, offset)
        if nested:
            self._check_tuple_layouts([shape], offset)
        self._cache[text] = shape
        return shape

    def _check_tuple_layouts(self, shapes: list[Shape], offset: int) -> None:
        """XLA validates the layout of each array inside a tuple (a lone array's it leaves be): a minor-to-major
        order that is no permutation of the dimensions is refused, where the shape at `offset` starts. A stack,
        not recursion: tuples in text may nest thousands deep."""
        while shapes:
            shape = shapes.pop()
            if isinstance(shape, BufferShape):
                shapes.append(shape.shape)
            if not isinstance(shape, TupleShape):
                continue
            for element in shape.elements:
                order = element.layout.minor_to_major if isinstance(element, ArrayShape) and element.layout else ()
                if order and sorted(order) != list(range(len(order))):
                    message = f"layout of tuple element {element.to_text()} is not a permutation of its dimensions"
                    raise self._error(offset, message)
            shapes.extend(shape.elements)

    def array(self, text: str, offset: int) -> ArrayShape:
        """An array shape ``type[dims]{layout}`` written at `offset` (not interned: tuples intern whole)."""
        match = _ARRAY_SHAPE.fullmatch(text.strip())
        if match is None:
            raise self._error(offset, f"expects a shape, found {_first_line(text)!r}")
        element_type, dims_text, layout_text = match.groups()
        if element_type not in PRIMITIVE_TYPES:
            raise self._error(offset, f"unknown primitive type {element_type!r}")
        if element_type in ("token", "opaque") and dims_text.strip():  # XLA's parser takes it, then aborts
            at = offset + _leading_space(text) + match.start(2)
            raise self._error(at, f"expects {element_type}[], with no dimensions (XLA aborts on any)")
        dims: list[int] = []
        dynamic: list[bool] = []
        for index, part in enumerate(p.strip() for p in dims_text.split(",")) if dims_text.strip() else ():
            if part == "?":
                dims.append(UNBOUNDED)
                dynamic.append(True)
                continue
            bounded = part.startswith("<=")
            digits = part[2:].strip() if bounded else part
            if not SIZE.fullmatch(digits):
                raise self._dimension_error(match, index, offset + _leading_space(text))
            dims.append(int(digits))
            dynamic.append(bounded)
        layout_at = offset + _leading_space(text) + match.start(3) if layout_text is not None else offset
        if layout_text is not None and layout_text[:1] not in _LAYOUT_STARTS:  # `{}`: no layout to XLA's parser
            raise self._error(layout_at - 1, f"expects `,` or `)` after the shape, found {{{layout_text[:40]}}}")
        layout = self._layout(layout_text, len(dims), text, layout_at) if layout_text is not None else None
        if layout is None and element_type not in ("token", "opaque"):
            layout = default_layout(len(dims))
        return ArrayShape(element_type, tuple(dims), tuple(dynamic), layout)

    def _dimension_error(self, match: re.Match[str], index: int, offset: int) -> HloParseError:
        """The error for dimension `index` of the shape `match` (at `offset`), at that dimension.

        Dimensions may go on over lines, so a `]` left out takes the next lines into the shape: then
        the error is where the first line's dimensions end, and neither message quotes the next line.
        """
        raw = match.group(2).split(",")
        at = match.start(2) + sum(len(part) + 1 for part in raw[:index])
        part = raw[index]
        shape = _first_line(match.group())
        if "\n" in part:
            first = part[: part.index("\n")]
            if SIZE.fullmatch(first.strip().removeprefix("<=").strip()) or first.strip() == "?":
                return self._error(offset + at + len(first.rstrip()), f"expects `]` to close the shape {shape!r}")
            part = first
        written = part.strip()
        if not written:  # where it is missing
            return self._error(offset + at + len(part), f"expects a dimension in shape {shape[:80]!r}")
        at += len(part) - len(part.lstrip())
        return self._error(offset + at, f"bad dimension {written[:40]!r} in shape {shape[:80]!r}")

    def _layout(self, layout_text: str, rank: int, text: str, offset: int) -> Layout:
        """The layout `layout_text` of shape `text`, written at `offset`."""
        order_text, _, tail = layout_text.partition(":")
        parts = [p.strip() for p in order_text.split(",")] if order_text.strip() else []
        if not all(SIZE.fullmatch(p) for p in parts):  # an empty entry (`{1,,0}`) too, as XLA
            raise self._error(offset, f"expects a layout of dimension numbers, found {{{layout_text[:60]}}}")
        order = tuple(int(p) for p in parts)
        if len(order) != rank:
            raise self._error(offset, f"layout {{{layout_text}}} does not match the rank of {text!r}")
        if not tail.strip():
            return Layout(order)
        tail_at = offset + len(order_text) + 1
        return read_layout(order, tail, lambda at, message: self._error(tail_at + at, message))

    def program_layout(self, value: str, offset: int) -> ProgramLayout:
        """``{(params)->result}``, the module's entry_computation_layout, written at `offset`."""
        inner = value.strip()
        if not (inner.startswith("{") and inner.endswith("}")) or "->" not in inner:
            raise self._error(offset, "expects entry_computation_layout={(shapes)->shape}")
        params_text, _, result_text = inner[1:-1].rpartition("->")
        params_at = offset + 1 + _leading_space(params_text)
        result_at = offset + 1 + len(params_text) + len("->") + _leading_space(result_text)
        # The parameter list is no tuple to XLA (its arrays' layouts are not validated): read apart from the cache.
        # (XLA reads a comma after its last shape too.)
        listed = _LAST_COMMA.sub(r"\1)", params_text.strip())
        params = self._read_nested(listed, params_at) if listed[:1] == "(" else None
        result = self.read(result_text.strip(), result_at)
        if not isinstance(params, TupleShape):
            raise self._error(offset, "expects the parameter shapes of entry_computation_layout in parentheses")
        self._check_tuple_layouts(list(params.elements), params_at)
        return ProgramLayout(params.elements, result)


def _leading_space(text: str) -> int:
    return len(text) - len(text.lstrip())


def _first_line(text: str) -> str:
    """`text` up to its first line break: an error quotes what is on the line it points at."""
    return text.strip().partition("\n")[0].rstrip()
