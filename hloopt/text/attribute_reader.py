"""Typed attribute values read from their text, once, when a module has been parsed and validated.

`read_attributes` replaces each modelled attribute's text (`attribute_kinds.TYPED`) by its value.
Validation has refused every text XLA's parser refuses, in XLA's words and at its place, before this
runs; a text that is still not one of these readers' forms stays text (the IR allows it), so a gap
between the two can never change a print. Values repeat from line to line (``index=0``, one jax
operation's metadata on each instruction it lowered to), so each distinct text is read once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum

from hloopt.ir.attribute_kinds import BY_OPCODE, KINDS, MODULE_KINDS, TYPED, Kind, kind_of
from hloopt.ir.attribute_values import (
    Aliasing,
    Bool,
    ComparisonDirection,
    ComparisonType,
    ConvolutionDimensionNumbers,
    FftType,
    Float,
    FrontendAttributes,
    FusionKind,
    Int,
    IntList,
    Iota,
    Metadata,
    PaddingConfig,
    PaddingDimension,
    Precision,
    PrecisionList,
    RandomDistribution,
    ReplicaGroups,
    Sharding,
    SliceRanges,
    String,
    TupleSharding,
    Typed,
    Window,
    WindowDimension,
    read_from,
)
from hloopt.ir.brackets import BracketError, string_end, value_end
from hloopt.ir.module import Module

_COMMENT = re.compile(r"/\*(?:[^*]|\*(?!/))*\*/")
_INTEGER = re.compile(r"-?\d+")
_WINDOW_FIELD = re.compile(r"(\w+)=(\S+?)(?=\s|\}|$)")
_BLANKS = " \t\n\r"


class _Unreadable(ValueError):
    """A text none of the forms here reads (it stays text)."""


def _without_comments(text: str) -> str:
    return _COMMENT.sub(" ", text) if "/*" in text else text


def _int(text: str) -> Int:
    return Int(int(_without_comments(text).strip(_BLANKS)))


def _int_list(text: str) -> IntList:
    body = _without_comments(text).strip(_BLANKS)
    if not (body.startswith("{") and body.endswith("}")):
        raise _Unreadable(text)
    return IntList(tuple(map(int, _INTEGER.findall(body))))


_UNESCAPED = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def _string(text: str) -> String:
    """``"…"``, its escapes undone (an octal or hex escape is left to the text)."""
    body = text.strip(_BLANKS)
    if len(body) < 2 or body[0] != '"' or string_end(body, 0) != len(body):
        raise _Unreadable(text)
    if "\\" not in body:
        return String(body[1:-1])
    out: list[str] = []
    i = 1
    while i < len(body) - 1:
        if body[i] == "\\":
            out.append(_UNESCAPED[body[i + 1]])  # a KeyError for another escape
            i += 2
        else:
            out.append(body[i])
            i += 1
    return String("".join(out))


def _window(text: str) -> Window:
    body = _without_comments(text).strip(_BLANKS)
    if not (body.startswith("{") and body.endswith("}")):
        raise _Unreadable(text)
    fields = {key: value.split("x") for key, value in _WINDOW_FIELD.findall(body[1:-1])}
    count = max(map(len, fields.values()), default=0)
    if any(len(entries) != count for entries in fields.values()):
        raise _Unreadable(text)

    def column(key: str, default: str) -> list[str]:
        return fields.get(key, [default] * count)

    pads = [pad.split("_") for pad in column("pad", "0_0")]
    return Window(
        tuple(
            WindowDimension(int(size), int(stride), int(low), int(high), int(lhs), int(rhs), reversal == "1")
            for size, stride, (low, high), lhs, rhs, reversal in zip(
                column("size", "1"),
                column("stride", "1"),
                pads,
                column("lhs_dilate", "1"),
                column("rhs_dilate", "1"),
                column("rhs_reversal", "0"),
            )
        )
    )


def _labels(text: str, first: str, second: str) -> tuple[int, int, tuple[int, ...]]:
    """One side of ``dim_labels``: where `first` and `second` are, and where spatial dimension 0, 1, … is."""
    digits = {int(ch): i for i, ch in enumerate(text) if ch.isdigit()}
    if first not in text or second not in text or sorted(digits) != list(range(len(digits))):
        raise _Unreadable(text)
    return text.index(first), text.index(second), tuple(digits[d] for d in range(len(digits)))


def _convolution_dimension_numbers(text: str) -> ConvolutionDimensionNumbers:
    lhs_rhs, arrow, out = text.strip(_BLANKS).partition("->")
    lhs, underscore, rhs = lhs_rhs.partition("_")
    if not (arrow and underscore):
        raise _Unreadable(text)
    sides = (lhs, rhs, out)
    ranks = tuple(len(side) if "?" in side else 0 for side in sides)
    return ConvolutionDimensionNumbers(
        *_labels(lhs, "b", "f"),
        *_labels(rhs, "i", "o"),
        *_labels(out, "b", "f"),
        ranks=ranks,  # type: ignore[arg-type]
    )


def _precision_list(text: str) -> PrecisionList:
    body = _without_comments(text).strip(_BLANKS)
    if not (body.startswith("{") and body.endswith("}")):
        raise _Unreadable(text)
    items = [item.strip(_BLANKS) for item in body[1:-1].split(",")]
    return PrecisionList(tuple(Precision(item) for item in items if item or len(items) > 1))


def _map_entries(text: str, separators: str) -> tuple[tuple[str, str], ...]:
    """``{key=value …}``: each key and its value's text (a string, a braced group or a bare token), the
    entries parted by blanks and `separators`, comments between them skipped."""
    body = text.strip(_BLANKS)
    if not (body.startswith("{") and body.endswith("}")):
        raise _Unreadable(text)
    entries: list[tuple[str, str]] = []
    i, end = 1, len(body) - 1
    while True:
        while i < end and (body[i] in _BLANKS or body[i] in separators or body.startswith("/*", i)):
            i = body.index("*/", i + 2) + 2 if body.startswith("/*", i) else i + 1
        if i >= end:
            return tuple(entries)
        equals = body.find("=", i, end)
        if equals < 0:
            raise _Unreadable(text)
        start = equals + 1
        while start < end and body[start] in _BLANKS:
            start += 1
        stop = value_end(body, start, " \t\n\r,}")
        entries.append((body[i:equals].strip(_BLANKS), body[start:stop]))
        i = stop


def _metadata(text: str) -> Metadata:
    return Metadata(_map_entries(text, ","))


def _frontend_attributes(text: str) -> FrontendAttributes:
    return FrontendAttributes(_map_entries(text, ","))


def _bare(text: str) -> str:
    return _without_comments(text).strip(_BLANKS)


def _bool(text: str) -> Bool:
    body = _bare(text)
    if body not in ("true", "false"):
        raise _Unreadable(text)
    return Bool(body == "true")


def _float(text: str) -> Float:
    return Float(float(_bare(text)))


def _padding(text: str) -> PaddingConfig:
    """``0_0x1_2_1``: each dimension's low, high and (optional) interior padding."""
    dimensions = [dim.split("_") for dim in _bare(text).split("x")]
    if any(len(parts) not in (2, 3) for parts in dimensions):
        raise _Unreadable(text)
    return PaddingConfig(tuple(PaddingDimension(*map(int, parts)) for parts in dimensions))


