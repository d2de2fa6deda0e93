"""Module formats through jaxlib: HloModuleProto, XLA's HloProto dump, StableHLO text and bytecode.

The corpus test sends every valid shared-corpus module through ``.pb``: XLA's print of the input
must equal XLA's print after text → hloopt → .pb → hloopt → text, apart from the module fields a
proto has no room for (`PROTO_LOSSES`, named to the user when they are present).
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.errors import HloError
from hloopt.support.formats import Format, detect
from hloopt.xla import formats
from hloopt.xla.bridge import XlaCrash, canonical, isolated_map
from hloopt.xla.diagnostics import Diagnostic

MODULE = hlo(
    """
    HloModule m, replica_count=2
    ENTRY e {
      p = f32[4] parameter(0), metadata={op_name="x"}
      c = f32[4] constant({1, 2, 3, 4})
      ROOT a = f32[4] add(p, c), frontend_attributes={k="v"}
    }
    """
)


def _wrapped(module_proto: bytes) -> bytes:
    """An HloProto as XLA's --xla_dump_hlo_as_proto writes it: field 1 holds the module."""
    length, size = bytearray(), len(module_proto)
    while True:
        length.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            break
    return b"\x0a" + bytes(length) + module_proto


def test_proto_round_trip_keeps_metadata_and_names(tmp_path: Path) -> None:
    data = formats.dump(MODULE, Format.PROTO)
    assert isinstance(data, bytes) and detect("m.pb", data) is Format.PROTO
    path = tmp_path / "m.pb"
    path.write_bytes(data)
    loaded = formats.load(str(path))
    assert loaded.format is Format.PROTO
    assert 'metadata={op_name="x"}' in loaded.text and 'frontend_attributes={k="v"}' in loaded.text
    assert "replica_count" not in loaded.text  # the documented loss
    assert formats.losses(MODULE, Format.PROTO) == ["replica_count (HloModuleProto has no field for it)"]


def test_elided_constants_are_a_named_loss_in_both_formats() -> None:
    text = hlo("""
        HloModule elided
        ENTRY main {
          a = f32[1000,3]{1,0} constant({...})
          b = bf16[4]{0} constant({...})
          ROOT t = (f32[1000,3]{1,0}, bf16[4]{0}) tuple(a, b)
        }
    """)
    assert formats.elided_constant_bytes(text) == 12_008
    loss = "the values of constants printed as {...}, which it holds as XLA makes them up (12,008 bytes)"
    assert formats.losses(text, Format.PROTO) == [loss]
    assert formats.losses(text, Format.STABLEHLO)[-1] == loss
    assert formats.losses(text, Format.HLO) == []
    assert formats.elided_constant_bytes(MODULE) == 0


def test_the_dump_wrapper_is_unwrapped(tmp_path: Path) -> None:
    data = formats.dump(MODULE, Format.PROTO)
    assert isinstance(data, bytes)
    path = tmp_path / "module_0001.m.before_optimizations.hlo.pb"
    path.write_bytes(_wrapped(data))
    loaded = formats.load(str(path))
    assert loaded.format is Format.PROTO_WRAPPER
    assert canonical(loaded.text) == canonical(formats.proto_to_text(data))


def test_stablehlo_text_and_bytecode_from_jax(tmp_path: Path) -> None:
    lowered = jax.jit(lambda x: jnp.sin(x) * 2).lower(jnp.ones(3, jnp.float32))
    text_path = tmp_path / "f.txt"  # an extension that says nothing: read by content
    text_path.write_text(lowered.as_text())
    loaded = formats.load(str(text_path))
    assert loaded.format is Format.STABLEHLO
    module = parse(loaded.text)
    assert {i.opcode for i in module.entry.instructions} >= {"sine", "multiply"}
    exported = jax.export.export(jax.jit(lambda x: x + 1))(jax.ShapeDtypeStruct((2,), jnp.float32))
    bytecode = tmp_path / "f.mlirbc"
    bytecode.write_bytes(exported.mlir_module_serialized)
    assert formats.load(str(bytecode)).format is Format.STABLEHLO_BYTECODE


