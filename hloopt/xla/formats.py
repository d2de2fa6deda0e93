"""Module formats in and out, converted by jaxlib (the real XLA), never by hand.

`load` turns any supported file into HLO text, which hloopt parses; `dump` turns hloopt's
text into the format an output path asks for. What a conversion cannot carry is named
(`losses`), so the CLI can say so on stderr; docs/decisions.md lists every loss. The calls are
the ones `../shared/docs/jaxlib-formats-and-versions.md` checked on jaxlib 0.10 to 0.12.

Every conversion runs in a crash-isolating XLA worker (`hloopt.xla.bridge.isolated_call`, in place
when the caller is a worker already): a malformed proto or bytecode file aborts, segfaults or spins
in jaxlib, and text hloopt accepts can abort XLA's serialiser. That costs only the call, as an
`XlaCrash` said of the file, and XLA's log stays in the worker.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from hloopt.errors import HloError, HloParseError, parse_error_at
from hloopt.ir.element_types import BY_NAME
from hloopt.support.fileio import decode_text, read_bytes, source_name
from hloopt.support.formats import (
    MLIR_BYTECODE_MAGIC,
    OUTPUT_EXTENSIONS,
    OUTPUT_FORMATS,
    Format,
    detect,
    first_field,
)
from hloopt.xla.diagnostics import Diagnostic, mlir_errors
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit

if TYPE_CHECKING:
    from hloopt.arrays.snapshots import Snapshot
    from hloopt.xla.bridge import IsolatedPool

#: Module attributes an HloModuleProto has no field for: they are lost going through `.pb`.
PROTO_LOSSES = (
    "replica_count",
    "num_partitions",
    "alias_passthrough_params",
    "allow_spmd_sharding_propagation_to_parameters",
    "allow_spmd_sharding_propagation_to_output",
)
#: What the StableHLO route changes, whatever the module: one phrase, read after "this format does not keep".
STABLEHLO_LOSS = (
    "instruction and computation names, instruction layouts or instruction order (XLA renames them and turns"
    " while bodies into regions, layouts other than the entry computation's fall back to the default,"
    " instructions follow their operands, and op_name metadata is added where there was none)"
)


@dataclass(frozen=True)
class Loaded:
    """A module file read as HLO text, with the format it was in; from an HloSnapshot, also the arguments
    it ran on and the result it gave."""

    text: str
    format: Format
    snapshot: Snapshot | None = None


def load(path: str, *, timeout: float | None = DEFAULT_TIMEOUT, pool: IsolatedPool | None = None) -> Loaded:
    """The HLO text of the module in `path` (``-`` is stdin), whatever its format; a proto or StableHLO
    is converted in an XLA worker (of `pool`, else one started for the call) within `timeout` seconds."""
    data = read_bytes(path)
    fmt = detect(path, data)
    name = source_name(path)  # what every error of this file says it is about
    if fmt is Format.HLO:
        return Loaded(decode_text(data, name), fmt)
    if fmt is Format.SNAPSHOT:  # the values are read here (numpy), the module by jaxlib in a worker
        from hloopt.arrays.snapshots import read_snapshot

        snapshot = read_snapshot(data, name)
        return Loaded(proto_to_text(snapshot.module, name, timeout=timeout, pool=pool), fmt, snapshot)
    if fmt is Format.PROTO_WRAPPER:
        inner = first_field(data, 1)
        assert inner is not None  # detect() found it
        data = inner
    if fmt in (Format.PROTO, Format.PROTO_WRAPPER):
        return Loaded(proto_to_text(data, name, timeout=timeout, pool=pool), fmt)
    return Loaded(stablehlo_to_text(data, name, timeout=timeout, pool=pool), fmt)


def print_options() -> Any:
    """XLA's print options with every constant in full (else those over 10 elements print as {...})."""
    import jaxlib._hlo as hlo

    options = hlo.HloPrintOptions()
    options.print_large_constants = True
    return options


def proto_to_text(
    data: bytes,
    path: str = "<bytes>",
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    pool: IsolatedPool | None = None,
) -> str:
    """XLA's print of a serialized HloModuleProto (metadata, names and constants intact), read in a worker."""
    from hloopt.xla.bridge import isolated_call

    printed = isolated_call(_proto_printed, data, path, timeout=limit(timeout), label=path, pool=pool, jax=False)
    return _callees_first(printed, path)


def _proto_printed(data: bytes, path: str) -> str:
    """`proto_to_text` in the worker: jaxlib reads and prints the proto."""
    import jaxlib._hlo as hlo

    from hloopt.xla.bridge import _stage

    with _stage("parse", "while reading the HloModuleProto"):
        try:
            module = hlo.HloModule.from_serialized_hlo_module_proto(data)
        except Exception as err:
            raise HloError(f"{path}: not a readable HloModuleProto: {_first_line(err)}") from None
        return _printed(module, path)


