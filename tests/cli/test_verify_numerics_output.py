"""``run --verify-numerics`` and its outputs: an error (exit 2) writes nothing, over tolerance (exit 1) writes and says so.

A module XLA's parser takes but will not run is refused by hloopt itself, before XLA sees it,
with one located line; plain ``run`` keeps accepting it, as XLA's parser does. The same rule
holds per file in a batch (``-o OUTDIR``, ``--in-place``) and for a split file as a whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_invoke import invoke
from conftest import REPO
from hlo_text import hlo

from hloopt.driver.chunks import as_file

VERIFY = ("--passes", "all", "--verify-numerics")

#: Modules XLA's parser takes and its compiler refuses, each refused at its last line.
UNRUNNABLE = {
    "add": "p = f32[4] parameter(0)\n  q = f32[8] parameter(1)\n  ROOT r = f32[4] add(p, q)",
    "compare": "p = f32[4] parameter(0)\n  q = f32[8] parameter(1)\n  ROOT r = pred[4] compare(p, q), direction=GT",
    "select": "c = pred[2] parameter(0)\n  p = bf16[4] parameter(1)\n  ROOT r = bf16[4] select(c, p, p)",
    "clamp": "a = f32[8] parameter(0)\n  p = f32[4] parameter(1)\n  ROOT r = f32[4] clamp(a, p, a)",
    "types": "p = f32[4] parameter(0)\n  q = bf16[4] parameter(1)\n  ROOT r = f32[4] multiply(p, q)",
    "dot": "p = bf16[2,3] parameter(0)\n  q = bf16[4,5] parameter(1)\n"
    "  ROOT r = bf16[2,5] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    "broadcast": "p = f32[4] parameter(0)\n  ROOT r = f32[3,5] broadcast(p), dimensions={1}",
}

#: Refused by XLA only (its CPU has no such custom call), and changed by the passes (the bf16 add).
XLA_REFUSES = hlo("""
    HloModule m
    ENTRY e {
      p = bf16[4] parameter(0)
      a = bf16[4] add(p, p)
      ROOT c = bf16[4] custom-call(a), custom_call_target="no_such_target"
    }
    """)


def _module(body: str) -> str:
    return f"HloModule m\nENTRY e {{\n  {body}\n}}\n"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", UNRUNNABLE)
def test_an_unrunnable_module_is_one_located_error_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.chdir(tmp_path)
    text = _module(UNRUNNABLE[case])
    Path("bad.hlo").write_text(text)
    last = len(text.splitlines()) - 1  # the ROOT line, 1-based
    for existing in (None, b"the user's file\n"):
        if existing is not None:
            Path("out.hlo").write_bytes(existing)
        result = invoke("run", "bad.hlo", *VERIFY, "-o", "out.hlo")
        assert result.exit_code == 2, result.stderr
        lines = result.stderr.splitlines()
        assert lines[0].startswith(f"hloopt: error: bad.hlo:{last}:3: %r in %e: ")
        assert lines[1:] == ["    " + text.splitlines()[last - 1].strip(), "    ^"]
        assert "MLIR" not in result.stderr and "XLA would refuse to run the module" in lines[0]
        assert _files(tmp_path) == {"bad.hlo": text.encode(), **({"out.hlo": existing} if existing else {})}


@pytest.mark.parametrize("case", UNRUNNABLE)
def test_plain_run_still_takes_what_xla_s_parser_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.hlo").write_text(_module(UNRUNNABLE[case]))
    result = invoke("run", "bad.hlo", "--passes", "all", "-o", "out.hlo")
    assert result.exit_code == 0, result.stderr
    assert Path("out.hlo").read_text().startswith("HloModule m")


def test_a_comparison_xla_refuses_is_an_error_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hloopt's check passes it; XLA cannot run it: still exit 2, the user's file untouched."""
    monkeypatch.chdir(tmp_path)
    Path("cc.hlo").write_text(XLA_REFUSES)
    Path("out.hlo").write_text("the user's file\n")
    result = invoke("run", "cc.hlo", *VERIFY, "-o", "out.hlo")
    assert result.exit_code == 2
    assert "hloopt: error: cc.hlo: " in result.stderr and "no_such_target" in result.stderr
    assert Path("out.hlo").read_text() == "the user's file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cc.hlo", "out.hlo"]


def test_over_tolerance_writes_the_output_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 1, like diff: the rewrite is valid, and the user needs it to see what differs."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPO / "examples" / "int8_matmul.hlo", "m.hlo")
    result = invoke("run", "m.hlo", *VERIFY, "--rtol", "0", "--atol", "0", "-o", "out.hlo")
    assert result.exit_code == 1, result.stderr
    assert "outputs over tolerance" in result.stderr
    assert "hloopt: warning: out.hlo is written although the module's outputs differ beyond tolerance" in result.stderr
    written = invoke("run", "m.hlo", "--passes", "all")
    assert Path("out.hlo").read_text() == as_file(written.stdout)


@pytest.mark.slow  # CI runs it; the fast tier keeps the single-file tests of the same rule
def test_a_batch_writes_each_file_by_the_same_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-o OUTDIR, then --in-place: the unrunnable and the XLA-refused files get nothing, the good one its output."""
    monkeypatch.chdir(tmp_path)
    Path("in").mkdir()
    Path("in/bad.hlo").write_text(_module(UNRUNNABLE["add"]))
    Path("in/cc.hlo").write_text(XLA_REFUSES)
    shutil.copy(REPO / "examples" / "int8_matmul.hlo", "in/good.hlo")
    inputs = _files(tmp_path / "in")
    result = invoke("run", "in", *VERIFY, "-o", "out", "-j", "1", "--report", "r.json")
    assert result.exit_code == 1, result.stderr
    assert sorted(_files(tmp_path / "out")) == ["good.hlo"]
    assert "hloopt: error: in/bad.hlo:5:3: %r in %e: operand 1 (%q) is f32[8]" in result.stderr
    report = {Path(m["path"]).name: m for m in json.loads(Path("r.json").read_text())["modules"]}
    assert report["bad.hlo"]["status"] == "failed" and report["bad.hlo"]["output"] is None
    assert report["cc.hlo"]["output"] is None and "no_such_target" in report["cc.hlo"]["numerics"]["error"]
    assert report["good.hlo"]["output"] == "out/good.hlo" and report["good.hlo"]["numerics"]["ok"] is True

    result = invoke("run", "in", *VERIFY, "--in-place", "-j", "1")
    assert result.exit_code == 1, result.stderr
    after = _files(tmp_path / "in")
    assert after["bad.hlo"] == inputs["bad.hlo"] and after["cc.hlo"] == inputs["cc.hlo"]
    assert after["good.hlo"] == (tmp_path / "out" / "good.hlo").read_bytes() != inputs["good.hlo"]
    assert not [p for p in (tmp_path / "in").iterdir() if p.name.endswith(".tmp")]


def test_a_split_file_with_one_unrunnable_chunk_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    good = _module("p = bf16[4] parameter(0)\n  ROOT r = bf16[4] add(p, p)")
    Path("cases.hlo").write_text(good + "// -----\n" + _module(UNRUNNABLE["compare"]))
    result = invoke("run", "cases.hlo", *VERIFY, "--split-input-file", "-o", "out.hlo")
    assert result.exit_code == 2, result.stderr
    assert "hloopt: error: cases.hlo:11:3: %r in %e: operand 1 (%q) is f32[8]" in result.stderr
    assert not Path("out.hlo").exists()
