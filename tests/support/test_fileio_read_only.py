"""A read-only file system is reported as one, not as "permission denied": the user fixes the two differently."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hloopt.support.fileio import write_error

_MODULE = "HloModule m\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"


def test_an_erofs_error_is_said_to_be_a_read_only_file_system(tmp_path: Path) -> None:
    err = OSError(errno.EROFS, os.strerror(errno.EROFS))
    message = str(write_error(tmp_path / "out.hlo", err))
    assert "read-only file system" in message
    assert "permission denied" not in message


def test_a_permission_error_is_still_permission_denied(tmp_path: Path) -> None:
    err = PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    assert str(write_error(tmp_path / "out.hlo", err)).endswith("permission denied")


def _in_read_only_mount(directory: Path, *hloopt_args: str) -> subprocess.CompletedProcess[str]:
    """``hloopt ARGS`` in a private mount namespace where `directory` is bind-mounted read-only."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && shift && exec "$@"'
    command = ["unshare", "-m", "sh", "-c", script, str(directory), "--", sys.executable, "-m", "hloopt"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([*command, *hloopt_args], check=False, capture_output=True, text=True, env=env, timeout=120)


def _can_mount(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"'
    return (
        subprocess.run(["unshare", "-m", "sh", "-c", script, str(probe)], check=False, capture_output=True).returncode
        == 0
    )


@pytest.mark.parametrize("target", ["new.hlo", "old.hlo", "outdir/", "dumps"])
def test_writing_into_a_read_only_mount_says_so_and_changes_nothing(tmp_path: Path, target: str) -> None:
    if not _can_mount(tmp_path):
        pytest.skip("no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)")
    module = tmp_path / "in.hlo"
    module.write_text(_MODULE)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    (read_only / "old.hlo").write_text("old\n")
    before = sorted((p.name, p.read_bytes()) for p in read_only.iterdir())
    if target.endswith("/"):
        (tmp_path / "batch").mkdir()
        (tmp_path / "batch" / "a.hlo").write_text(_MODULE)
        result = _in_read_only_mount(read_only, "run", str(tmp_path / "batch"), "-o", str(read_only / target))
    elif target == "dumps":
        out = str(tmp_path / "out.hlo")
        result = _in_read_only_mount(
            read_only, "run", str(module), "--passes", "all", "--dump-dir", str(read_only / target), "-o", out
        )
    else:
        result = _in_read_only_mount(read_only, "run", str(module), "-o", str(read_only / target))
    assert result.returncode == 2, result.stderr
    assert "read-only file system" in result.stderr
    assert "permission denied" not in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted((p.name, p.read_bytes()) for p in read_only.iterdir()) == before
