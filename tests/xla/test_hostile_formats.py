"""Module files that crash or hang jaxlib cost only the XLA call that reads or writes them (issue 28).

Reading a .pb or .mlirbc and writing a .pb or .mlir run jaxlib in a worker: a file that kills it, or
keeps it busy forever, is one ``hloopt: error: FILE: …`` line and exit 2, with XLA's own log kept out
of the terminal. The inputs are real: protos made by jaxlib and then given a tuple index jaxlib's
reader does not check, and ``data/forever.mlirbc``, the StableHLO bytecode jaxlib 0.10.2 writes for
`numerics_modules.FOREVER` in s32 (a ``while`` whose condition is always true, 638 bytes), with one byte changed at offsets
found by flipping every byte: some spin in jaxlib's reader, some crash it, on jaxlib 0.10 and 0.12.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import xla_workers
from conftest import sampled
from hlo_text import hlo
from xla_workers import on_worker_path

from hloopt.driver.chunks import Chunk, Place, split
from hloopt.errors import HloError
from hloopt.roundtrip import check_roundtrip
from hloopt.support.formats import Format
from hloopt.text.parser import parse
from hloopt.xla import formats
from hloopt.xla.bridge import XlaCrash, isolated_map

DATA = Path(__file__).parent / "data"

TUPLE = hlo(
    """
    HloModule t
    ENTRY e {
      a = f32[2] parameter(0)
      b = s32[] parameter(1)
      t = (f32[2], s32[]) tuple(a, b)
      ROOT g = s32[] get-tuple-element(t), index=1
    }
    """
)
#: Text hloopt accepts on which XLA's own parser aborts, so it cannot be written as .pb or .mlir.
UNWRITABLE = {
    "parameter(1) without parameter(0)": hlo(
        """
        HloModule m
        ENTRY e {
          p = f32[2] parameter(1)
          ROOT n = f32[2] negate(p)
        }
        """
    ),
    "token[4]": hlo(
        """
        HloModule m
        ENTRY e {
          p = token[4] parameter(0)
          ROOT n = token[4] after-all(p)
        }
        """
    ),
}


def with_tuple_index(index: int) -> bytes:
    """`TUPLE` as an HloModuleProto whose get-tuple-element reads element `index` of a two-element
    tuple; jaxlib's proto reader does not check it (2 dies with SIGSEGV, 3 never returns)."""
    data = formats.dump(TUPLE, Format.PROTO, "t.hlo")
    assert isinstance(data, bytes)
    at = data.index(b"h\x01", data.index(b"get-tuple-element"))  # field 13, tuple_index, as the varint 1
    return data[:at] + b"h" + bytes([index]) + data[at + 2 :]


def flipped(offset: int, value: int) -> bytes:
    data = (DATA / "forever.mlirbc").read_bytes()
    return data[:offset] + bytes([value]) + data[offset + 1 :]


#: One changed byte of forever.mlirbc: (offset, new value) → what jaxlib's reader does with it.
BYTECODE_MUTANTS = {(205, 0x00): "spins", (297, 0x00): "spins", (44, 0x00): "SIGABRT", (204, 0x82): "SIGSEGV"}


def hloopt(*args: object) -> subprocess.CompletedProcess[str]:
    """``hloopt ARGS`` as a user runs it: its own process, whose stderr is the terminal's."""
    return subprocess.run(
        [sys.executable, "-m", "hloopt", *map(str, args)], check=False, capture_output=True, text=True, timeout=300
    )