_SLICE_RANGE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")
_INT_GROUP = re.compile(r"\{([^{}]*)\}")
_IOTA = re.compile(r"\[([^\]]*)\]\s*<=\s*\[([^\]]*)\](?:\s*T\s*\(([^)]*)\))?")
_ALIAS_PAIR = re.compile(r"\{([^{}]*)\}\s*:\s*\(\s*(-?\d+)\s*,\s*\{([^{}]*)\}\s*\)")


def _ints(text: str | None) -> tuple[int, ...]:
    return tuple(map(int, _INTEGER.findall(text or "")))


def _braced_body(text: str) -> str:
    body = _bare(text)
    if not (body.startswith("{") and body.endswith("}")):
        raise _Unreadable(text)
    return body[1:-1]


def _whole(pattern: re.Pattern[str], body: str, separator: str = ",") -> list[re.Match[str]]:
    """Every match of `pattern` in `body`, which must hold nothing else but `separator`s and blanks."""
    found = list(pattern.finditer(body))
    rest = pattern.sub("", body)
    if rest.strip(_BLANKS + separator) or rest.count(separator) != max(len(found) - 1, 0):
        raise _Unreadable(body)
    return found


def _slices(text: str) -> SliceRanges:
    """``{[0:4:1], [0:2]}``: a stride left out is 1."""
    found = _whole(_SLICE_RANGE, _braced_body(text))
    return SliceRanges(tuple((int(a), int(b), int(c) if c else 1) for a, b, c in (m.groups() for m in found)))


