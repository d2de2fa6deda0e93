"""hloopt.driver.flow: one file's flow returns what happened; it never prints, exits or touches its input."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, cast

import pytest

from hloopt.driver.chunks import as_file
from hloopt.driver.flow import FileOptions, Job, ModuleResult, process_file, verify_numerics
from hloopt.errors import HloError, HloParseError
from hloopt.xla.bridge import IsolatedPool

PLAIN = """\
HloModule plain
ENTRY e {
  ROOT p = f32[2] parameter(0)
}
"""
BAD = """\
HloModule m
ENTRY e {
  ROOT b = f32[] add(x, y)
}
"""
INT8 = Path(__file__).resolve().parents[2] / "examples" / "int8_matmul.hlo"


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    (tmp_path / "plain.hlo").write_text(PLAIN)
    return tmp_path / "plain.hlo"


def process_module(job: Job, options: FileOptions) -> ModuleResult:
    """The result of a file that is one module."""
    (result,) = process_file(job, options).modules
    return result


def canonical(path: Path) -> str:
    result = process_module(Job(str(path)), FileOptions())
    assert result.texts is not None
    return result.texts[1]


def test_a_lone_file_to_stdout_is_returned_not_printed(plain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = process_module(Job(str(plain)), FileOptions())
    assert (result.path, result.status, result.output, result.error) == (str(plain), "changed", None, None)
    assert result.texts is not None and result.texts[0] == PLAIN and result.texts[1].startswith("HloModule plain")
    assert capsys.readouterr() == ("", "")
    assert plain.read_text() == PLAIN


def test_the_passes_are_summarised_per_pass(tmp_path: Path) -> None:
    (tmp_path / "m.hlo").write_text(INT8.read_text())
    result = process_module(Job(str(tmp_path / "m.hlo")), FileOptions(passes="all", check=True))
    assert [(p.name, p.changed) for p in result.passes] == [
        ("batchnorm-training-upcast", False),
        ("upcast-all-to-fp32", True),
        ("neuron-int-matmul-downcast", True),
    ]
    assert result.status == "changed" and result.output is None  # --check writes nothing
    assert list(result.to_dict()) == [
        "path",
        "chunk",
        "status",
        "seconds",
        "passes",
        "warnings",
        "error",
        "output",
        "losses",
        "numerics",
    ]
    assert result.to_dict()["passes"][1] == {"name": "upcast-all-to-fp32", "changed": True, "rewritten": 2}


def test_a_lone_output_is_written_atomically_and_its_directory_must_exist(plain: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    file = process_file(Job(str(plain)), FileOptions(output=str(out), show_diff=True))
    assert file.modules[0].output == str(out) and out.read_text() == as_file(canonical(plain))
    assert file.diff.splitlines()[:2] == [f"--- {plain}", f"+++ {out}"]  # a lone diff names the file written
    missing = process_module(Job(str(plain)), FileOptions(output=str(tmp_path / "nope" / "out.hlo")))
    assert missing.status == "failed" and isinstance(missing.exception, HloError)
    assert missing.error == {"message": f"{plain}: {tmp_path}/nope/out.hlo: directory {tmp_path}/nope does not exist"}
    assert not (tmp_path / "nope").exists()


def test_a_batch_member_mirrors_its_place_below_the_root(plain: Path, tmp_path: Path) -> None:
    job = Job(str(plain), PurePosixPath("deep/er/plain.hlo"))
    out, dump = tmp_path / "out", tmp_path / "dump"
    file = process_file(job, FileOptions(passes="all", output=str(out), dump_dir=str(dump), show_diff=True))
    assert file.modules[0].output == str(out / "deep" / "er" / "plain.hlo")
    assert (out / "deep" / "er" / "plain.hlo").read_text() == as_file(canonical(plain))
    assert [p.name for p in (dump / "deep" / "er" / "plain.hlo").iterdir()] == ["00-input.hlo"]
    assert file.diff.splitlines()[1] == f"+++ {plain} (after)"


def test_in_place_rewrites_only_a_changed_text(plain: Path) -> None:
    assert process_module(Job(str(plain)), FileOptions(in_place=True)).output == str(plain)
    stamp = plain.stat().st_mtime_ns
    again = process_module(Job(str(plain)), FileOptions(in_place=True))
    assert (again.status, again.output) == ("unchanged", None)
    assert plain.stat().st_mtime_ns == stamp


def test_bad_input_is_a_failed_result_with_its_location(tmp_path: Path) -> None:
    (tmp_path / "bad.hlo").write_text(BAD)
    out = tmp_path / "out.hlo"
    result = process_module(Job(str(tmp_path / "bad.hlo")), FileOptions(output=str(out)))
    assert result.status == "failed" and isinstance(result.exception, HloParseError)
    assert result.error is not None
    assert (result.error["line"], result.error["column"]) == (3, 22)
    assert result.error["message"].startswith(f"{tmp_path}/bad.hlo:3:22: instruction x does not exist")
    assert not out.exists() and result.texts is None


def test_stdin_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    result = process_module(Job("-"), FileOptions())
    assert result.path == "<stdin>"
    assert result.error is not None and result.error["file"] == "<stdin>"


def test_per_pass_keeps_the_module_after_each_changing_pass(tmp_path: Path) -> None:
    """Read back from the pipeline's dumps: a private directory without --dump-dir, and never an older run's."""
    (tmp_path / "m.hlo").write_text(INT8.read_text())
    options = FileOptions(passes="all", check=True, verify_numerics=True, per_pass=True)
    result = process_module(Job(str(tmp_path / "m.hlo")), options)
    assert [name for name, _ in result.stages] == ["upcast-all-to-fp32", "neuron-int-matmul-downcast"]
    assert result.texts is not None and result.stages[-1][1] == result.texts[1]
    assert "f32[8,32]{1,0} dot" not in result.stages[0][1] and "f32[8,32]{1,0} dot" in result.stages[1][1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.hlo"]
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "01-after-batchnorm-training-upcast.hlo").write_text("stale")
    again = process_module(Job(str(tmp_path / "m.hlo")), replace(options, dump_dir=str(dump)))
    assert again.stages == result.stages
    assert not process_module(Job(str(tmp_path / "m.hlo")), FileOptions(passes="all", check=True)).stages


class _BrokenPool:
    """XLA's calls failing as a whole (what `IsolatedPool.map` raises when a call raises a bug in its worker)."""

    def map(
        self, fn: object, calls: object, *, timeout: float | None = None, labels: Sequence[str] | None = None
    ) -> list[Any]:
        raise RuntimeError("_compare raised in a worker: KeyError: a bug in the XLA worker")


