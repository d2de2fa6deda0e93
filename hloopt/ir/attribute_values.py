"""Typed attribute values: what XLA's parser reads each modelled attribute into (``hlo_parser.cc``'s
``AttrTy`` kinds; which attribute has which kind is `attribute_kinds`).

Every value is frozen and compares by meaning. `to_text` is the value as XLA prints it; a value the
parser read keeps the text it was read from and prints that instead, so a module's own spelling
(blanks, comments, defaults spelled out) survives a round trip as it did when attributes were text,
and XLA's canonical print, which is that spelling, reads back byte for byte. A value made or changed
by a pass has no source text and prints as XLA would. An enum has one spelling: a direction written
in lower case (XLA reads any case) prints in upper case, as XLA prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from struct import pack, unpack
from typing import TypeVar

__all__ = [
    "Aliasing",
    "Bool",
    "ComparisonDirection",
    "ComparisonType",
    "ConvolutionDimensionNumbers",
    "DotDimensionNumbers",
    "FftType",
    "Float",
    "FrontendAttributes",
    "FusionKind",
    "Int",
    "IntList",
    "Iota",
    "Metadata",
    "PaddingConfig",
    "PaddingDimension",
    "Precision",
    "PrecisionList",
    "RandomDistribution",
    "ReplicaGroups",
    "Sharding",
    "SliceRanges",
    "String",
    "TupleSharding",
    "Typed",
    "Window",
    "WindowDimension",
    "dot_dimension_numbers",
    "integers",
    "is_true",
    "read_from",
]

_V = TypeVar("_V", bound="_Read")


@dataclass(frozen=True, slots=True)
class _Read:
    """A value that may remember the text the parser read it from (never compared, never copied by
    `dataclasses.replace`: a changed value prints as XLA would)."""

    _source: str | None = field(default=None, init=False, compare=False, repr=False)

    def to_text(self) -> str:
        return self._source if self._source is not None else self.canonical_text()

    def canonical_text(self) -> str:
        raise NotImplementedError


def read_from(value: _V, text: str) -> _V:
    """`value`, which the parser read from `text`, printing as `text`."""
    object.__setattr__(value, "_source", text)
    return value


class _Spelled(Enum):
    """An enum attribute: each member's value is its spelling in XLA's print."""

    def to_text(self) -> str:
        return self.value


class ComparisonDirection(_Spelled):
    """``direction=`` of compare (``ComparisonDirectionToString``)."""

    EQ = "EQ"
    NE = "NE"
    GE = "GE"
    GT = "GT"
    LE = "LE"
    LT = "LT"


class ComparisonType(_Spelled):
    """``type=`` of compare (``ComparisonTypeToString``)."""

    FLOAT = "FLOAT"
    TOTALORDER = "TOTALORDER"
    SIGNED = "SIGNED"
    UNSIGNED = "UNSIGNED"


class FftType(_Spelled):
    """``fft_type=`` of fft."""

    FFT = "FFT"
    IFFT = "IFFT"
    RFFT = "RFFT"
    IRFFT = "IRFFT"


class RandomDistribution(_Spelled):
    """``distribution=`` of rng."""

    UNIFORM = "rng_uniform"
    NORMAL = "rng_normal"


class FusionKind(_Spelled):
    """``kind=`` of fusion."""

    LOOP = "kLoop"
    INPUT = "kInput"
    OUTPUT = "kOutput"
    CUSTOM = "kCustom"


class Precision(_Spelled):
    """One operand's entry of ``operand_precision=`` (``PrecisionToString``, lower case)."""

    DEFAULT = "default"
    HIGH = "high"
    HIGHEST = "highest"


