"""Which of the module formats users have a file holds, from its extension or its bytes.

Torch-neuronx and the Neuron compile cache give a bare HloModuleProto (``*.hlo_module.pb``),
XLA's ``--xla_dump_hlo_as_proto`` an HloProto wrapper (``*.hlo.pb``), jax's ``lower().as_text()``
StableHLO text, and ``jax.export`` MLIR bytecode. Telling them apart needs no jaxlib: the
extension when it says something, else the bytes (the MLIR bytecode magic, text that opens like
MLIR or HLO, or a protobuf whose top-level fields are those of the two HLO messages). The
conversions themselves go through jaxlib, in `hloopt.xla.formats`.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import PurePath
from typing import NamedTuple

from hloopt.errors import HloError
from hloopt.support.fileio import source_name


class Format(Enum):
    """A module format, named as the ``--output-format`` option spells it."""

    HLO = "hlo"
    #: A serialized HloModuleProto.
    PROTO = "pb"
    #: XLA's HloProto dump wrapper (field 1 is the HloModuleProto); read only.
    PROTO_WRAPPER = "hlo.pb"
    #: XLA's ``--xla_dump_hlo_snapshots`` file, an HloSnapshot: the module with the arguments it was run on and
    #: the result it gave; read only.
    SNAPSHOT = "snapshot.pb"
    STABLEHLO = "mlir"
    STABLEHLO_BYTECODE = "mlirbc"


#: What `-o` writes for each extension (``.hlo``, ``.txt``: HLO text).
OUTPUT_EXTENSIONS: dict[str, Format] = {
    ".hlo": Format.HLO,
    ".txt": Format.HLO,
    ".pb": Format.PROTO,
    ".mlir": Format.STABLEHLO,
}
#: Formats `--output-format` names.
OUTPUT_FORMATS: dict[str, Format] = {"hlo": Format.HLO, "pb": Format.PROTO, "mlir": Format.STABLEHLO}
#: The extension of a file hloopt names for the format it writes.
WRITTEN_EXTENSIONS: dict[Format, str] = {Format.HLO: ".hlo", Format.PROTO: ".pb", Format.STABLEHLO: ".mlir"}


def named_format(path: str) -> Format | None:
    """The format `path`'s extension says (``.mlirbc``: bytecode), or None."""
    suffix = PurePath(path).suffix
    return Format.STABLEHLO_BYTECODE if suffix == ".mlirbc" else OUTPUT_EXTENSIONS.get(suffix)


def named_for(path: str, fmt: Format) -> str:
    """`path`, a batch's output named after its input, with an extension that says `fmt`, the format
    written into it: kept when it says `fmt` (or says no format and `fmt` is HLO text), else the module
    extension replaced, or one added. Protobuf in a file named ``.hlo`` is a file hloopt cannot read back."""
    said = named_format(path)
    if said is fmt or (said is None and fmt is Format.HLO):
        return path
    return (path.removesuffix(PurePath(path).suffix) if said is not None else path) + WRITTEN_EXTENSIONS[fmt]


MLIR_BYTECODE_MAGIC = b"ML\xefR"
#: The opening of MLIR text, after blank and ``//`` comment lines: ``module @name``, ``module attributes``,
#: ``module {`` opening a ``func.func`` or closing at once, a bare ``func.func``, a ``#loc`` alias or the
#: generic ``"builtin.module"``. ``module {`` followed by instructions is HLO (a computation named module).
MLIR_START = re.compile(
    r'(?:\s|//[^\n]*)*(module\s*(?:@|attributes\b|\{\s*(?:func\.func\b|\}))|func\.func\b|#loc\d*\s*=|"builtin\.module")'
)
#: HloModuleProto fields always present in a module XLA serialized: name (1), entry name (2),
#: computations (3) and host_program_shape (4); an HloProto wrapper has hlo_module (1) and
#: buffer_assignment (3) only.
_MODULE_FIELDS = {1, 2, 3, 4}

#: How XLA names an HloSnapshot it dumps: ``module_0008.jit_f.snapshot.-1547826561.pb``.
SNAPSHOT_NAME = re.compile(r"\.snapshot\.-?\d+\.pb$")
#: HloSnapshot's fields: hlo (an HloProto), arguments, result, execution_platform.
_SNAPSHOT_FIELDS = {1, 2, 3, 4}

#: Magic numbers of files people pass by mistake, for the error.
_LOOKS_LIKE = {
    b"PK\x03\x04": "a ZIP archive",
    b"\x1f\x8b": "a gzip file",
    b"\x89PNG": "a PNG image",
    b"%PDF": "a PDF document",
    b"\x7fELF": "an ELF binary",
    b"\x93NUMPY": "a NumPy .npy array",
}


