"""Shapes: element type, dimensions, dynamic bounds, layout, tuples.

Shapes are small frozen values shared between instructions; the parser
interns them by text, so a module with 100k instructions holds only a few
hundred distinct Shape objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import zip_longest
from typing import TypeAlias, TypeVar, cast

__all__ = [
    "COMBINE_DIMENSION",
    "UNBOUNDED",
    "ArrayShape",
    "BufferShape",
    "Layout",
    "Shape",
    "TupleShape",
    "default_layout",
    "fold_tree",
    "leaf_shapes",
    "literal_parts",
    "map_leaves",
    "tuple_elements",
]

T = TypeVar("T")
R = TypeVar("R")

#: Marks an unbounded (``?``) dimension in `ArrayShape.dims`.
UNBOUNDED = -1


#: A tile size of ``*``: the tile combines the dimensions it covers (``Tile::kCombineDimension``).
COMBINE_DIMENSION = -(2**63)


@dataclass(frozen=True, slots=True)
class Layout:
    """Minor-to-major order, and the rest of XLA's ``Layout`` a layout's text can say after the ``:``
    (``{1,0:T(8,128)(2,1)E(4)S(1)}``), each field at XLA's default when the text leaves it out."""

    minor_to_major: tuple[int, ...]
    #: ``T(8,128)(2,1)``: each tile's sizes, `COMBINE_DIMENSION` for ``*``.
    tiles: tuple[tuple[int, ...], ...] = ()
    #: ``L(n)``.
    tail_padding_alignment_in_elements: int = 1
    #: ``#(s32)``.
    index_primitive_type: str | None = None
    #: ``*(s32)``.
    pointer_primitive_type: str | None = None
    #: ``E(n)``: the bits one element takes when packed; 0 when elements are not packed.
    element_size_in_bits: int = 0
    #: ``S(n)``.
    memory_space: int = 0
    #: ``SC(0:1,2)…``: a dimension and its split indices, per config.
    split_configs: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: ``P(shape)``, as written: only a sparse array may have one, which validation refuses.
    physical_shape: str | None = None
    #: ``M(n)``.
    dynamic_shape_metadata_prefix_bytes: int = 0

    def to_text(self) -> str:
        """As ``Layout::Print`` prints it: the order, then each tail item that is not at its default."""
        body = ",".join(map(str, self.minor_to_major))
        items: list[str] = []
        if self.tiles:
            items.append("T" + "".join("(" + ",".join(map(_tile_size, tile)) + ")" for tile in self.tiles))
        if self.tail_padding_alignment_in_elements != 1:
            items.append(f"L({self.tail_padding_alignment_in_elements})")
        if self.index_primitive_type is not None:
            items.append(f"#({self.index_primitive_type})")
        if self.pointer_primitive_type is not None:
            items.append(f"*({self.pointer_primitive_type})")
        if self.element_size_in_bits:
            items.append(f"E({self.element_size_in_bits})")
        if self.memory_space:
            items.append(f"S({self.memory_space})")
        if self.split_configs:
            items.append("SC" + "".join(f"({d}:{','.join(map(str, i))})" for d, i in self.split_configs))
        if self.physical_shape is not None:
            items.append(f"P({self.physical_shape})")
        if self.dynamic_shape_metadata_prefix_bytes > 0:
            items.append(f"M({self.dynamic_shape_metadata_prefix_bytes})")
        return "{" + body + (":" + "".join(items) if items else "") + "}"


def _tile_size(size: int) -> str:
    return "*" if size == COMBINE_DIMENSION else str(size)


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
        return _array_text(self, with_layout)


@dataclass(frozen=True, slots=True)
class TupleShape:
    """A tuple of shapes (possibly empty, possibly nested)."""

    elements: tuple[Shape, ...] = ()

    # Equality and hashing walk the nesting iteratively: the dataclass versions recurse per level.
    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, TupleShape):
            return NotImplemented
        return all(a == b for a, b in zip_longest(_structure(self), _structure(other), fillvalue=_END))

    def __hash__(self) -> int:
        return hash(tuple(_structure(self)))

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


Shape: TypeAlias = ArrayShape | TupleShape | BufferShape


@lru_cache(maxsize=8192)
def _array_text(shape: ArrayShape, with_layout: bool) -> str:
    """Shapes repeat across a module: each distinct one is spelled once."""
    dims = ",".join(_dim_text(d, dyn) for d, dyn in zip(shape.dims, shape.dynamic))
    text = f"{shape.element_type}[{dims}]"
    if with_layout and shape.layout is not None:
        layout = shape.layout.to_text()
        if layout != "{}":
            text += layout
    return text


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


def _structure(shape: TupleShape) -> Iterator[object]:
    """Pre-order tokens of a tuple: ``("(", n)`` per tuple of n elements, then each non-tuple leaf."""
    stack: list[Shape] = [shape]
    while stack:
        current = stack.pop()
        if isinstance(current, TupleShape):
            yield ("(", len(current.elements))
            stack.extend(reversed(current.elements))
        else:
            yield current


class _End:
    """The end-of-children marker of `fold_tree` (a class, so the type checker can tell it from an item)."""


_END = _End()


def fold_tree(
    root: T,
    children: Callable[[T], Iterable[T] | None],
    leaf: Callable[[T], R],
    node: Callable[[T, list[R]], R],
) -> R:
    """Bottom-up fold of a tree without recursion, so nesting depth is bounded by memory, not the stack.

    `children(item)` is None for a leaf, else an iterable consumed lazily (one
    child's subtree is folded before the next child is drawn, the order a
    recursive fold would create things in); `node(item, folded_children)` combines.
    """
    kids = children(root)
    if kids is None:
        return leaf(root)
    stack: list[tuple[T, Iterator[T], list[R]]] = [(root, iter(kids), [])]
    while True:
        item, pending, done = stack[-1]
        child = next(pending, _END)
        if isinstance(child, _End):
            stack.pop()
            value = node(item, done)
            if not stack:
                return value
            stack[-1][2].append(value)
            continue
        grandchildren = children(child)
        if grandchildren is None:
            done.append(leaf(child))
        else:
            stack.append((child, iter(grandchildren), []))


def tuple_elements(shape: Shape) -> tuple[Shape, ...] | None:
    """A tuple's elements, None for any other shape (the `children` of `fold_tree` over shapes)."""
    return shape.elements if isinstance(shape, TupleShape) else None


def literal_parts(item: tuple[object, Shape]) -> Iterator[tuple[object, Shape]] | None:
    """(value, shape) of each element of a tuple literal's value, None for an array (`fold_tree` children)."""
    value, shape = item
    if not isinstance(shape, TupleShape):
        return None
    assert isinstance(value, tuple)
    return zip(cast("tuple[object, ...]", value), shape.elements)


def map_leaves(shape: Shape, fn: Callable[[ArrayShape], ArrayShape]) -> Shape:
    """Rebuild `shape` with `fn` applied to each array leaf (returns `shape` itself if nothing changed)."""

    def leaf(current: Shape) -> Shape:
        if isinstance(current, BufferShape):
            inner = fn(current.shape)
            return current if inner is current.shape else BufferShape(inner)
        assert isinstance(current, ArrayShape)  # `fold_tree` calls `leaf` only for non-tuples
        return fn(current)

    def node(current: Shape, elements: list[Shape]) -> Shape:
        assert isinstance(current, TupleShape)
        if all(a is b for a, b in zip(elements, current.elements)):
            return current
        return TupleShape(tuple(elements))

    return fold_tree(shape, tuple_elements, leaf, node)