def assert_one_error(result: subprocess.CompletedProcess[str], path: Path, *said: str) -> None:
    """Exit 2 and exactly one line on stderr, hloopt's, naming `path` and saying each of `said`: none of XLA's
    log (its stack trace, "All log messages before absl::InitializeLog()…") beyond the cause the error quotes."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"hloopt: error: {path}: "), lines[0]
    for words in said:
        assert words in lines[0], lines[0]


# --- reading ------------------------------------------------------------------------------------


def test_a_proto_that_kills_jaxlib_is_an_error_of_its_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.pb"
    path.write_bytes(with_tuple_index(2))
    with pytest.raises(XlaCrash) as caught:
        formats.load(str(path))
    assert str(caught.value) == (f"{path}: XLA parse failed: worker died with SIGSEGV while reading the HloModuleProto")


@pytest.mark.slow
def test_a_proto_that_jaxlib_never_finishes_reading_is_stopped_by_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "spins.pb"
    path.write_bytes(with_tuple_index(3))
    start = time.monotonic()
    with pytest.raises(XlaCrash, match=r"timed out after 2 s, killed while reading the HloModuleProto"):
        formats.load(str(path), timeout=2)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize(("mutant", "fate"), sampled(BYTECODE_MUTANTS.items(), 2, unpack=True), ids=str)
def test_bytecode_with_a_changed_byte_is_an_error_however_jaxlib_fails(
    tmp_path: Path, mutant: tuple[int, int], fate: str
) -> None:
    path = tmp_path / "m.mlirbc"
    path.write_bytes(flipped(*mutant))
    with pytest.raises(XlaCrash) as caught:
        formats.load(str(path), timeout=3)
    said = "worker timed out after 3 s, killed" if fate == "spins" else f"worker died with {fate}"
    assert str(caught.value) == f"{path}: XLA convert failed: {said} while converting StableHLO to HLO"


def test_the_bytecode_itself_reads_as_the_module() -> None:
    """The mutants' source is the module it says it is, so their failures are the changed byte's."""
    loaded = formats.load(str(DATA / "forever.mlirbc"))
    assert loaded.format is Format.STABLEHLO_BYTECODE
    assert "while(" in loaded.text and "pred[] constant(true)" in loaded.text


@pytest.mark.parametrize("command", sampled(["run", "exec", "compare"], 3))
def test_every_command_reading_a_killer_proto_prints_one_line_and_exits_2(tmp_path: Path, command: str) -> None:
    path = tmp_path / "bad.pb"
    path.write_bytes(with_tuple_index(2))
    args = [path, path] if command == "compare" else [path]
    assert_one_error(hloopt(command, *args), path, "worker died with SIGSEGV while reading the HloModuleProto")


def test_a_proto_xla_refuses_is_one_line_without_xla_s_log(tmp_path: Path) -> None:
    """jaxlib logs about 45 lines (its RET_CHECK and a stack trace) before it raises: they stay in the worker."""
    data = formats.dump(TUPLE, Format.PROTO)
    assert isinstance(data, bytes)
    operands = data.index(b"\xa2\x02\x01\x02", data.index(b"get-tuple-element"))  # operand_ids = [2], the tuple
    path = tmp_path / "m.pb"
    path.write_bytes(data[:operands] + b"\xa2\x02\x01\x09" + data[operands + 4 :])  # an instruction that is not there
    assert_one_error(
        hloopt("run", path), path, "not a readable HloModuleProto: RET_CHECK failure", "invalid operand id(s)"
    )


@pytest.mark.parametrize("command", sampled(["run", "exec"], 2))
def test_a_bytecode_file_jaxlib_never_finishes_reading_ends_at_the_timeout(tmp_path: Path, command: str) -> None:
    path = tmp_path / "m.mlirbc"
    path.write_bytes(flipped(205, 0))
    assert_one_error(hloopt(command, path, "--timeout", 3), path, "XLA convert failed: worker timed out after 3 s")


def test_a_proto_jaxlib_reads_but_hloopt_refuses_is_said_of_its_instruction(tmp_path: Path) -> None:
    """XLA's print of a .pb is text the user never sees: the error names the instruction, not a line of it."""
    text = hlo(
        """
        HloModule m
        ENTRY e {
          p = f32[3] parameter(0)
          ROOT n = f32[3] negate(p), frontend_attributes={kq="v"}
        }
        """
    )
    data = formats.dump(text, Format.PROTO)
    assert isinstance(data, bytes) and data.count(b"kq") == 1
    path = tmp_path / "m.pb"
    path.write_bytes(data.replace(b"kq", b"k "))  # a frontend attribute whose name XLA prints as it is
    with pytest.raises(HloError) as caught:
        formats.load(str(path))
    assert str(caught.value) == (
        f"{path}: in instruction %n in computation %e: error parsing attribute frontend_attributes: "
        "expects attribute name but sees k"
    )
    assert_one_error(hloopt("run", path), path, "in instruction %n in computation %e")


# --- writing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [Format.PROTO, Format.STABLEHLO])
@pytest.mark.parametrize("case", UNWRITABLE)
def test_text_xla_cannot_parse_is_refused_when_written_not_a_dead_process(fmt: Format, case: str) -> None:
    with pytest.raises(HloError) as caught:
        formats.dump(UNWRITABLE[case], fmt, "m.hlo")
    said = str(caught.value)
    assert said.startswith("m.hlo: XLA parse failed: ") and "\n" not in said, said
    assert f"while reading the module to write it as {fmt.value}" in said