def _iota(text: str) -> Iota:
    match = _IOTA.fullmatch(text.strip(_BLANKS))
    if match is None:
        raise _Unreadable(text)
    return Iota(_ints(match[1]), _ints(match[2]), _ints(match[3]))


def _replica_groups(text: str) -> ReplicaGroups:
    """``{{0,1},{2,3}}`` or the iota form ``[2,2]<=[4]`` (a mesh form is no form here and stays text)."""
    body = _bare(text)
    if body.startswith("["):
        return ReplicaGroups(iota=_iota(body))
    return ReplicaGroups(tuple(_ints(m[1]) for m in _whole(_INT_GROUP, _braced_body(body))))


def _aliasing(text: str) -> Aliasing:
    found = _whole(_ALIAS_PAIR, _braced_body(text))
    return Aliasing(tuple((_ints(m[1]), int(m[2]), _ints(m[3])) for m in found))


#: A sharding's tokens: blanks and comments (group 1, skipped), ``<=``, a name (with its ``=``), an integer, or
#: one other character; a metadata value is taken whole by `_single_sharding`.
_SHARDING_TOKEN = re.compile(r"([ \t\n\r]+|/\*(?:[^*]|\*(?!/))*\*/)|<=|[A-Za-z_][A-Za-z0-9_.\-]*=?|-?[0-9]+|[\s\S]")
_SHARDING_KEYWORDS = frozenset({"replicated", "manual", "unknown", "unreduced", "maximal"})


class _Tokens:
    """The tokens of a sharding's text, read left to right."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def take(self) -> str:
        while True:
            match = _SHARDING_TOKEN.match(self.text, self.at)
            if match is None:
                return ""
            self.at = match.end()
            if match[1] is None:
                return match[0]

    def peek(self) -> str:
        at = self.at
        token = self.take()
        self.at = at
        return token

    def integers(self, end: str) -> tuple[int, ...]:
        """``int (, int)*`` up to `end` (taken); the explicit device list has no `end`: up to its last integer."""
        found: list[int] = []
        while (token := self.peek()) != end:
            if token != ",":
                if not _INTEGER.fullmatch(token):
                    if end:
                        raise _Unreadable(self.text)
                    break
                found.append(int(token))
            self.take()
        if end:
            self.take()
        return tuple(found)


def _single_sharding(tokens: _Tokens) -> Sharding:
    """One sharding after its ``{``, up to and with its ``}``: a form the fields cannot hold (two keywords,
    a keyword with tiles) stays text."""
    fields: dict[str, object] = {}
    metadata: list[Metadata] = []
    while (token := tokens.take()) != "}":
        if token in _SHARDING_KEYWORDS:
            if "keyword" in fields:
                raise _Unreadable(tokens.text)
            fields["keyword"] = token
        elif token == "device=":
            fields["device"] = int(tokens.take())
        elif token == "devices=":
            if tokens.take() != "[":
                raise _Unreadable(tokens.text)
            tiles = tokens.integers("]")
            fields["tiles"] = tiles
            if tokens.peek() == "<=":
                tokens.take()
                tokens.take()  # [
                reshape = tokens.integers("]")
                transpose: tuple[int, ...] = ()
                if tokens.peek() == "T":
                    tokens.take()
                    tokens.take()  # (
                    transpose = tokens.integers(")")
                fields["iota"] = Iota(tiles, reshape, transpose)
            else:
                fields["devices"] = tokens.integers("")
        elif token == "last_tile_dim_replicate":
            fields["last_tile_dim_replicate"] = True
        elif token == "last_tile_dims=":
            if tokens.take() != "{":
                raise _Unreadable(tokens.text)
            names: list[str] = []
            while (name := tokens.take()) != "}":
                if not name:
                    raise _Unreadable(tokens.text)
                if name != ",":
                    names.append(name)
            fields["last_tile_dims"] = tuple(names)
        elif token in ("shard_as", "shard_like"):
            fields["shard_group"] = (token, int(tokens.take()))
        elif token == "metadata=":
            start = tokens.text.index("{", tokens.at)
            end = value_end(tokens.text, start)
            group = tokens.text[start:end]
            inner = _map_entries(group, ",") if not group[1:].lstrip(_BLANKS).startswith("{") else None
            if inner is not None:
                metadata.append(Metadata(inner))
            else:
                metadata.extend(Metadata(_map_entries(m, ",")) for m in _top_groups(group))
            tokens.at = end
        else:
            raise _Unreadable(tokens.text)
    if ("device" in fields) != (fields.get("keyword") == "maximal") or ("keyword" in fields and "tiles" in fields):
        raise _Unreadable(tokens.text)
    return Sharding(metadata=tuple(metadata), **fields)  # type: ignore[arg-type]


def _top_groups(text: str) -> list[str]:
    """The ``{…}`` groups inside the braces of `text` (``{{…}, {…}}``)."""
    groups: list[str] = []
    i = text.index("{") + 1
    while (start := text.find("{", i)) >= 0:
        i = value_end(text, start)
        groups.append(text[start:i])
    return groups


def _sharding(text: str) -> Sharding | TupleSharding:
    """XLA's classic sharding (a mesh sharding, with named axes, is no form here and stays text)."""
    tokens = _Tokens(text)
    if tokens.take() != "{":
        raise _Unreadable(text)
    if tokens.peek() not in ("{", "}"):
        value: Sharding | TupleSharding = _single_sharding(tokens)
    else:
        elements: list[Sharding] = []
        while (token := tokens.take()) != "}":
            if token == "{":
                elements.append(_single_sharding(tokens))
            elif token != ",":
                raise _Unreadable(text)
        value = TupleSharding(tuple(elements))
    if tokens.take() != "":
        raise _Unreadable(text)
    return value


