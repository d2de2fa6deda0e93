"""The command killed mid-batch and mid-execution: SIGINT, SIGTERM and SIGKILL of the main process.

Each run is the real ``hloopt`` entry point in its own process, its workers made slow at one point
(a write held before its rename, an execution held before it runs) so that the signal lands there.
After it: no worker left running (found by the marker every worker carries: its parent's pid in its
command line), no traceback on stderr, no temporary file, and the output pipes at their end at once.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_children import REAL, slow_to_rename
from processes import alive, wait_for, workers_of

from hloopt.support import fileio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLAIN = "HloModule plain\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"

#: A worker whose executions wait a minute first, after writing its pid to $HLOOPT_TEST_MARKER.
SLOW_EXECUTION = (
    "import os, time, pathlib\n"
    "import hloopt.xla.bridge as b\n"
    "call = b.Executable.__call__\n"
    "def slow(self, inputs):\n"
    "    pathlib.Path(os.environ['HLOOPT_TEST_MARKER']).write_text(str(os.getpid()))\n"
    "    time.sleep(60)\n"
    "    return call(self, inputs)\n"
    "b.Executable.__call__ = slow\n"
) + REAL


def hloopt(program: str, *args: str) -> subprocess.Popen[str]:
    """``hloopt ARGS`` at its real entry point, its workers running `program`."""
    entry = f"from hloopt.support import pool; pool.PROGRAM = {program!r}; from hloopt.cli.main import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", entry, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.endswith(".tmp"))


EXPECTED_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_batch_killed_mid_write(tmp_path: Path, signum: signal.Signals) -> None:
    """A worker is caught between writing its temporary file and renaming it when the command is signalled."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    for name in ("a.hlo", "slow.hlo", "z.hlo"):
        (src / name).write_text(PLAIN)
    process = hloopt(slow_to_rename("slow.hlo", 60), "run", str(src), "-o", str(out), "--jobs", "2")
    wait_for(lambda: out.exists() and any(".slow.hlo." in name for name in temporaries(out)), "no temporary file")
    workers = workers_of(process.pid)
    assert workers
    os.kill(process.pid, signum)
    started = time.monotonic()
    _, stderr = process.communicate(timeout=30)  # both pipes reach their end: no worker holds them
    assert time.monotonic() - started < 10
    assert process.returncode == EXPECTED_CODES[signum]
    assert "Traceback" not in stderr, stderr
    wait_for(lambda: not any(map(alive, workers)), "a worker outlived the command", 15)
    wait_for(lambda: not temporaries(out), "a temporary file was left", 15)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_an_execution_killed_midway(tmp_path: Path, signum: signal.Signals, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "executing"
    monkeypatch.setenv("HLOOPT_TEST_MARKER", str(marker))
    process = hloopt(SLOW_EXECUTION, "exec", str(EXAMPLES / "int8_matmul.hlo"))
    wait_for(marker.exists, "the worker never started executing")
    worker = int(marker.read_text())
    os.kill(process.pid, signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == EXPECTED_CODES[signum]
    assert "Traceback" not in stderr, stderr
    wait_for(lambda: not alive(worker), "the XLA worker outlived the command", 15)


def test_a_rerun_removes_what_a_killed_run_left_and_nothing_else(tmp_path: Path) -> None:
    """Only hloopt's own temporary names, only unlocked (their writer is gone), only older than the run."""
    src, out = tmp_path / "in", tmp_path / "out"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.hlo").write_text(PLAIN)
    (out / "sub").mkdir(parents=True)
    stale = out / "sub" / ".a.hlo.0123abcd.tmp"
    locked = out / ".b.hlo.89abcdef.tmp"  # a concurrent run writing it
    others = [out / ".c.hlo.tmp", out / "notes.0123abcd.tmp", src / "sub" / ".a.hlo.0123abcd.tmp"]
    for path in [stale, locked, *others]:
        path.write_text("")
    with open(locked, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        time.sleep(0.05)
        started = time.time()
        time.sleep(0.1)  # file times come from the kernel's coarser clock
        newer = out / ".d.hlo.fedcba98.tmp"
        newer.write_text("")  # made after the run started: a concurrent run's
        assert fileio.remove_stale_temporaries(out, started) == [str(stale)]
        assert newer.exists()
        newer.unlink()
        stale.write_text("")
        os.utime(stale, (started - 60, started - 60))
        result = subprocess.run(
            [sys.executable, "-m", "hloopt", "run", str(src), "-o", str(out)],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert not stale.exists() and locked.exists() and all(path.exists() for path in others)
    in_place = subprocess.run(
        [sys.executable, "-m", "hloopt", "run", str(src), "--in-place"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert in_place.returncode == 0, in_place.stderr
    assert not (src / "sub" / ".a.hlo.0123abcd.tmp").exists()