@dataclass(frozen=True, slots=True)
class Int(_Read):
    """A plain integer attribute (``index=0``, ``channel_id=3``)."""

    value: int

    def canonical_text(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class Bool(_Read):
    """A boolean attribute (``custom_call_has_side_effect=true``, the header's ``is_scheduled=true``); true in an
    ``if`` when it is true, so a reader never compares spellings."""

    value: bool

    def __bool__(self) -> bool:
        return self.value

    def canonical_text(self) -> str:
        return "true" if self.value else "false"


def is_true(value: object) -> bool:
    """Whether an attribute value (or None, for an absent one) is a true `Bool`; text never is."""
    return isinstance(value, Bool) and value.value


@dataclass(frozen=True, slots=True)
class Float(_Read):
    """A float attribute (``epsilon=0.001``), held as the f32 XLA keeps, printed as ``absl::StrCat`` prints a
    float (six significant digits, ``%g``)."""

    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", unpack("<f", pack("<f", self.value))[0])

    def canonical_text(self) -> str:
        return f"{self.value:g}"


@dataclass(frozen=True, slots=True)
class IntList(_Read):
    """A braced integer list (``dimensions={1,0}``)."""

    values: tuple[int, ...]

    def canonical_text(self) -> str:
        return "{" + ",".join(map(str, self.values)) + "}"


@dataclass(frozen=True, slots=True)
class PrecisionList(_Read):
    """``operand_precision={default,high}``: one precision per operand."""

    values: tuple[Precision, ...]

    def canonical_text(self) -> str:
        return "{" + ",".join(p.value for p in self.values) + "}"


@dataclass(frozen=True, slots=True)
class WindowDimension:
    """One dimension of a window (``WindowDimension`` in xla_data.proto)."""

    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    base_dilation: int = 1
    window_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True, slots=True)
class Window(_Read):
    """``window={size=3x3 stride=2x2 pad=0_1x0_1 …}``: printed as ``window_util::ToString`` prints it,
    each field other than ``size`` only when one of its entries is not the default."""

    dimensions: tuple[WindowDimension, ...]

    def canonical_text(self) -> str:
        dims = self.dimensions
        fields: list[str] = []
        if dims:
            fields.append("size=" + "x".join(str(d.size) for d in dims))
        for name, entries, default in (
            ("stride", [str(d.stride) for d in dims], "1"),
            ("pad", [f"{d.padding_low}_{d.padding_high}" for d in dims], "0_0"),
            ("lhs_dilate", [str(d.base_dilation) for d in dims], "1"),
            ("rhs_dilate", [str(d.window_dilation) for d in dims], "1"),
            ("rhs_reversal", ["1" if d.reversal else "0" for d in dims], "0"),
        ):
            if any(e != default for e in entries):
                fields.append(f"{name}={'x'.join(entries)}")
        return "{" + " ".join(fields) + "}"


@dataclass(frozen=True, slots=True)
class ConvolutionDimensionNumbers(_Read):
    """``dim_labels=b01f_01io->b01f``: which dimension of the input, kernel and output is which."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    #: The input's, kernel's and output's ranks where they have dimensions none of the above names
    #: (``b01f?``); 0 when the named ones are all.
    ranks: tuple[int, int, int] = (0, 0, 0)

    def canonical_text(self) -> str:
        """``ConvolutionDimensionNumbersToString``: each side's labels by dimension, ``?`` where none."""

        def labels(first: tuple[int, str], second: tuple[int, str], spatial: tuple[int, ...], rank: int) -> str:
            named = (first, second, *((d, str(i)) for i, d in enumerate(spatial)))
            marks = ["?"] * max(rank, 2 + len(spatial), *(d + 1 for d, _ in named))  # `?`: a dimension none names
            for dimension, mark in named:
                if dimension >= 0:
                    marks[dimension] = mark
            return "".join(marks)

        lhs_rank, rhs_rank, out_rank = self.ranks
        lhs = labels((self.input_batch, "b"), (self.input_feature, "f"), self.input_spatial, lhs_rank)
        rhs = labels((self.kernel_input_feature, "i"), (self.kernel_output_feature, "o"), self.kernel_spatial, rhs_rank)
        out = labels((self.output_batch, "b"), (self.output_feature, "f"), self.output_spatial, out_rank)
        return f"{lhs}_{rhs}->{out}"


@dataclass(frozen=True, slots=True)
class DotDimensionNumbers:
    """A dot's four dimension lists (written as four attributes: ``lhs_batch_dims={0}`` …)."""

    lhs_batch: tuple[int, ...] = ()
    lhs_contracting: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()
    rhs_contracting: tuple[int, ...] = ()


def integers(value: object) -> tuple[int, ...]:
    """The integers of an `IntList` or `Int` attribute value; () for none (an absent attribute)."""
    if isinstance(value, IntList):
        return value.values
    if isinstance(value, Int):
        return (value.value,)
    return ()


def dot_dimension_numbers(attributes: Mapping[str, object]) -> DotDimensionNumbers:
    """A dot's dimension numbers from its attributes (a list left out is empty, as XLA reads it)."""
    return DotDimensionNumbers(
        integers(attributes.get("lhs_batch_dims")),
        integers(attributes.get("lhs_contracting_dims")),
        integers(attributes.get("rhs_batch_dims")),
        integers(attributes.get("rhs_contracting_dims")),
    )