def _printed(module: Any, path: str) -> str:
    """XLA's print of `module` as text. A config XLA prints raw (``backend_config={…}``, a JSON-like one)
    may hold bytes that are not UTF-8 (a proto's config is bytes): that config is written as a quoted
    string instead, its bytes C-escaped (``\\377``), which XLA's parser reads back as the same bytes."""
    try:
        return str(module.to_string(print_options()))
    except UnicodeDecodeError as err:
        data = err.object if isinstance(err.object, bytes) else bytes(err.object)
    return _escape_raw_configs(data, path)


#: A config XLA printed raw, as its printer writes it: from ``backend_config={`` to the ``}`` that balances it.
_RAW_CONFIG = b", backend_config={"


def _escape_raw_configs(data: bytes, path: str) -> str:
    """`data`, XLA's print with bytes that are not UTF-8, decoded; those bytes must be in raw configs."""
    pieces: list[bytes] = []
    done = 0
    while True:
        try:
            text = data[done:].decode("utf-8")
        except UnicodeDecodeError as err:
            bad = done + err.start
        else:
            return b"".join(pieces).decode("utf-8") + text
        config = _enclosing_raw_config(data, bad)
        if config is None:
            line = data.count(b"\n", 0, bad) + 1
            raise HloError(
                f"{path}: XLA prints byte 0x{data[bad]:02x} (not UTF-8) on line {line} of this module, outside a config"
            )
        start, end = config
        pieces.append(data[done:start])
        pieces.append(b'"' + _c_escaped(data[start:end]) + b'"')
        done = end


def _enclosing_raw_config(data: bytes, offset: int) -> tuple[int, int] | None:
    """The span ``{…}`` of the raw config that holds `offset`, or None."""
    opening = data.rfind(_RAW_CONFIG, 0, offset)
    while opening >= 0:
        start = opening + len(_RAW_CONFIG) - 1
        end = _balanced_end(data, start)
        if end is not None and offset < end:
            return start, end
        opening = data.rfind(_RAW_CONFIG, 0, opening)
    return None


def _balanced_end(data: bytes, start: int) -> int | None:
    """Where the ``{`` at `start` is closed (just past its ``}``), strings skipped as XLA's lexer skips them."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(data)):
        byte = data[index]
        if in_string:
            if escaped:
                escaped = False
            elif byte == ord("\\"):
                escaped = True
            elif byte == ord('"'):
                in_string = False
        elif byte == ord('"'):
            in_string = True
        elif byte == ord("{"):
            depth += 1
        elif byte == ord("}"):
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _c_escaped(raw: bytes) -> bytes:
    """`raw` as a C string's contents, as absl's CEscape writes them (what XLA's lexer unescapes)."""
    named = {
        ord("\n"): b"\\n",
        ord("\r"): b"\\r",
        ord("\t"): b"\\t",
        ord('"'): b'\\"',
        ord("'"): b"\\'",
        ord("\\"): b"\\\\",
    }
    return b"".join(named.get(byte) or (bytes((byte,)) if 0x20 <= byte < 0x7F else b"\\%03o" % byte) for byte in raw)


def _callees_first(text: str, path: str) -> str:
    """XLA prints a proto's computations in the proto's order, which may call one before it is
    defined; its own parser (and hloopt's) refuses that text, so put callees first.

    The text is XLA's, which the user never sees: an error in it is said of its instruction (or the
    module's header, or a computation's signature), not of a line and column of that text."""
    from hloopt.text.parser import parse

    try:
        return parse(text, path, callees_first=True).to_text()
    except HloParseError as err:
        raise HloError(f"{path}: {_place_in_print(text, err.location.line)}: {err.message}") from None


#: An instruction's line in XLA's print: its name.
_INSTRUCTION_LINE = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
#: A computation's signature line in XLA's print: its name.
_COMPUTATION_LINE = re.compile(r"(?:ENTRY\s+)?%?([\w.\-]+)\s*[({]")


def _place_in_print(text: str, number: int) -> str:
    """What line `number` of XLA's print of a module is: an instruction (with its computation), a
    computation's signature or the module's header."""
    lines = text.splitlines()
    line = lines[number - 1] if 0 < number <= len(lines) else ""
    if line.startswith("HloModule"):
        return "in the module's header"
    computation = next(
        (found[1] for above in reversed(lines[: number - 1]) if (found := _COMPUTATION_LINE.match(above))), None
    )
    instruction = _INSTRUCTION_LINE.match(line) if line.startswith((" ", "\t")) else None
    if instruction is None:
        own = _COMPUTATION_LINE.match(line)
        return f"in the signature of computation %{own[1]}" if own else f"on line {number} of XLA's print of it"
    where = f" in computation %{computation}" if computation else ""
    return f"in instruction %{instruction[1]}{where}"


def stablehlo_to_text(
    data: bytes,
    path: str = "<bytes>",
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    pool: IsolatedPool | None = None,
) -> str:
    """HLO text of a StableHLO module (text, bytecode or a jax.export artifact), converted in a worker.

    MLIR's refusal names its own buffer (``-:3:31: error: …``): it is located in `path` as an HLO
    error is, with the line and a caret, when `data` is text; bytecode has no lines to point at.
    """
    from hloopt.xla.bridge import isolated_call

    printed = isolated_call(_stablehlo_printed, data, path, timeout=limit(timeout), label=path, pool=pool)
    return _callees_first(printed, path)


def _stablehlo_printed(data: bytes, path: str) -> str:
    """`stablehlo_to_text` in the worker: jaxlib converts StableHLO to HLO and prints it."""
    from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]

    from hloopt.xla.bridge import _stage

    with _stage("convert", "while converting StableHLO to HLO"):
        try:
            computation = _jax.mlir.mlir_module_to_xla_computation(data, use_tuple_args=False, return_tuple=False)
        except Exception as err:
            raise _stablehlo_error(err, data, path) from None
        return _printed(computation.as_hlo_module(), path)


