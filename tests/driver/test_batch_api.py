"""hloopt.driver.batch from Python: discovery, a worker process that dies, --verify-numerics over a directory."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

import pytest
from batch_children import REAL, kills_on, slow_to_rename
from processes import alive, children, wait_for

from hloopt.driver import batch
from hloopt.driver.batch import discover, run_batch
from hloopt.driver.flow import FileOptions, FileResult, Job, ModuleResult, process_file
from hloopt.support import pool

PLAIN = """\
HloModule plain
ENTRY e {
  ROOT p = f32[2] parameter(0)
}
"""
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_discover_is_sorted_recursive_and_right_anchored(tmp_path: Path) -> None:
    for name in ("b.hlo", "a/z.txt", "a/b/c.hlo", "a/skip.md", ".hidden/x.hlo", "out/o.hlo"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(PLAIN)
    found = [str(job.relative) for job in discover(tmp_path, exclude=tmp_path / "out")]
    assert found == [".hidden/x.hlo", "a/b/c.hlo", "a/z.txt", "b.hlo"]
    assert [str(j.relative) for j in discover(tmp_path, ("a/*.txt", "b/*.hlo"))] == ["a/b/c.hlo", "a/z.txt"]


def modules(files: list[FileResult]) -> list[ModuleResult]:
    return [module for file in files for module in file.modules]


@pytest.mark.parametrize("count", [12, 60])
def test_a_dying_worker_costs_only_its_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """The worker that dies is replaced; the files after the one it died on go to the new one."""
    names = [f"m{i:02d}.hlo" for i in range(count)]
    names.insert(7, "boom.hlo")
    for name in names:
        (tmp_path / name).write_text(PLAIN)
    out = tmp_path / "out"
    monkeypatch.setattr(pool, "PROGRAM", kills_on("boom.hlo"))
    before = children()
    results = modules(run_batch(discover(tmp_path), FileOptions(output=str(out)), workers=2))
    assert [Path(r.path).name for r in results] == sorted(names)
    by_name = {Path(r.path).name: r for r in results}
    assert by_name["boom.hlo"].status == "failed"
    assert by_name["boom.hlo"].error == {
        "message": f"{tmp_path}/boom.hlo: the worker process died while processing this file (crash or out of memory)"
    }
    assert all(r.status == "changed" for name, r in by_name.items() if name != "boom.hlo")  # made canonical
    assert sorted(p.name for p in out.iterdir()) == sorted(n for n in names if n != "boom.hlo")
    assert children() == before  # every worker, the dead one's successor too, ended with the batch


def test_a_batch_stopped_mid_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (here raised as the first file comes home) ends the workers: the one caught between
    writing its temporary file and renaming it removes the file, and the call returns at once."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    for name in ("fast.hlo", "slow.hlo"):
        (src / name).write_text(PLAIN)
    monkeypatch.setattr(pool, "PROGRAM", slow_to_rename("slow.hlo", 60))
    before = children()

    def interrupt(result: FileResult) -> None:
        deadline = time.monotonic() + 30
        while not any(p.name.startswith(".slow.hlo") or "slow.hlo." in p.name for p in out.iterdir()):
            assert time.monotonic() < deadline, "the slow worker never wrote its temporary file"
            time.sleep(0.05)
        raise KeyboardInterrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_batch(discover(src), FileOptions(output=str(out)), workers=2, advance=interrupt)
    assert time.monotonic() - start < 30
    assert [p.name for p in out.iterdir()] == ["fast.hlo"]
    assert children() == before


@pytest.mark.slow
def test_idle_workers_end_at_once_however_the_signal_lands(tmp_path: Path) -> None:
    """The batch ends its workers as soon as the last file is home, while each may be on its way back to
    read the next request: SIGTERM must end it there too, never leave the call waiting on it (the
    workers' numpy threads are started by then, so the signal may land on any thread)."""
    for name in ("a.hlo", "b.hlo"):
        (tmp_path / name).write_text((EXAMPLES / "fp8_mlp.hlo").read_text())  # constants: numpy's threads start
    before = children()
    home: list[float] = []  # when each file came home
    slowest = 0.0
    for _ in range(12):
        run_batch(
            discover(tmp_path),
            FileOptions(passes="all", check=True),
            workers=2,
            advance=lambda _: home.append(time.monotonic()),
        )
        slowest = max(slowest, time.monotonic() - home[-1])  # from the last file home to the batch's return
    assert slowest < pool.TERMINATION_SECONDS  # no worker had to be killed after waiting for it
    assert children() == before


def test_internal_errors_are_reported_per_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (not an HloError) in one module is that module's failure, named as an internal error."""
    (tmp_path / "a.hlo").write_text(PLAIN)

    broken = (
        "import hloopt.passes.pipeline\n"
        "def broken(*args, **kwargs):\n"
        "    raise RecursionError('maximum recursion depth exceeded')\n"
        "hloopt.passes.pipeline.run_pipeline = broken\n"
    )
    monkeypatch.setattr(pool, "PROGRAM", broken + REAL)  # in the worker that processes the file
    job = Job(str(tmp_path / "a.hlo"), PurePosixPath("a.hlo"))
    (result,) = modules(run_batch([job], FileOptions(passes="all"), workers=1))
    assert result.status == "failed"
    assert result.error == {
        "message": f"{tmp_path}/a.hlo: internal error: RecursionError: maximum recursion depth exceeded"
    }
    assert result.exception is None  # a batch member sends home only what the report needs


def test_a_batch_sends_no_text_home_without_verify_numerics(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(PLAIN)  # not canonical: printing it changes it
    (tmp_path / "b.hlo").write_text(process_file(Job(str(tmp_path / "a.hlo")), FileOptions()).text)
    results = modules(run_batch(discover(tmp_path), FileOptions(check=True), workers=1))
    assert [(r.status, r.texts, r.numerics) for r in results] == [("changed", None, None), ("unchanged", None, None)]


@pytest.mark.parametrize("workers", [1, 2], ids=["in 1 worker process", "in 2 worker processes"])
def test_verify_numerics_compares_each_file_where_it_was_processed(tmp_path: Path, workers: int) -> None:
    """Each file comes home compared already, as `advance` sees it, with no module text or --per-pass
    stage: the parent never holds the texts, so its memory does not grow with the changed modules, and
    it is left with no XLA process of its own."""
    (tmp_path / "int8_matmul.hlo").write_text((EXAMPLES / "int8_matmul.hlo").read_text())
    (tmp_path / "plain.hlo").write_text(PLAIN)  # the passes do not change it: nothing to compare
    (tmp_path / "split.hlo").write_text(f"{(EXAMPLES / 'int8_matmul.hlo').read_text()}// -----\n{PLAIN}")
    before = children()
    seen: dict[str, list[tuple[str, bool, bool]]] = {}

    def advance(file: FileResult) -> None:
        seen[Path(file.path).name] = [
            (m.status, m.numerics is not None, m.texts is None and not m.stages) for m in file.modules
        ]

    options = FileOptions(passes="all", check=True, verify_numerics=True, per_pass=True, split_input_file=True)
    results = modules(run_batch(discover(tmp_path), options, workers=workers, advance=advance))
    assert seen == {
        "int8_matmul.hlo": [("changed", True, True)],
        "plain.hlo": [("unchanged", False, True)],
        "split.hlo": [("changed", True, True), ("unchanged", False, True)],
    }
    compared = [r.numerics for r in results if r.numerics is not None]
    assert len(compared) == 2 and compared[0] == compared[1]  # the same module, alone and as a chunk
    assert compared[0]["ok"] is True
    assert [row["name"] for row in compared[0]["per_pass"]] == ["upcast-all-to-fp32", "neuron-int-matmul-downcast"]
    assert batch._COMPARISONS is None and children() == before


#: Kills XLA's CPU compiler (SIGSEGV on a complex remainder) in every jaxlib from 0.10 to 0.12; spaced so that
#: printing it changes it, and --verify-numerics compares it.
CRASHES_XLA = """HloModule crashes_xla
ENTRY main {
  a  =  c64[2] constant({(1, 2), (3, 4)})
  ROOT r = c64[2] remainder(a, a)
}
"""


@pytest.mark.slow
def test_a_comparison_that_crashes_xla_costs_only_its_module(tmp_path: Path) -> None:
    """The worker's XLA process dies on the first module's comparison: that module's numerics say so, and the
    next module is compared by a fresh XLA process of the same pool."""
    (tmp_path / "a_crash.hlo").write_text(CRASHES_XLA)
    spaced = (EXAMPLES / "int8_matmul.hlo").read_text().replace(" = ", "  =  ")  # so that printing it changes it
    (tmp_path / "b_int8_matmul.hlo").write_text(spaced)
    options = FileOptions(check=True, verify_numerics=True)
    crashed, compared = modules(run_batch(discover(tmp_path), options, workers=1))
    assert crashed.status == "changed" and crashed.numerics is not None
    assert crashed.numerics["ok"] is False
    assert crashed.numerics["error"].startswith(
        f"{tmp_path / 'a_crash.hlo'}: XLA compile failed: worker died with SIG"
    )  # the report names the module
    assert compared.numerics is not None and compared.numerics["ok"] is True


def test_a_batch_worker_s_xla_processes_end_with_it() -> None:
    """A batch worker keeps its XLA worker until it exits, however it exits: the XLA worker sees its parent
    gone and ends, so none is left behind."""
    program = (
        "import os\n"
        "from hloopt.driver import batch\n"
        "(xla_worker,) = batch._comparisons().map(os.getpid, [()])\n"
        "print(xla_worker, flush=True)\n"
        "os._exit(0)\n"  # as a worker killed: nothing cleaned up
    )
    result = subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, text=True, timeout=300)
    started = int(result.stdout)
    wait_for(lambda: not alive(started), "the XLA worker outlived its batch worker", 30)


@pytest.mark.slow
def test_verify_numerics_over_a_directory(tmp_path: Path) -> None:
    """Changed modules are run before and after through XLA; the report holds each comparison.

    The fp8 MLP really does move beyond tolerance when upcast (examples/README.md); int8 matmul does not.
    """
    src = tmp_path / "in"
    src.mkdir()
    for name in ("fp8_bf16_mlp.hlo", "int8_matmul.hlo"):
        (src / name).write_text((EXAMPLES / name).read_text())
    (src / "plain.hlo").write_text(PLAIN)
    report = tmp_path / "r.json"
    args = ["run", str(src), "--passes", "all", "--check", "--verify-numerics", "--report", str(report)]
    result = subprocess.run(
        [sys.executable, "-m", "hloopt", *args], check=False, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 1, result.stderr
    modules = {Path(m["path"]).name: m for m in json.loads(report.read_text())["modules"]}
    assert modules["plain.hlo"]["numerics"] is None  # unchanged: nothing to compare
    assert modules["int8_matmul.hlo"]["numerics"]["ok"] is True
    over = modules["fp8_bf16_mlp.hlo"]["numerics"]
    assert over["ok"] is False and over["outputs"][0]["max_abs_err"] > 0.001
    assert f"hloopt: numerics: {src}/fp8_bf16_mlp.hlo: outputs differ beyond tolerance" in result.stderr
    assert "int8_matmul.hlo: outputs" not in result.stderr


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("failing", ["Popen", "the second pipe"])
def test_a_worker_that_cannot_start_leaves_no_descriptor_open(monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """Out of descriptors or processes, starting a worker fails with its error, every pipe end closed."""
    out_of_resources = OSError(errno.EMFILE, "Too many open files")
    if failing == "Popen":

        def popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
            raise out_of_resources

        monkeypatch.setattr(pool.subprocess, "Popen", popen)
    else:
        real_pipe, made = os.pipe, []

        def pipe() -> tuple[int, int]:
            if made:
                raise out_of_resources
            made.extend(real_pipe())
            return made[0], made[1]

        monkeypatch.setattr(pool.os, "pipe", pipe)
    before = _open_fds()
    with pytest.raises(OSError) as caught:
        pool.WorkerPool().call(os.getpid, ())
    assert caught.value is out_of_resources
    monkeypatch.undo()
    assert _open_fds() == before