#: ``absl::CEscape``: what XLA escapes in a string it prints.
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _quoted(text: str) -> str:
    """`text` as an HLO string literal, escaped as ``CEscape`` escapes it."""
    return '"' + text.translate(_ESCAPES) + '"'


@dataclass(frozen=True, slots=True)
class String(_Read):
    """A string attribute (``custom_call_target="foo"``): its characters, unescaped."""

    value: str

    def canonical_text(self) -> str:
        return _quoted(self.value)


#: The order of ``OpMetadataToString``.
_METADATA_ORDER = (
    "op_type",
    "op_name",
    "source_file",
    "source_line",
    "source_end_line",
    "source_column",
    "source_end_column",
    "profile_type",
    "deduplicated_name",
    "scheduling_name",
    "metadata_payload",
)


@dataclass(frozen=True, slots=True)
class Metadata(_Read):
    """``metadata={op_type="…" op_name="…" source_line=3 …}``: the entries in their order, each value
    as written (a string with its quotes, an integer, a braced list); keys XLA adds later are kept."""

    entries: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        """The value text of `key`, or None."""
        return next((v for k, v in self.entries if k == key), None)

    def with_op_name_suffix(self, suffix: str) -> Metadata:
        """This metadata with `suffix` appended to ``op_name`` (made when missing), ``op_type`` and
        ``op_name`` first, as XLA prints them."""
        name, op_type = self.get("op_name"), self.get("op_type")
        entry = ("op_name", (name[:-1] if name is not None else '"') + _quoted(suffix)[1:])
        head = ((("op_type", op_type),) if op_type is not None else ()) + (entry,)
        return Metadata(head + tuple((k, v) for k, v in self.entries if k not in ("op_type", "op_name")))

    def canonical_text(self) -> str:
        """XLA's fields in XLA's order, an empty string or a zero left out as XLA leaves it out; the entries
        XLA's print does not show (``stack_frame_id``, keys newer than it) after them,
        so that no entry is lost."""
        rank = {key: i for i, key in enumerate(_METADATA_ORDER)}
        entries = sorted(self.entries, key=lambda entry: rank.get(entry[0], len(rank)))
        return "{" + " ".join(f"{k}={v}" for k, v in entries if v not in ('""', "0")) + "}"


@dataclass(frozen=True, slots=True)
class FrontendAttributes(_Read):
    """``frontend_attributes={key="value",…}``: a map, printed sorted by key as XLA keeps it; each value
    as written (a string with its quotes, or a JSON dict)."""

    entries: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(sorted(dict(self.entries).items())))

    def __contains__(self, key: str) -> bool:
        return any(k == key for k, _ in self.entries)

    def with_entry(self, key: str, value: str) -> FrontendAttributes:
        """These attributes plus ``key="value"``; an entry already there for `key` is kept."""
        if key in self:
            return self
        return FrontendAttributes((*self.entries, (key, _quoted(value))))

    def canonical_text(self) -> str:
        return "{" + ",".join(f"{k}={v}" for k, v in self.entries) + "}"


@dataclass(frozen=True, slots=True)
class PaddingDimension:
    """One dimension of a pad's ``padding=``: edge padding (either may be negative) and interior padding."""

    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True, slots=True)
class PaddingConfig(_Read):
    """``padding=0_0x1_2_1``: printed as ``PaddingConfigToString`` prints it, every dimension with its interior
    padding when one dimension has some, none without."""

    dimensions: tuple[PaddingDimension, ...]

    def canonical_text(self) -> str:
        interior = any(d.interior for d in self.dimensions)
        return "x".join(f"{d.low}_{d.high}_{d.interior}" if interior else f"{d.low}_{d.high}" for d in self.dimensions)


@dataclass(frozen=True, slots=True)
class SliceRanges(_Read):
    """``slice={[0:4], [2:8:2]}``: each dimension's start, limit and stride; every stride printed when one is
    not 1, none when all are (as XLA prints them)."""

    ranges: tuple[tuple[int, int, int], ...]

    def canonical_text(self) -> str:
        strided = any(c != 1 for _, _, c in self.ranges)
        parts = (f"[{a}:{b}:{c}]" if strided else f"[{a}:{b}]" for a, b, c in self.ranges)
        return "{" + ", ".join(parts) + "}"


def _braced(values: tuple[int, ...], open_: str = "[", close: str = "]") -> str:
    return open_ + ",".join(map(str, values)) + close


