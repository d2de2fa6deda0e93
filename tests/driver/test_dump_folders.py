"""Directories that XLA, jax and the Neuron compile cache write, processed with no --glob: their modules are
processed, the other files their globs find (buffer assignments, memory reports, compile options) are
skipped and counted, never failed. A file is known by XLA's dump names, else by its content."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import sampled

from hloopt import batch as public_batch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: A small jitted f32 function: the passes change none of its modules, so --check passes on them.
JAX_PROGRAM = """\
import jax, jax.numpy as jnp
f = jax.jit(lambda x, w: jnp.tanh(x @ w).sum())
print(f(jnp.ones((4, 8)), jnp.ones((8, 3))))
"""


def hloopt(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hloopt", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=600, cwd=cwd)


def xla_dump(into: Path, *flags: str) -> Path:
    """What ``XLA_FLAGS=--xla_dump_to=DIR FLAGS`` leaves after jax compiles and runs a small function."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": " ".join([f"--xla_dump_to={into}", *flags])}
    subprocess.run([sys.executable, "-c", JAX_PROGRAM], env=env, check=True, capture_output=True, timeout=300)
    return into


def report_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize(
    "flags",
    sampled([(), ("--xla_dump_hlo_as_proto", "--xla_dump_hlo_as_text")], 2),
    ids=["default dump", "proto and text"],
)
def test_an_xla_dump_folder_as_it_is(tmp_path: Path, flags: tuple[str, ...]) -> None:
    dump = xla_dump(tmp_path / "dump", *flags)
    found = sorted(p.relative_to(dump).as_posix() for p in dump.rglob("*") if p.suffix in (".txt", ".pb", ".mlir"))
    reports = [name for name in found if "buffer-assignment" in name or "memory-usage-report" in name]
    assert reports  # what failed before, with compile_options.pb and topology.pb when protos are dumped
    result = hloopt("run", dump, "--passes", "all", "--check", "--report", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    report = report_of(tmp_path / "r.json")
    processed = sorted(Path(m["path"]).relative_to(dump).as_posix() for m in report["modules"])
    skipped = {Path(s["path"]).relative_to(dump).as_posix(): s["reason"] for s in report["skipped"]}
    assert sorted([*processed, *skipped]) == found  # every file found is one or the other, once
    modules = [name for name in found if name.endswith((".hlo.pb", ".mlir")) or "optimizations.txt" in name]
    assert processed == sorted(modules)
    assert all(reason.endswith("not a module") for reason in skipped.values())
    counts = report["summary"]
    assert counts == {
        "processed": len(modules),
        "changed": 0,
        "unchanged": len(modules),
        "failed": 0,
        "skipped": len(skipped),
    }
    assert f"{len(skipped)} skipped (not modules)" in result.stderr

    out = tmp_path / "out"
    written = hloopt("run", dump, "--passes", "all", "-o", out)
    assert written.returncode == 0, written.stderr
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == processed


@pytest.mark.slow
def test_files_that_are_not_modules_are_known_by_their_content(tmp_path: Path) -> None:
    """Renamed, XLA's reports and jax's options are still skipped; a broken module is still a failure."""
    dump = xla_dump(tmp_path / "dump", "--xla_dump_hlo_as_proto", "--xla_dump_hlo_as_text")
    root = tmp_path / "in"
    (root / "notes").mkdir(parents=True)
    (buffers,) = dump.glob("*jit__lambda*-buffer-assignment.txt")
    shutil.copy(buffers, root / "notes" / "buffers.txt")
    (options,) = dump.glob("*jit__lambda/compile_options.pb")
    shutil.copy(options, root / "notes" / "options.pb")
    (root / "notes" / "todo.txt").write_text("TODO: rerun with bf16\n")
    (root / "headerless.txt").write_text("ENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2] parameter(0)\n}\n")
    int8 = (EXAMPLES / "int8_matmul.hlo").read_text()
    (root / "cut.txt").write_text(int8[:300])  # opens like HLO: a module cut short, not a report
    (root / "garbage.hlo").write_text("BufferAssignment:\n")  # named a module: it must be one
    (root / "empty.pb").write_bytes(b"")
    module_pb = root / "model.pb"
    assert hloopt("run", EXAMPLES / "int8_matmul.hlo", "-o", module_pb).returncode == 0
    (root / "cut.pb").write_bytes(module_pb.read_bytes()[:-7])  # a protobuf cut short
    result = hloopt("run", root, "--check", "--report", tmp_path / "r.json")
    assert result.returncode == 1, result.stderr
    report = report_of(tmp_path / "r.json")
    skipped = {Path(s["path"]).relative_to(root).as_posix(): s["reason"] for s in report["skipped"]}
    assert skipped == {
        "notes/buffers.txt": "text that is neither HLO nor MLIR (it opens with 'BufferAssignment:')",
        "notes/options.pb": skipped["notes/options.pb"],
        "notes/todo.txt": "text that is neither HLO nor MLIR (it opens with 'TODO: rerun with bf16')",
    }
    assert skipped["notes/options.pb"].startswith("a protobuf message (fields ")
    assert skipped["notes/options.pb"].endswith("neither an HloModuleProto, XLA's HloProto dump nor an HloSnapshot")
    check = public_batch.BatchOptions(public_batch.FileOptions(check=True), jobs=1)
    done = public_batch.run([str(root)], check)  # the same from Python
    assert {Path(file.path).relative_to(root).as_posix(): file.reason for file in done.skipped} == skipped
    assert all(isinstance(file, public_batch.Skipped) and not file.modules for file in done.skipped)
    status = {Path(m["path"]).relative_to(root).as_posix(): m["status"] for m in report["modules"]}
    assert status == {
        "cut.pb": "failed",
        "cut.txt": "failed",
        "empty.pb": "failed",
        "garbage.hlo": "failed",
        "headerless.txt": "changed",  # printed with its header
        "model.pb": "unchanged",
    }


def test_named_files_are_never_skipped(tmp_path: Path) -> None:
    """A file given as an INPUT is a module because the user says so: not one is its failure."""
    report = tmp_path / "BufferAssignment.txt"
    report.write_text("BufferAssignment:\nallocation 0: size 4\n")
    module = tmp_path / "m.hlo"
    module.write_text((EXAMPLES / "int8_matmul.hlo").read_text())
    result = hloopt("run", report, module, "--check")
    assert result.returncode == 1
    assert "hloopt: 2 processed, 0 would change, 1 unchanged, 1 failed (" in result.stderr
    assert f"hloopt: error: {report}:1:17:" in result.stderr


@pytest.mark.slow  # CI runs it; the fast tier keeps the XLA dump folder
def test_a_neuron_compile_cache(tmp_path: Path) -> None:
    """The cache's layout: neuronxcc-VERSION/MODULE_HASH+FLAGS/ with the module as a bare HloModuleProto
    (model.hlo_module.pb) beside its NEFF, its compiler flags and a done marker."""
    cache = tmp_path / "neuron-compile-cache"
    entries = []
    for index, example in enumerate(("int8_matmul.hlo", "fp8_mlp.hlo")):
        entry = cache / "neuronxcc-2.15.128.0+56dc5a86" / f"MODULE_{1234567 + index}+4c2a1f0e"
        entry.mkdir(parents=True)
        assert hloopt("run", EXAMPLES / example, "-o", entry / "model.hlo_module.pb").returncode == 0
        (entry / "model.neff").write_bytes(b"NEFF\x00\x01" + bytes(range(256)))
        (entry / "compile_flags.json").write_text('["--target=trn1", "--auto-cast=none"]\n')
        (entry / "model.done").write_text("")
        entries.append(entry.relative_to(cache))
    out = tmp_path / "out"
    result = hloopt("run", cache, "--passes", "all", "-o", out, "--report", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    report = report_of(tmp_path / "r.json")
    assert report["summary"] == {"processed": 2, "changed": 2, "unchanged": 0, "failed": 0, "skipped": 0}
    written = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert written == sorted(entry / "model.hlo_module.pb" for entry in entries)
    assert all(hloopt("run", out / path).returncode == 0 for path in written)  # protos XLA reads back


@pytest.mark.slow
def test_shards_merge_their_skipped_files(tmp_path: Path) -> None:
    dump = xla_dump(tmp_path / "dump", "--xla_dump_hlo_as_proto", "--xla_dump_hlo_as_text")
    whole = hloopt("run", dump, "--check", "--report", tmp_path / "whole.json")
    assert whole.returncode == 0, whole.stderr
    for k in (1, 2):
        shard = hloopt("run", dump, "--check", "--shard", f"{k}/2", "--report", tmp_path / f"s{k}.json")
        assert shard.returncode == 0, shard.stderr
    merged = hloopt("report", "merge", tmp_path / "s1.json", tmp_path / "s2.json", "-o", tmp_path / "m.json")
    assert merged.returncode == 0, merged.stderr
    expected, got = report_of(tmp_path / "whole.json"), report_of(tmp_path / "m.json")
    assert got["skipped"] == expected["skipped"] and got["summary"] == expected["summary"]
    assert expected["summary"]["skipped"] > 0