def _direction(text: str) -> ComparisonDirection:
    return ComparisonDirection(text.strip(_BLANKS).upper())  # XLA reads the direction in any case


_READERS: dict[Kind, Callable[[str], Typed]] = {
    Kind.INT: _int,
    Kind.BOOL: _bool,
    Kind.FLOAT: _float,
    Kind.STRING: _string,
    Kind.INT_LIST: _int_list,
    Kind.WINDOW: _window,
    Kind.CONVOLUTION_DIMENSION_NUMBERS: _convolution_dimension_numbers,
    Kind.PRECISION_LIST: _precision_list,
    Kind.COMPARISON_DIRECTION: _direction,
    Kind.COMPARISON_TYPE: ComparisonType,
    Kind.FFT_TYPE: FftType,
    Kind.DISTRIBUTION: RandomDistribution,
    Kind.FUSION_KIND: FusionKind,
    Kind.METADATA: _metadata,
    Kind.FRONTEND_ATTRIBUTES: _frontend_attributes,
    Kind.SHARDING: _sharding,
    Kind.PADDING: _padding,
    Kind.SLICE_RANGES: _slices,
    Kind.REPLICA_GROUPS: _replica_groups,
    Kind.ALIASING: _aliasing,
}
assert set(_READERS) == TYPED


def read_value(kind: Kind, text: str) -> Typed | str:
    """The typed value of `text` as an attribute of `kind`, printing as `text`; `text` itself when it is
    not in the reader's form (or `kind` is not typed)."""
    reader = _READERS.get(kind)
    if reader is None:
        return text
    try:
        value = reader(text)
    except (ValueError, IndexError, KeyError, BracketError):  # _Unreadable, a bad int, enum member or escape
        return text
    return value if isinstance(value, Enum) else read_from(value, text)  # an enum prints as XLA spells it


#: The typed attributes by name, where the name alone says the kind; `BY_OPCODE`'s names are read by opcode.
_TYPED_BY_NAME: dict[str, Kind] = {name: kind for name, kind in KINDS.items() if kind in TYPED}
_BY_OPCODE_NAMES = frozenset(name for _, name in BY_OPCODE)
_BY_NAME_ONLY = {name: kind for name, kind in _TYPED_BY_NAME.items() if name not in _BY_OPCODE_NAMES}


def read_attributes(module: Module) -> None:
    """Replace the text of every modelled header and instruction attribute in `module` by its typed value.

    Each distinct text of an attribute is read once per module; its instructions share the value."""
    header = module.attributes
    for key, value in header.items():
        if type(value) is str and key in MODULE_KINDS:
            header[key] = read_value(MODULE_KINDS[key], value)
    read: dict[str, dict[str, Typed | str]] = {name: {} for name in _BY_NAME_ONLY}
    for computation in module.computations:
        for instruction in computation.instructions:
            attributes = instruction.attributes
            for key, value in attributes.items():
                seen = read.get(key)
                if seen is None:
                    if key in _BY_OPCODE_NAMES and type(value) is str:
                        attributes[key] = read_value(kind_of(instruction.opcode, key), value)
                elif type(value) is str:
                    typed = seen.get(value)
                    if typed is None:
                        typed = seen[value] = read_value(_BY_NAME_ONLY[key], value)
                    attributes[key] = typed