def test_a_broken_xla_pool_is_each_changed_module_s_numerics_error() -> None:
    """A batch worker's comparisons failing wholesale cost that file's comparisons, never the batch."""
    changed = ModuleResult("a.hlo", "changed", texts=(PLAIN, PLAIN))
    unchanged = ModuleResult("b.hlo", "unchanged", texts=(PLAIN, PLAIN))
    verify_numerics([changed, unchanged], FileOptions(verify_numerics=True), cast(IsolatedPool, _BrokenPool()))
    assert changed.numerics == {
        "ok": False,
        "error": "internal error: _compare raised in a worker: KeyError: a bug in the XLA worker",
    }
    assert unchanged.numerics is None


#: A module whose constant is long enough to be streamed, in text that is not quite XLA's (no `%`, a layout left out).
LONG_CONSTANT = (
    "HloModule long\n\nENTRY e {\n  c = bf16[3000]{0} constant({"
    + ", ".join(f"{(i % 97) * 0.25 - 5}" for i in range(3000))
    + "})\n  ROOT n = bf16[3000]{0} negate(c)\n}\n"
)


@pytest.mark.parametrize("passes", [None, "all"])
@pytest.mark.parametrize("canonical", [False, True])
def test_a_streamed_output_is_the_printed_module_and_says_whether_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, passes: str | None, canonical: bool
) -> None:
    """``-o FILE`` writes the module as it is printed, literal pieces and all: the same bytes as the module's
    text (what --diff, which keeps the text, writes), and without passes "unchanged" exactly when that is the input."""
    from hloopt.ir import literal
    from hloopt.text.parser import parse

    monkeypatch.setattr(literal, "_PIECE", 2000)  # the constant is a view, printed in pieces
    monkeypatch.setattr(literal, "_FORMAT_PIECE", 500)  # an upcast one is formatted in pieces
    source = as_file(parse(LONG_CONSTANT).to_text()) if canonical else LONG_CONSTANT
    (tmp_path / "in.hlo").write_text(source)
    streamed = process_module(Job(str(tmp_path / "in.hlo")), FileOptions(passes=passes, output=str(tmp_path / "a.hlo")))
    kept = process_module(
        Job(str(tmp_path / "in.hlo")), FileOptions(passes=passes, output=str(tmp_path / "b.hlo"), show_diff=True)
    )
    written = (tmp_path / "a.hlo").read_text()
    assert written == (tmp_path / "b.hlo").read_text() and kept.texts is not None and written == as_file(kept.texts[1])
    assert streamed.texts is None and streamed.output == str(tmp_path / "a.hlo")
    assert streamed.status == kept.status == ("unchanged" if canonical and passes is None else "changed")
    if passes == "all":
        assert "f32[3000]{0} constant({" in written


@pytest.mark.parametrize(
    ("pieces", "source", "same"),
    [
        (["ab", "c\n", "\n\n"], "abc\n", True),
        (["ab", "c\n", "\n\n"], "abc", True),
        (["ab", "c\n", "\n\n"], "abc\n\n\n", True),
        (["a", "", "b", "c"], "abc\n", True),
        (["ab", "d\n\n"], "abc\n", False),
        (["ab", "c\n", "d\n\n"], "abc\n", False),
        (["ab"], "abc\n", False),
        (["abc", "d"], "abc\n", False),
        ([""], "\n", True),
        (["x\n\n"], "", False),
    ],
)
def test_a_streamed_text_is_compared_with_its_source_as_files_are(pieces: list[str], source: str, same: bool) -> None:
    from hloopt.driver.flow import _as_file_pieces, _Compared

    as_pieces = list(_as_file_pieces(iter(pieces)))
    assert "".join(as_pieces) == as_file("".join(pieces))
    compared = _Compared(as_pieces, source)
    assert "".join(compared) == as_file("".join(pieces))
    assert compared.same is same is (as_file("".join(pieces)) == as_file(source))