_REFUSED = "StableHLO that XLA cannot convert to HLO"


def mlir_diagnostic(err: Exception) -> Diagnostic | None:
    """The first meaningful error of an MLIR diagnostic (`mlir_errors`); None if it has none."""
    errors = mlir_errors(str(err))
    return errors[0] if errors else None


def _stablehlo_error(err: Exception, data: bytes, path: str) -> HloError:
    """The error for StableHLO XLA refused: ``FILE:LINE:COL: message`` with the line and a caret for
    text, ``FILE: message`` for bytecode or where MLIR points at no line of the file."""
    diagnostic = mlir_diagnostic(err)
    if diagnostic is None:
        return HloError(f"{path}: {_REFUSED}: {_first_line(err)}")
    message = diagnostic.message
    if data.startswith(MLIR_BYTECODE_MAGIC) or b"\0" in data:
        return HloError(f"{path}: StableHLO bytecode that XLA cannot read: {message}")
    lines = data.split(b"\n")
    if diagnostic.buffer != "-" or not 0 < diagnostic.line <= len(lines):
        where = f" (at {diagnostic.buffer}:{diagnostic.line}:{diagnostic.column})" if diagnostic.line else ""
        return HloError(f"{path}: {_REFUSED}: {message}{where}")
    # MLIR counts columns in bytes from 1; the error counts characters.
    line = lines[diagnostic.line - 1]
    start = sum(len(text) + 1 for text in lines[: diagnostic.line - 1])
    offset = start + min(max(diagnostic.column - 1, 0), len(line))
    text = data.decode("utf-8", errors="replace")
    return parse_error_at(text, len(data[:offset].decode("utf-8", errors="replace")), path, message)


def _first_line(err: Exception) -> str:
    """An error of jaxlib's in one line: MLIR's first meaningful error, else the first line, status code off."""
    diagnostic = mlir_diagnostic(err)
    if diagnostic is not None:
        return diagnostic.message
    text = str(err).strip() or type(err).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    return re.sub(r"^(INVALID_ARGUMENT|INTERNAL|UNKNOWN): ", "", lines[0]) if lines else text


def output_format(path: str, override: str | None = None) -> Format:
    """What `-o path` writes: `override` (``hlo``, ``pb``, ``mlir``) or the extension; HLO text otherwise."""
    if override is not None:
        try:
            return OUTPUT_FORMATS[override]
        except KeyError:
            raise HloError(f"unknown output format {override!r}; choose one of {', '.join(OUTPUT_FORMATS)}") from None
    return OUTPUT_EXTENSIONS.get(PurePath(path).suffix, Format.HLO)


def dump(
    text: str,
    fmt: Format,
    name: str = "<module>",
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    pool: IsolatedPool | None = None,
) -> str | bytes:
    """`text` (HLO text hloopt printed, of the module `name`) in format `fmt`, converted by jaxlib in a
    worker: text XLA's parser or serialiser dies on is an `XlaCrash` said of `name`, and nothing is written."""
    if fmt is Format.HLO:
        return text
    if fmt not in (Format.PROTO, Format.STABLEHLO):
        raise HloError(f"hloopt does not write {fmt.value} files")
    from hloopt.xla.bridge import isolated_call

    converted: str | bytes = isolated_call(
        _converted, text, fmt, name, timeout=limit(timeout), label=name, pool=pool, jax=fmt is Format.STABLEHLO
    )
    return converted