def detect(path: str, data: bytes) -> Format:
    """The format of `data`, read from `path` (``-`` for stdin); HloError naming what it looks like."""
    suffix = "".join(PurePath(path).suffixes[-2:]) if path != "-" else ""
    if data.startswith(MLIR_BYTECODE_MAGIC):
        return Format.STABLEHLO_BYTECODE
    if SNAPSHOT_NAME.search(PurePath(path).name):
        return Format.SNAPSHOT
    if suffix.endswith(".pb"):
        return _proto_format(path, data)
    text = _as_text(data)
    if text is not None:
        if MLIR_START.match(text):
            return Format.STABLEHLO
        return Format.HLO
    if suffix.endswith((".hlo", ".txt", ".mlir")):
        return Format.HLO  # reading it as text says where the bad bytes are
    return _proto_format(path, data)


_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1f]")


def _as_text(data: bytes) -> str | None:
    """`data` as UTF-8 text if it is text at all (no control bytes early on), else None."""
    if _BINARY.search(data, 0, 4096) or any(data.startswith(magic) for magic in _LOOKS_LIKE):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _proto_format(path: str, data: bytes) -> Format:
    fields = top_level_fields(data)
    if fields is not None and fields.keys() >= _MODULE_FIELDS:
        return Format.PROTO
    if fields is not None and 1 in fields and fields[1] == 2:
        inner = fields_of_first(data, 1)
        if inner is not None and inner.keys() >= _MODULE_FIELDS:
            return Format.PROTO_WRAPPER
        hlo = first_field(data, 1)
        module = None if hlo is None else fields_of_first(hlo, 1)
        if module is not None and module.keys() >= _MODULE_FIELDS and fields.keys() <= _SNAPSHOT_FIELDS:
            return Format.SNAPSHOT
    raise HloError(f"{source_name(path)}: not an HLO module: {_describe(data, fields)}")


def _describe(data: bytes, fields: dict[int, int] | None) -> str:
    for magic, what in _LOOKS_LIKE.items():
        if data.startswith(magic):
            return f"it looks like {what}"
    if not data:
        return "the file is empty"
    if fields is None:
        return (
            "it is neither HLO text, StableHLO (text or bytecode) nor a serialized HloModuleProto "
            "(a .pb that ends early is truncated)"
        )
    shown = ", ".join(str(number) for number in sorted(fields)[:8])
    return f"it is a protobuf message (fields {shown}) that is neither an HloModuleProto, XLA's HloProto dump nor an HloSnapshot"


def top_level_fields(data: bytes) -> dict[int, int] | None:
    """Field number → wire type of every top-level field of a protobuf message, or None if the
    bytes are not one (a truncated message is not one either)."""
    fields = wire_fields(data)
    return None if fields is None else {field.number: field.wire for field in reversed(fields)}


def fields_of_first(data: bytes, number: int) -> dict[int, int] | None:
    """The top-level fields of the first length-delimited field `number` of a message."""
    payload = first_field(data, number)
    return None if payload is None else top_level_fields(payload)


def first_field(data: bytes, number: int) -> bytes | None:
    """The bytes of the first length-delimited field `number` (the HloProto's hlo_module)."""
    for field in wire_fields(data) or ():
        if field.number == number and field.wire == 2:
            return data[field.start : field.end]
    return None


class WireField(NamedTuple):
    """One field of a protobuf message: its number, wire type, and where its value lies in the message
    (a length-delimited field's contents, after the length; a varint's or fixed value's own bytes)."""

    number: int
    wire: int
    start: int
    end: int


def wire_fields(data: bytes) -> list[WireField] | None:
    """Every top-level field of a protobuf message, in order; None if the bytes are not a whole message."""
    fields: list[WireField] = []
    position = 0
    while position < len(data):
        key = read_varint(data, position)
        if key is None or key[0] >> 3 == 0:
            return None
        (value, position), wire = key, key[0] & 7
        end = _skip(data, position, wire)
        if end is None:
            return None
        start = position
        if wire == 2:
            length = read_varint(data, position)
            assert length is not None  # _skip read it
            start = length[1]
        fields.append(WireField(value >> 3, wire, start, end))
        position = end
    return fields


def read_varint(data: bytes, position: int) -> tuple[int, int] | None:
    """The varint at `position` and where it ends, or None if the data ends first."""
    value = shift = 0
    while position < len(data) and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    return None


def _skip(data: bytes, position: int, wire: int) -> int | None:
    """Where the value of wire type `wire` at `position` ends, or None past the data."""
    end: int | None
    if wire == 0:
        varint = read_varint(data, position)
        end = None if varint is None else varint[1]
    elif wire == 1:
        end = position + 8
    elif wire == 5:
        end = position + 4
    elif wire == 2:
        length = read_varint(data, position)
        end = None if length is None else length[1] + length[0]
    else:
        end = None  # groups (3, 4) are not in these messages; 6 and 7 do not exist
    return end if end is not None and end <= len(data) else None
