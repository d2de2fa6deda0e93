"""Every output path the command line writes (-o, --dump-dir, --report, exec's and cast's outputs) fails the same way.

An output that cannot be written is ``hloopt: error: …`` with exit 2, says what is in
the way, and is found before anything is written. Permission bits do not stop root,
so the permission wording is also tested with the refusal simulated.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hlo_text import hlo

from hloopt.cli.main import main
from hloopt.support import fileio

MODULE = hlo("""
    HloModule m
    ENTRY e {
      p = bf16[2] parameter(0)
      ROOT a = bf16[2] add(p, p)
    }
    """)


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """A module, a directory of modules, a plain file where a directory is wanted, and a .npy to cast."""
    (tmp_path / "m.hlo").write_text(MODULE)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "m.hlo").write_text(MODULE)
    (tmp_path / "FILE").write_text("a file\n")
    np.save(tmp_path / "x.npy", np.ones(3, np.float32))
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))}


def invoke(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stderr


ALL = ("--passes", "all")


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "m.hlo", "-o", "FILE/out.hlo"], "FILE/out.hlo: FILE is a file, not a directory"),
        (["run", "m.hlo", "-o", "nope/out.hlo"], "nope/out.hlo: directory nope does not exist"),
        (["run", "m.hlo", "-o", "in"], "in: is a directory"),
        (["run", "m.hlo", *ALL, "--dump-dir", "FILE"], "FILE: is a file, expected a directory"),
        (["run", "m.hlo", *ALL, "--dump-dir", "FILE/sub"], "FILE/sub: FILE is a file, not a directory"),
        (["run", "m.hlo", *ALL, "--dump-dir", "dumps", "-o", "FILE/o.hlo"], "FILE/o.hlo: FILE is a file"),
        (["run", "in", "-o", "FILE"], "FILE: is a file, expected a directory"),
        (["run", "in", "-o", "FILE/sub"], "FILE/sub: FILE is a file, not a directory"),
        (["run", "in", "-o", "out", *ALL, "--dump-dir", "FILE"], "FILE: is a file, expected a directory"),
        (["run", "in", "--check", *ALL, "--dump-dir", "FILE/sub"], "FILE/sub: FILE is a file, not a directory"),
        (["run", "in", "-o", "out", "--report", "FILE/r.json"], "FILE/r.json: FILE is a file, not a directory"),
        (["run", "in", "--check", "--report", "in"], "in: is a directory"),
        (["exec", "m.hlo", "-o", "FILE/o.npz"], "FILE/o.npz: FILE is a file, not a directory"),
        (["exec", "m.hlo", "--save-inputs", "FILE/i.npz", "-o", "o.npz"], "FILE/i.npz: FILE is a file"),
        (["cast", "x.npy", "--to", "bf16", "-o", "FILE/y.npy"], "FILE/y.npy: FILE is a file, not a directory"),
        (["cast", "x.npy", "--to", "bf16", "-o", "in"], "in: is a directory"),
    ],
)
def test_an_unwritable_output_is_an_error_and_nothing_is_written(
    place: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(place)
    before = snapshot(place)
    code, stderr = invoke(*args)
    assert code == 2 and stderr == f"hloopt: error: {message}" + stderr.removeprefix(f"hloopt: error: {message}")
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert snapshot(place) == before


def _refuse_access(locked: Path) -> object:
    """`os.access` as for a user who may not write in `locked`."""
    real = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        return not (Path(str(path)) == locked and mode & os.W_OK) and real(path, mode)  # type: ignore[arg-type]

    return access


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["run", "m.hlo", "-o", "locked/out.hlo"],
            "locked/out.hlo: cannot write in directory locked: permission denied",
        ),
        (["run", "m.hlo", *ALL, "--dump-dir", "locked"], "locked: cannot write in this directory: permission denied"),
        (
            ["run", "m.hlo", *ALL, "--dump-dir", "locked/d"],
            "locked/d: cannot write in directory locked: permission denied",
        ),
        (["run", "in", "-o", "locked/out"], "locked/out: cannot write in directory locked: permission denied"),
        (["run", "in", "--check", "--report", "locked/r.json"], "cannot write in directory locked: permission denied"),
        (["exec", "m.hlo", "-o", "locked/o.npz"], "locked/o.npz: cannot write in directory locked: permission denied"),
        (
            ["cast", "x.npy", "--to", "bf16", "-o", "locked/y.npy"],
            "cannot write in directory locked: permission denied",
        ),
    ],
)
def test_a_directory_that_exists_but_is_locked_is_called_so(
    place: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(place)
    (place / "locked").mkdir()
    monkeypatch.setattr(os, "access", _refuse_access(Path("locked")))
    before = snapshot(place)
    code, stderr = invoke(*args)
    assert code == 2 and stderr.startswith("hloopt: error: ") and message in stderr, stderr
    assert "does not exist" not in stderr
    assert snapshot(place) == before


@pytest.mark.parametrize(
    "args",
    [
        ["run", "m.hlo", "-o", "out.hlo"],
        # (not a batch: it writes in its worker processes, which this test's patch does not reach)
        ["exec", "m.hlo", "-o", "out.npz"],
        ["cast", "x.npy", "--to", "bf16", "-o", "out.npy"],
    ],
)
def test_a_write_refused_after_the_checks_is_worded_the_same(
    place: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """The checks passed (as for root), then the write itself is refused: still no traceback, still the real reason."""
    monkeypatch.chdir(place)

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fileio, "_create_temporary", refuse)
    code, stderr = invoke(*args)
    out = args[args.index("-o") + 1]
    assert code in (1, 2) and "Traceback" not in stderr
    assert (f"{out}/m.hlo" if args[1] == "in" else out) in stderr
    assert "cannot write in directory " in stderr and ": permission denied" in stderr, stderr
    assert "does not exist" not in stderr
    assert not (place / out).exists() or (place / out).is_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_a_read_only_directory_for_real(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(place)
    (place / "locked").mkdir(mode=0o500)
    try:
        for args in (["run", "m.hlo", "-o", "locked/o.hlo"], ["run", "m.hlo", *ALL, "--dump-dir", "locked/d"]):
            code, stderr = invoke(*args)
            assert code == 2 and "cannot write in directory locked: permission denied" in stderr, stderr
        assert list((place / "locked").iterdir()) == []
    finally:
        (place / "locked").chmod(0o700)


def test_check_diff_prints_the_diff_for_a_file_as_for_a_directory(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(place)
    runner = CliRunner()
    lone = runner.invoke(main, ["run", "m.hlo", "--check", "--diff", *ALL])
    batch = runner.invoke(main, ["run", "in", "--check", "--diff", *ALL])
    assert lone.exit_code == batch.exit_code == 1
    assert (
        lone.stdout.startswith("--- m.hlo\n+++ m.hlo (after)\n")
        and "+  ROOT %a = f32[2]{0} add(%p, %p)\n" in lone.stdout
    )
    assert batch.stdout.replace("in/m.hlo", "m.hlo") == lone.stdout
    assert "hloopt: m.hlo would change" in lone.stderr
    unchanged = runner.invoke(main, ["run", "m.hlo", "--check", "--diff", "--passes", "fold-constant-converts"])
    assert unchanged.exit_code == 0