def _converted(text: str, fmt: Format, name: str) -> str | bytes:
    """`dump` in the worker: XLA parses the text, serialises it and, for StableHLO, converts it."""
    import jaxlib._hlo as hlo

    from hloopt.xla.bridge import _stage

    with _stage("parse", f"while reading the module to write it as {fmt.value}"):
        try:
            proto = hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
        except Exception as err:
            raise HloError(
                f"{name}: XLA cannot read the module to write it as {fmt.value}: {_first_line(err)}"
            ) from None
    if fmt is Format.PROTO:
        return bytes(proto)
    from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]

    with _stage("convert", "while converting the module to StableHLO"):
        try:
            return str(_jax.mlir.xla_computation_to_mlir_module(hlo.XlaComputation(proto)))
        except Exception as err:
            raise HloError(f"{name}: XLA cannot convert the module to StableHLO: {_first_line(err)}") from None


def losses(text: str, fmt: Format) -> list[str]:
    """What writing `text` in `fmt` does not keep, for a warning on stderr (empty: nothing): each a phrase
    that reads after "this format does not keep"."""
    if fmt is Format.HLO:
        return []
    lost: list[str] = [] if fmt is Format.PROTO else [STABLEHLO_LOSS]
    if fmt is Format.PROTO:
        header = text[: text.find("\n")] if "\n" in text else text
        lost += [f"{name} (HloModuleProto has no field for it)" for name in PROTO_LOSSES if f"{name}=" in header]
        if _UNSET_CHANNEL.search(text):
            lost.append("channel_id=0 (a proto reads 0 as no channel)")
    elided = elided_constant_bytes(text)
    if elided:
        lost.append(
            f"the values of constants printed as {{...}}, which it holds as XLA makes them up ({elided:,} bytes)"
        )
    return lost


def elided_constant_bytes(text: str) -> int:
    """How many bytes of made-up values XLA's parser gives the ``constant({...})``s of `text`."""
    total = 0
    for element_type, dims in _ELIDED_CONSTANT.findall(text):
        info = BY_NAME.get(element_type)
        total += math.prod(int(d) for d in dims.split(",") if d) * (info.bits if info else 0) // 8
    return total


#: An array constant printed without its values: its element type and dimensions.
_ELIDED_CONSTANT = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\][^ ]*\s+constant\(\{\.\.\.\}\)")


#: A proto stores "no channel" as channel_id 0, so an explicit channel_id=0 does not come back.
_UNSET_CHANNEL = re.compile(r", channel_id=0(?![0-9])")
_HEADER_LOSS = re.compile(rf", (?:{'|'.join(PROTO_LOSSES)})=(?:\{{[^}}]*\}}|[^,\n]*)")


def through_proto(text: str, name: str = "<string>") -> str | None:
    """None when a module survives text → hloopt → .pb → hloopt → text as XLA prints it (the
    fields a proto cannot hold aside), else what went wrong; run it in a worker, XLA can crash.

    A module XLA itself cannot send through its own proto (it cannot read some send/recv protos
    back, and prints some modules differently) is reported with the prefix ``XLA:``: hloopt adds
    nothing to that loss, and the corpus test counts those apart.
    """
    from hloopt.text.parser import parse
    from hloopt.xla.bridge import canonical

    try:
        expected = _without_proto_losses(canonical(text))
    except HloError as err:
        return f"XLA: {name}: {err}"
    try:
        data = dump(parse(text, name).to_text(), Format.PROTO, name)
        assert isinstance(data, bytes)
        back: str | None = canonical(parse(proto_to_text(data, name), name).to_text())
        problem = None if back == expected else "XLA prints it differently after .pb"
    except HloError as err:
        problem = str(err).removeprefix(f"{name}: ")
    if problem is None:
        return None
    return f"XLA: {name}: {problem}" if xla_alone_through_proto(text) != expected else f"{name}: {problem}"


def _without_proto_losses(printed: str) -> str:
    header, _, body = printed.partition("\n")
    return f"{_HEADER_LOSS.sub('', header)}\n{_UNSET_CHANNEL.sub('', body)}"


def xla_alone_through_proto(text: str) -> str | None:
    """XLA's print after XLA alone sends `text` through a proto and back (None if it cannot)."""
    import jaxlib._hlo as hlo

    from hloopt.xla.bridge import canonical

    try:
        data = hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
        printed = hlo.HloModule.from_serialized_hlo_module_proto(data).to_string(print_options())
        return _without_proto_losses(canonical(str(printed)))
    except Exception:
        return None
