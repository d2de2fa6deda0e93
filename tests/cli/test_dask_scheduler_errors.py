"""A `--dask-scheduler` that is no scheduler (a file that is not Dask's JSON, an address Dask cannot
use) is an error naming it, exit 2, before any output is made: never a traceback from Dask's asserts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")

_MODULE = "HloModule m\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"garbage", "not a Dask scheduler file (JSON)"),
        (b"", "not a Dask scheduler file (JSON)"),
        (b"\xff\xfe", "not a Dask scheduler file (JSON)"),
        (b"{}", 'no "address" string'),
        (b"[1]", 'no "address" string'),
        (b'{"address": 5}', 'no "address" string'),
        (b'{"address": ""}', 'no "address" string'),
        (b'{"address": "tcp://"}', "cannot connect to the Dask scheduler"),
        (b'{"address": "bogus://x"}', "cannot connect to the Dask scheduler"),
    ],
)
def test_a_file_that_is_no_scheduler_file_is_an_error(tmp_path: Path, content: bytes, said: str) -> None:
    scheduler = tmp_path / "scheduler.json"
    scheduler.write_bytes(content)
    _refused(tmp_path, str(scheduler), said)


@pytest.mark.parametrize("address", ["", "tcp://", "bogus://x", "inproc://x", "tcp://host:notaport"])
def test_an_address_dask_cannot_use_is_an_error(tmp_path: Path, address: str) -> None:
    _refused(tmp_path, address, "cannot connect to the Dask scheduler")


def _refused(tmp_path: Path, scheduler: str, said: str) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "a.hlo").write_text(_MODULE)
    out = tmp_path / "out"
    # A process of its own, as a user runs it: a Dask client that failed may leave its event loop behind.
    command = [sys.executable, "-m", "hloopt", "run", str(batch), "-o", str(out), "--dask-scheduler", scheduler]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"hloopt: error: --dask-scheduler {scheduler}: ")
    assert said in result.stderr
    assert not out.exists()