@dataclass(frozen=True, slots=True)
class Iota:
    """XLA's iota device list (``IotaTileAssignment``): the devices 0…n-1 laid out as `reshape`, transposed by
    `transpose` (none: the identity), read as `dimensions` (``[2,2]<=[2,2]T(1,0)``)."""

    dimensions: tuple[int, ...]
    reshape: tuple[int, ...]
    transpose: tuple[int, ...] = ()

    def to_text(self) -> str:
        perm = _braced(self.transpose, "T(", ")") if self.transpose else ""
        return f"{_braced(self.dimensions)}<={_braced(self.reshape)}{perm}"


@dataclass(frozen=True, slots=True)
class ReplicaGroups(_Read):
    """``replica_groups={{0,1},{2,3}}``, or the iota form ``replica_groups=[2,2]<=[4]`` (`iota` set, `groups`
    empty); printed in the form it has, as XLA's ``CollectiveDeviceList`` prints it."""

    groups: tuple[tuple[int, ...], ...] = ()
    iota: Iota | None = None

    def canonical_text(self) -> str:
        if self.iota is not None:
            return self.iota.to_text()
        return "{" + ",".join(_braced(group, "{", "}") for group in self.groups) + "}"


@dataclass(frozen=True, slots=True)
class Aliasing(_Read):
    """``output_to_operand_aliasing={{0}: (1, {})}``: each output index, the operand it shares its buffer with
    and the index within that operand."""

    pairs: tuple[tuple[tuple[int, ...], int, tuple[int, ...]], ...]

    def canonical_text(self) -> str:
        parts = (f"{_braced(out, '{', '}')}: ({operand}, {_braced(at, '{', '}')})" for out, operand, at in self.pairs)
        return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class Sharding(_Read):
    """One (not tuple) sharding, XLA's classic form: a `keyword` (``replicated``, ``manual``, ``unknown``,
    ``unreduced``, ``maximal`` with its `device`), or tiles (``devices=[2,2]`` with the explicit `devices` or an
    `iota`), with ``last_tile_dim_replicate``, ``last_tile_dims={manual, …}``, ``shard_as N``/``shard_like N``
    and metadata. Printed as ``HloSharding::ToString`` prints these fields; the normal forms XLA's constructors
    make (a partial tile's groups sorted, a size-1 replicated dimension dropped) are not applied, so a value a
    pass builds should be in that form already (XLA reads either into the same sharding)."""

    keyword: str | None = None
    device: int | None = None
    #: The tile assignment's dimensions (an `iota`'s own `dimensions` when there is one) and explicit devices.
    tiles: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    iota: Iota | None = None
    last_tile_dim_replicate: bool = False
    last_tile_dims: tuple[str, ...] = ()
    #: ``("shard_as", 1)`` or ``("shard_like", 2)``.
    shard_group: tuple[str, int] | None = None
    metadata: tuple[Metadata, ...] = ()

    def canonical_text(self) -> str:
        if self.keyword == "maximal":
            parts = [f"maximal device={self.device}"]
        elif self.keyword is not None:
            parts = [self.keyword]
        else:
            assignment = self.iota.to_text() if self.iota else _braced(self.tiles) + ",".join(map(str, self.devices))
            parts = ["devices=" + assignment]
            if self.last_tile_dim_replicate:
                parts.append("last_tile_dim_replicate")
            if self.last_tile_dims:
                parts.append("last_tile_dims={" + ", ".join(self.last_tile_dims) + "}")
        if self.shard_group is not None:
            parts.append(f"{self.shard_group[0]} {self.shard_group[1]}")
        if len(self.metadata) == 1:
            parts.append("metadata=" + self.metadata[0].canonical_text())
        elif self.metadata:
            parts.append("metadata={" + ", ".join(m.canonical_text() for m in self.metadata) + "}")
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class TupleSharding(_Read):
    """``sharding={{replicated}, {maximal device=0}}``: one sharding per leaf of a tuple (``{}`` for none)."""

    elements: tuple[Sharding, ...]

    def canonical_text(self) -> str:
        return "{" + ", ".join(e.canonical_text() for e in self.elements) + "}"


#: A typed attribute value (what the printer prints with ``to_text``).
Typed = (
    Int
    | Bool
    | Float
    | PaddingConfig
    | SliceRanges
    | ReplicaGroups
    | Aliasing
    | Sharding
    | TupleSharding
    | IntList
    | PrecisionList
    | Window
    | ConvolutionDimensionNumbers
    | Metadata
    | FrontendAttributes
    | ComparisonDirection
    | ComparisonType
    | FftType
    | RandomDistribution
    | FusionKind
    | String
)