def test_stablehlo_out_reads_back(tmp_path: Path) -> None:
    text = formats.dump(MODULE, Format.STABLEHLO)
    assert isinstance(text, str) and text.lstrip().startswith(("module", "#loc"))
    path = tmp_path / "m.mlir"
    path.write_text(text)
    assert "add" in formats.load(str(path)).text


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("m.pb", b"\x0a\x05abc", "not an HLO module: it is neither"),
        ("m.pb", b"\x08\x01\x10\x02", "a protobuf message (fields 1, 2) that is neither"),
        ("m.bin", b"PK\x03\x04rest", "it looks like a ZIP archive"),
        (
            "m.mlir",
            b'module @m {\n  func.func @main() {\n    "x.y"() : () -> ()\n  }\n}\n',
            "m.mlir:3:10: operation being parsed with an unregistered dialect",
        ),
    ],
    ids=["truncated", "another message", "a zip", "an unknown dialect"],
)
def test_a_file_that_is_no_module_is_one_clear_error(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(HloError, match=re.escape(message)):
        formats.load(str(path))


@pytest.mark.parametrize(
    ("diagnostic", "expected"),
    [
        (
            "UNKNOWN: -:3:31: error: use of undeclared SSA value name\n<unknown>:0: error: Failed to parse using"
            " StableHLO v1.17.0, this could indicate forward incompatibility\n",
            Diagnostic("-", 3, 31, None, "use of undeclared SSA value name"),
        ),
        (
            "-:0:0: error: attempting to parse 120 bytes when only 6 remain\n"
            "-:0:0: note: in bytecode version 6 produced by: MLIR24.0.0git\n",
            Diagnostic("-", 0, 0, None, "attempting to parse 120 bytes when only 6 remain"),
        ),
        (
            "<unknown>:0: error: Failed to parse using StableHLO v1.22.0\n",
            Diagnostic("<unknown>", 0, 0, None, "Failed to parse using StableHLO v1.22.0"),
        ),
        (
            "Unable to parse module assembly:\nerror: \"c\": 'stablehlo.add' op requires the same shape for all"
            ' operands and results\n note: "c": in bytecode version 6 produced by: MLIR23.0.0git',
            Diagnostic("", 0, 0, "c", "'stablehlo.add' op requires the same shape for all operands and results"),
        ),
        ("INTERNAL: no diagnostic here", None),
    ],
    ids=["error then the generic line", "error then a note", "only the generic line", "named by the verifier", "none"],
)
def test_the_first_meaningful_mlir_error_is_kept(diagnostic: str, expected: Diagnostic | None) -> None:
    assert formats.mlir_diagnostic(RuntimeError(diagnostic)) == expected


def test_truncated_proto_of_a_real_module(tmp_path: Path) -> None:
    data = formats.dump(MODULE, Format.PROTO)
    assert isinstance(data, bytes)
    path = tmp_path / "m.pb"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(HloError, match=r"not an HLO module|not a readable HloModuleProto"):
        formats.load(str(path))


def _unreadable_proto() -> bytes:
    """A real module's proto with an opcode XLA does not know: every field in place, XLA refuses it."""
    data = formats.dump(MODULE, Format.PROTO)
    assert isinstance(data, bytes) and data.count(b"\x12\x03add") == 1
    return data.replace(b"\x12\x03add", b"\x12\x03adx")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_unreadable_proto, "<stdin>: not a readable HloModuleProto: Unknown opcode: adx"),
        (lambda: b"\x08\x01\x10\x02", "<stdin>: not an HLO module: it is a protobuf message (fields 1, 2)"),
    ],
    ids=["XLA refuses the proto", "not a module"],
)
def test_a_binary_module_on_stdin_is_called_stdin(
    monkeypatch: pytest.MonkeyPatch, data: Callable[[], bytes], message: str
) -> None:
    """Errors name stdin ``<stdin>``, as for text, whichever reader refuses it (never ``-:``)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data())))
    with pytest.raises(HloError) as caught:
        formats.load("-")
    assert str(caught.value).startswith(message)


def test_output_format_by_extension_and_override() -> None:
    assert formats.output_format("out.pb") is Format.PROTO
    assert formats.output_format("out.mlir") is Format.STABLEHLO
    assert formats.output_format("out.hlo") is Format.HLO
    assert formats.output_format("out.unknown") is Format.HLO
    assert formats.output_format("out.hlo", "pb") is Format.PROTO
    with pytest.raises(HloError, match="unknown output format 'json'"):
        formats.output_format("out.hlo", "json")


#: Modules whose bits XLA's own printer changes on the way out of the proto, each with why.
XLA_PRINT_LOSSES = {
    # The f8e8m0fnu constant 2^-127: XLA prints it 5.9e-39, which reads back as 2^-126.
    "block_scaling_rewriter_cudnn_test__3.hlo",
}


#: Modules whose elided constants XLA would fill with more made-up bytes than this are left out.
MADE_UP_LIMIT = 64 << 20


@pytest.mark.corpus
def test_every_corpus_module_round_trips_through_proto(corpus_dir: Path) -> None:
    """Every fourth module by default (about five XLA calls each); HLOOPT_CORPUS_FULL=1 runs all 8,058."""
    paths = sorted((corpus_dir / "xla").glob("*.hlo"))
    assert len(paths) == 8058
    chosen = paths if os.environ.get("HLOOPT_CORPUS_FULL") == "1" else paths[::4]
    # XLA makes up 805 MB of values for each of the 7 host-offload modules' `{...}` constants; a proto
    # holds them, and the route keeps several copies alive at once (CI's machine ran out of memory).
    huge = [p for p in chosen if formats.elided_constant_bytes(p.read_text()) > MADE_UP_LIMIT]
    chosen = [p for p in chosen if p not in huge]
    results = isolated_map(formats.through_proto, [(p.read_text(), p.name) for p in chosen], timeout=600)
    xla_alone = [r for r in results if isinstance(r, str) and r.startswith("XLA: ")]
    # A module whose route crashes XLA counts apart when XLA alone crashes on it as well.
    crashed = [(p, r) for p, r in zip(chosen, results) if isinstance(r, XlaCrash)]
    alone = isolated_map(formats.xla_alone_through_proto, [(p.read_text(),) for p, _ in crashed], timeout=600)
    xla_alone += [r for (_, r), again in zip(crashed, alone) if isinstance(again, XlaCrash)]
    failures = [
        str(r) for r in results if r is not None and r not in xla_alone and str(r).split(":")[0] not in XLA_PRINT_LOSSES
    ]
    assert not failures, f"{len(failures)} of {len(chosen)}:\n" + "\n".join(failures[:20])
    print(
        f"\n{len(chosen)} modules through .pb: {len(xla_alone)} that XLA alone cannot send through its proto;"
        f" {len(huge)} left out, XLA would make up over {MADE_UP_LIMIT >> 20} MiB of constants for each"
    )