#: Where hloopt refuses each `UNWRITABLE` text, up front: (line, column, what it says).
REFUSED_AT = {
    "parameter(1) without parameter(0)": (3, 3, "parameter number 1 in a computation of 1 parameter"),
    "token[4]": (3, 13, "expects token[], with no dimensions (XLA aborts on any)"),
}


@pytest.mark.parametrize("output", sampled(["out.pb", "out.mlir", "out.hlo"], 3))
@pytest.mark.parametrize("case", UNWRITABLE)
def test_text_xla_cannot_parse_is_refused_up_front_located(tmp_path: Path, case: str, output: str) -> None:
    """What hloopt accepts it can write in every format: text XLA's parser aborts on is refused when read,
    at its place, whatever the output format, and nothing is written."""
    source = tmp_path / "m.hlo"
    source.write_text(UNWRITABLE[case])
    result = hloopt("run", source, "-o", tmp_path / output)
    line, column, said = REFUSED_AT[case]
    assert result.returncode == 2
    assert result.stderr.startswith(f"hloopt: error: {source}:{line}:{column}: {said}"), result.stderr
    assert len(result.stderr.splitlines()) == 3 and "Traceback" not in result.stderr
    assert not (tmp_path / output).exists()


def test_the_round_trip_check_of_text_that_kills_xla_is_an_xla_input_error() -> None:
    """`hloopt.roundtrip.check_roundtrip` runs XLA in a worker too: its caller lives to read the answer."""
    checked = check_roundtrip(UNWRITABLE["token[4]"], "t.hlo")
    assert not checked.ok
    assert checked.xla_input_error is not None
    assert checked.xla_input_error.startswith("XLA crashed: t.hlo: XLA parse failed: worker died with SIGABRT")


# --- every accepted module, in every format --------------------------------------------------------


def accepted_modules(corpus_dir: Path, every: int) -> list[tuple[str, str]]:
    """(text as hloopt prints it, name) of each module hloopt accepts among every `every`-th corpus module,
    the corpus's `invalid/` modules and the error cases of `tests/errors` (chunk by chunk);
    modules whose elided constants XLA would fill with over 64 MiB are left out (CI's memory)."""
    files = sorted((corpus_dir / "xla").glob("*.hlo"))[::every] + sorted((corpus_dir / "invalid").glob("*.hlo"))
    files += sorted((Path(__file__).parents[1] / "errors").glob("*.hlo"))
    sources = [(chunk.text, f"{path.name}:{chunk.place.line}") for path in files for chunk in _chunks(path)]
    accepted = []
    for text, name in sources:
        try:
            printed = parse(text, name).to_text()
        except HloError:
            continue
        if formats.elided_constant_bytes(printed) <= 64 << 20:
            accepted.append((printed, name))
    return accepted


def _chunks(path: Path) -> list[Chunk]:
    text = path.read_text(errors="replace")
    try:
        return split(text, path.name)
    except HloError:
        return [Chunk(Place(1, 1), text)]


@pytest.mark.corpus
def test_every_accepted_module_is_written_in_every_format_or_refused_in_one_line(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever hloopt accepts is written as .pb and .mlir and read back, or refused as one error naming
    the module; never a dead process. Every 60th corpus module (all with ``HLOOPT_CORPUS_FULL=1``). In the
    corpus, XLA's converter segfaults on hlo_module_stitcher_test__9's StableHLO and never finishes reading back
    the StableHLO it wrote for batched_gather_scatter_normalizer_test__7: both are one line too."""
    every = 1 if os.environ.get("HLOOPT_CORPUS_FULL") == "1" else 60
    modules = accepted_modules(corpus_dir, every)
    calls = [(text, fmt, name) for text, name in modules for fmt in ("pb", "mlir")]
    on_worker_path(monkeypatch)
    results = isolated_map(xla_workers.written_and_read_back, calls, timeout=60, labels=[c[2] for c in calls])
    outcomes: Counter[tuple[str, str]] = Counter()
    for (_, fmt, name), result in zip(calls, results):
        if isinstance(result, HloError):
            said = str(result)
            assert said.startswith(f"{name}: ") and "\n" not in said, said
            outcomes[fmt, "crashed" if isinstance(result, XlaCrash) else "refused"] += 1
            print(f"\n{fmt}: {said[:300]}")
        else:
            assert result == "ok"
            outcomes[fmt, "ok"] += 1
    print(f"\n{len(modules)} accepted modules: {dict(outcomes)}")
    assert outcomes["pb", "ok"] >= len(modules) - 5
