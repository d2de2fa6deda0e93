"""Shapes: element type, dimensions, dynamic bounds, layout, tuples.

Shapes are small frozen values shared between instructions; the parser
interns them by text, so a module with 100k instructions holds only a few
hundred distinct Shape objects.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Union

#: Every primitive type name XLA's text format knows (``xla_data.proto``).
PRIMITIVE_TYPES: frozenset[str] = frozenset(
    """pred s1 s2 s4 s8 s16 s32 s64 u1 u2 u4 u8 u16 u32 u64 f16 f32 bf16 f64
    f8e5m2 f8e4m3 f8e4m3fn f8e4m3b11fnuz f8e3m4 f8e5m2fnuz f8e4m3fnuz f8e8m0fnu
    f6e3m2fn f6e2m3fn f4e2m1fn c64 c128 token opaque""".split()
)

FLOAT_TYPES: frozenset[str] = frozenset(
    """f16 f32 bf16 f64 f8e5m2 f8e4m3 f8e4m3fn f8e4m3b11fnuz f8e3m4 f8e5m2fnuz
    f8e4m3fnuz f8e8m0fnu f6e3m2fn f6e2m3fn f4e2m1fn""".split()
)
SIGNED_INT_TYPES: frozenset[str] = frozenset("s1 s2 s4 s8 s16 s32 s64".split())
UNSIGNED_INT_TYPES: frozenset[str] = frozenset("u1 u2 u4 u8 u16 u32 u64".split())
INT_TYPES: frozenset[str] = SIGNED_INT_TYPES | UNSIGNED_INT_TYPES
COMPLEX_TYPES: frozenset[str] = frozenset({"c64", "c128"})

#: Marks an unbounded (``?``) dimension in `ArrayShape.dims`.
UNBOUNDED = -1


@dataclass(frozen=True, slots=True)
class Layout:
    """Minor-to-major order plus the rest of the layout (tiles, memory space…) kept as text."""

    minor_to_major: tuple[int, ...]
    tail: str = ""

    def to_text(self) -> str:
        body = ",".join(map(str, self.minor_to_major))
        return "{" + body + (":" + self.tail if self.tail else "") + "}"


def default_layout(rank: int) -> Layout:
    """XLA's default (descending, row-major) layout for a rank."""
    return Layout(tuple(range(rank - 1, -1, -1)))


@dataclass(frozen=True, slots=True)
class ArrayShape:
    """An array (or token/opaque) shape. ``dynamic[i]`` marks ``<=N`` or ``?`` dimensions."""

    element_type: str
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def element_count(self) -> int:
        count = 1
        for dim in self.dims:
            count *= max(dim, 0)
        return count

    def with_element_type(self, element_type: str) -> ArrayShape:
        return replace(self, element_type=element_type)

    def to_text(self, with_layout: bool = True) -> str:
        dims = ",".join(_dim_text(d, dyn) for d, dyn in zip(self.dims, self.dynamic))
        text = f"{self.element_type}[{dims}]"
        if with_layout and self.layout is not None:
            layout = self.layout.to_text()
            if layout != "{}":
                text += layout
        return text


@dataclass(frozen=True, slots=True)
class TupleShape:
    """A tuple of shapes (possibly empty, possibly nested)."""

    elements: tuple[Shape, ...] = ()

    def to_text(self, with_layout: bool = True) -> str:
        # Iterative so that deeply nested tuples do not hit the recursion limit.
        out: list[str] = []
        stack: list[tuple[TupleShape, int]] = [(self, 0)]
        out.append("(")
        while stack:
            tup, index = stack.pop()
            if index == len(tup.elements):
                out.append(")")
                continue
            stack.append((tup, index + 1))
            if index:
                out.append(", ")
                if index % 5 == 0:
                    out.append(f"/*index={index}*/")
            element = tup.elements[index]
            if isinstance(element, TupleShape):
                out.append("(")
                stack.append((element, 0))
            else:
                out.append(element.to_text(with_layout))
        return "".join(out)


@dataclass(frozen=True, slots=True)
class BufferShape:
    """``b(shape)``: a buffer wrapping an array shape (custom-call Pin/CreateBuffer)."""

    shape: ArrayShape

    def to_text(self, with_layout: bool = True) -> str:
        return f"b({self.shape.to_text(with_layout)})"


Shape = Union[ArrayShape, TupleShape, BufferShape]


def _dim_text(dim: int, dynamic: bool) -> str:
    if dim == UNBOUNDED:
        return "?"
    return f"<={dim}" if dynamic else str(dim)


def leaf_shapes(shape: Shape) -> list[ArrayShape]:
    """The array shapes of a (possibly nested) tuple, in order."""
    leaves: list[ArrayShape] = []
    stack: list[Shape] = [shape]
    while stack:
        current = stack.pop()
        if isinstance(current, TupleShape):
            stack.extend(reversed(current.elements))
        elif isinstance(current, BufferShape):
            leaves.append(current.shape)
        else:
            leaves.append(current)
    return leaves


def map_leaves(shape: Shape, fn: Callable[[ArrayShape], ArrayShape]) -> Shape:
    """Rebuild `shape` with `fn` applied to each array leaf (returns `shape` itself if nothing changed)."""
    if isinstance(shape, ArrayShape):
        return fn(shape)
    if isinstance(shape, BufferShape):
        inner = fn(shape.shape)
        return shape if inner is shape.shape else BufferShape(inner)
    elements = tuple(map_leaves(e, fn) for e in shape.elements)
    if all(a is b for a, b in zip(elements, shape.elements)):
        return shape
    return TupleShape(elements)
