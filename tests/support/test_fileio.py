"""`write_atomic`: a reader sees the old file or the whole new one; only a replacement pays for fsync."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hloopt.errors import HloError
from hloopt.support.fileio import write_atomic


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    fsync = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_a_new_file_is_written_whole_without_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lost in a crash, a new output costs the user nothing: no fsync (a batch writes thousands)."""
    calls = _fsyncs(monkeypatch)
    target = tmp_path / "new.hlo"
    write_atomic(target, "HloModule m\n")
    assert target.read_text() == "HloModule m\n"
    assert calls == []
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == ["new.hlo"]


def test_replacing_a_file_syncs_the_new_one_first_and_keeps_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's file is replaced only by a new one already on disk, so a crash leaves one of the two."""
    target = tmp_path / "mine.hlo"
    target.write_text("old\n")
    target.chmod(0o640)
    calls = _fsyncs(monkeypatch)
    write_atomic(target, b"new\n")
    assert target.read_text() == "new\n"
    assert len(calls) == 1
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["mine.hlo"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "mine.hlo"
    target.write_text("old\n")

    def refuse(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(HloError, match=r"mine\.hlo: cannot write: no space left on device"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mine.hlo"]
