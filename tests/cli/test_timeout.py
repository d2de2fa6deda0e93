"""``--timeout``: every command that compiles or runs a module stops XLA on an endless loop (issue 28 item 3).

The module is a ``while`` whose condition is always true; its counter is bf16 so that the passes change it,
and ``--verify-numerics`` of a batch compares it. Each command ends with one error line naming the file and
the stage, exit 2, and leaves no process behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hlo_text import hlo
from numerics_modules import FOREVER
from processes import children

import hloopt
from hloopt.errors import HloError
from hloopt.xla.bridge import XlaCrash
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit

QUICK = hlo(
    """
    HloModule quick
    ENTRY e {
      p = bf16[2] parameter(0)
      ROOT n = bf16[2] negate(p)
    }
    """
)
#: Long enough to import jax and compile on a loaded machine (a worker's own start is not counted), short
#: enough for a test.
SECONDS = 10


def hloopt_cli(*args: object) -> tuple[subprocess.CompletedProcess[str], float]:
    """``hloopt ARGS`` in its own process, and how long it took."""
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "hloopt", *map(str, args)], check=False, capture_output=True, text=True, timeout=300
    )
    return result, time.monotonic() - start


@pytest.fixture
def forever(tmp_path: Path) -> Path:
    path = tmp_path / "forever.hlo"
    path.write_text(FOREVER)
    return path


def expired(path: Path | str, running: str = "while running forever") -> str:
    return f"{path}: XLA execute failed: worker timed out after {SECONDS} s, killed {running}"


@pytest.mark.slow
def test_exec_stops_an_endless_loop(forever: Path) -> None:
    result, took = hloopt_cli("exec", forever, "--timeout", SECONDS)
    assert result.returncode == 2
    assert result.stderr == f"hloopt: error: {expired(forever)}\n"
    assert took < 120


@pytest.mark.slow  # an endless loop: SECONDS s of a core; the fast tier has exec's and the API's
def test_compare_stops_an_endless_loop(forever: Path) -> None:
    result, _ = hloopt_cli("compare", forever, forever, "--timeout", SECONDS)
    assert result.returncode == 2
    assert result.stderr == f"hloopt: error: {expired(f'{forever} against {forever}')}\n"


@pytest.mark.slow  # an endless loop: SECONDS s of a core; the fast tier has exec's and the API's
def test_run_verify_numerics_stops_an_endless_loop(forever: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.hlo"
    result, _ = hloopt_cli("run", forever, "--passes", "all", "--verify-numerics", "-o", out, "--timeout", SECONDS)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"hloopt: error: {expired(forever)}"
    assert not out.exists()  # a comparison that could not be done writes nothing


@pytest.mark.slow  # an endless loop: SECONDS s of a core; the fast tier has exec's and the API's
def test_batch_numerics_stop_an_endless_loop_and_go_on(forever: Path, tmp_path: Path) -> None:
    (tmp_path / "quick.hlo").write_text(QUICK)
    report = tmp_path / "report.json"
    result, _ = hloopt_cli(
        "run", tmp_path, "--passes", "all", "--verify-numerics", "--check", "--timeout", SECONDS, "--report", report
    )
    assert result.returncode == 1
    modules = {Path(m["path"]).name: m for m in json.loads(report.read_text())["modules"]}
    assert modules["forever.hlo"]["numerics"] == {"ok": False, "error": expired(forever)}
    assert modules["quick.hlo"]["numerics"]["ok"] is True


@pytest.mark.slow
def test_the_python_api_stops_an_endless_loop_and_leaves_no_process() -> None:
    before = children()
    with pytest.raises(XlaCrash) as caught:
        hloopt.execute(FOREVER, timeout=SECONDS)
    assert str(caught.value) == expired("module")
    with pytest.raises(XlaCrash, match=f"worker timed out after {SECONDS} s"):
        hloopt.compare(FOREVER, FOREVER, timeout=SECONDS)
    assert children() == before


@pytest.mark.slow  # an endless loop: SECONDS s of a core; the fast tier has exec's and the API's
def test_a_pool_goes_on_after_a_timeout() -> None:
    with hloopt.IsolatedPool(1) as pool:
        with pytest.raises(XlaCrash):
            hloopt.execute(FOREVER, timeout=SECONDS, pool=pool)
        (negated,) = hloopt.execute(QUICK, [np.ones(2, np.float32)], pool=pool, timeout=SECONDS * 10)
    assert negated.tolist() == [-1, -1]


@pytest.mark.slow
def test_zero_is_no_limit_and_a_negative_timeout_is_refused(tmp_path: Path) -> None:
    assert limit(0) is None and limit(None) is None and limit(2.5) == 2.5
    with pytest.raises(HloError, match="not -1"):
        limit(-1)
    path = tmp_path / "quick.hlo"
    path.write_text(QUICK)
    result, _ = hloopt_cli("exec", path, "--timeout", 0)
    assert result.returncode == 0, result.stderr
    result, _ = hloopt_cli("exec", path, "--timeout", -1)
    assert result.returncode == 2 and "--timeout" in result.stderr


@pytest.mark.parametrize("command", [["run"], ["exec"], ["compare"]])
def test_every_command_that_runs_xla_says_its_default(command: list[str]) -> None:
    result, _ = hloopt_cli(*command, "--help")
    assert result.returncode == 0
    assert "--timeout SECONDS" in result.stdout
    assert f"[default: {DEFAULT_TIMEOUT:g}; x>=0]" in result.stdout
