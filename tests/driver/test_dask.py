"""Batches on a `concurrent.futures.Executor`: a Dask LocalCluster of 2 worker processes, a process pool and
a thread pool each give the local batch's report and outputs, module by module, a module that kills its
worker included; the modules in flight stay within the window.

Needs dask.distributed (``pip install 'hloopt[dask]'``): skipped without it, unless HLOOPT_REQUIRE_SHARED=1
(CI installs the extra, so there it fails instead).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from batch_children import kills_on

import hloopt.batch
from hloopt.driver import batch, flow
from hloopt.driver.batch import BatchOptions
from hloopt.driver.flow import FileOptions, Job
from hloopt.support import pool

if TYPE_CHECKING:
    from distributed import Client

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLAIN = "HloModule plain\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"
BAD = "HloModule m\nENTRY e {\n  ROOT b = f32[] add(x, y)\n}\n"


def _install_killer() -> None:
    """On each Dask worker (`Client.run`) or process pool worker: the pool workers it starts for its files
    die on boom.hlo, as on a segfault in XLA or the OOM killer."""
    pool.PROGRAM = kills_on("boom.hlo")


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        reason = "needs dask.distributed: pip install 'hloopt[dask]'"
        if os.environ.get("HLOOPT_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " — HLOOPT_REQUIRE_SHARED=1 (CI) makes it required")
        pytest.skip(reason)
    # No dashboard, and the scheduler's HTTP server on a free port rather than 8787 (another run may hold it).
    quiet = {"dashboard": False, "dashboard_address": ":0"}
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, scheduler_kwargs=quiet) as cluster,
        Client(cluster) as connected,
    ):
        connected.run(_install_killer)
        yield connected


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """in/ (relative to the current directory, which the workers do not share): modules the passes change,
    one already canonical, a malformed one, and boom.hlo, which kills the process that processes it."""
    monkeypatch.chdir(tmp_path)
    root = Path("in")
    (root / "deep").mkdir(parents=True)
    (root / "int8_matmul.hlo").write_text((EXAMPLES / "int8_matmul.hlo").read_text())
    (root / "deep" / "bn.hlo").write_text((EXAMPLES / "bf16_conv_batchnorm_train.hlo").read_text())
    (root / "deep" / "plain.hlo").write_text(PLAIN)
    (root / "canonical.hlo").write_text(flow.process_file(Job(str(root / "deep" / "plain.hlo")), FileOptions()).text)
    (root / "deep" / "bad.hlo").write_text(BAD)
    (root / "deep" / "boom.hlo").write_text(PLAIN)
    return root


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without its timings, and each output named below its run's output directory."""
    out = Path(report["options"]["output_dir"])
    modules = [
        {**m, "seconds": None, "output": m["output"] and Path(m["output"]).relative_to(out).as_posix()}
        for m in report["modules"]
    ]
    return {**report, "seconds": None, "options": {**report["options"], "output_dir": None}, "modules": modules}


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def options(out: str, **file: Any) -> BatchOptions:
    return BatchOptions(FileOptions(passes="all", output=out, **file), jobs=2)


@pytest.fixture
def local(tree: Path) -> dict[str, Any]:
    """The batch in local child processes, which die on boom.hlo."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pool, "PROGRAM", kills_on("boom.hlo"))
        report = batch.run([str(tree)], options("out-local")).to_dict()
    assert report["summary"] == {"processed": 6, "changed": 2, "unchanged": 2, "failed": 2, "skipped": 0}
    (boom,) = [m for m in report["modules"] if m["path"].endswith("boom.hlo")]
    assert boom["error"]["message"] == (
        "in/deep/boom.hlo: the worker process died while processing this file (crash or out of memory)"
    )
    return comparable(report)


@pytest.mark.slow
def test_dask_batch_equals_the_local_one(client: Client, tree: Path, local: dict[str, Any]) -> None:
    workers = client.run(os.getpid)
    seen: list[str] = []
    executor = client.get_executor()
    done = hloopt.batch.run([str(tree)], options("out-dask"), executor=executor, advance=lambda f: seen.append(f.path))
    assert comparable(done.to_dict()) == local
    assert snapshot(Path("out-dask")) == snapshot(Path("out-local"))
    assert sorted(seen) == sorted(m["path"] for m in local["modules"])
    assert client.run(os.getpid) == workers  # boom.hlo killed a child of its worker, never the worker


@pytest.mark.slow
def test_verify_numerics_on_dask_equals_the_local_one(client: Client, tree: Path) -> None:
    """--verify-numerics compares each file in the process that processed it (a child of a Dask worker,
    or a local pool worker): the comparisons and the report are the local ones, boom.hlo included."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pool, "PROGRAM", kills_on("boom.hlo"))
        local = comparable(batch.run([str(tree)], options("out-local", verify_numerics=True, per_pass=True)).to_dict())
    verify = options("out-dask", verify_numerics=True, per_pass=True)
    done = hloopt.batch.run([str(tree)], verify, executor=client.get_executor())
    assert comparable(done.to_dict()) == local
    compared = {Path(m["path"]).name: m["numerics"] for m in local["modules"] if m["numerics"] is not None}
    assert sorted(compared) == ["bn.hlo", "int8_matmul.hlo"]  # the changed modules, and only they
    assert all(numerics["per_pass"] for numerics in compared.values())
    assert all(m.texts is None and not m.stages for m in done.modules)  # no module text came home


@pytest.mark.slow
def test_dask_from_the_command_line(client: Client, tree: Path, local: dict[str, Any]) -> None:
    assert client.scheduler is not None and client.scheduler.address is not None
    args = ["run", str(tree), "--passes", "all", "-o", "out-cli", "--report", "r.json"]
    result = subprocess.run(
        [sys.executable, "-m", "hloopt", *args, "--dask-scheduler", client.scheduler.address],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr  # two modules failed
    assert "hloopt: 6 processed, 2 changed, 2 unchanged, 2 failed" in result.stderr
    assert "hloopt: error: in/deep/boom.hlo: the worker process died while processing" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    report = comparable(json.loads(Path("r.json").read_text()))
    assert report == {**local, "options": {**local["options"], "output_dir": None}}
    assert snapshot(Path("out-cli")) == snapshot(Path("out-local"))


@pytest.mark.slow
def test_a_process_pool_and_a_thread_pool(tree: Path, local: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "PROGRAM", kills_on("boom.hlo"))  # the thread pool's pool workers
    context = multiprocessing.get_context("spawn")  # this process may hold jax: never fork it
    with (
        ProcessPoolExecutor(2, mp_context=context, initializer=_install_killer) as processes,
        ThreadPoolExecutor(2) as threads,
    ):
        for name, executor in (("processes", processes), ("threads", threads)):
            done = batch.run([str(tree)], options(f"out-{name}"), executor=executor)
            assert comparable(done.to_dict()) == local, name
            assert snapshot(Path(f"out-{name}")) == snapshot(Path("out-local")), name
        assert processes.submit(int, 7).result() == 7  # boom.hlo did not break the pool


class Counting(Executor):
    """A thread pool that records the most tasks it was given and had not finished at once."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(2)
        self._lock = threading.Lock()
        self.outstanding = self.most = self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            self.outstanding += 1
            self.submitted += 1
            self.most = max(self.most, self.outstanding)
        future = self._pool.submit(fn, *args, **kwargs)
        future.add_done_callback(lambda _: self._finished())
        return future

    def _finished(self) -> None:
        with self._lock:
            self.outstanding -= 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait, cancel_futures=cancel_futures)


def test_the_modules_in_flight_stay_within_the_window(tmp_path: Path) -> None:
    for index in range(12):
        (tmp_path / f"m{index:02d}.hlo").write_text(PLAIN)
    with Counting() as executor:
        done = batch.run([str(tmp_path)], FileOptions(check=True), executor=executor, max_in_flight=3)
    assert executor.submitted == 12 and executor.most == 3
    assert [m.status for m in done.modules] == ["changed"] * 12


def test_an_executor_that_loses_its_tasks(tree: Path) -> None:
    """Each module of a broken or shut-down executor is a failure saying so, not the batch's."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as broken:
        os.kill(broken.submit(os.getpid).result(), signal.SIGKILL)
        lost = batch.run([str(tree)], FileOptions(check=True), executor=broken)
    assert {m.error["message"] for m in lost.modules if m.error} == {
        f"{m.path}: the worker process died while processing this file (crash or out of memory)" for m in lost.modules
    }
    threads = ThreadPoolExecutor(1)
    threads.shutdown()
    lost = batch.run([str(tree)], FileOptions(check=True), executor=threads)
    assert [m.error and m.error["message"] for m in lost.modules] == [
        f"{m.path}: the executor lost this file: RuntimeError: cannot schedule new futures after shutdown"
        for m in lost.modules
    ]


def test_a_worker_that_cannot_reach_the_batch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers work in the batch's directory; one they cannot enter (no shared filesystem) is each file's error."""
    for name in ("a.hlo", "b.hlo"):
        (tmp_path / name).write_text(PLAIN)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    with ThreadPoolExecutor(1) as executor:  # one file at a time: b.hlo is sent once gone/ is removed
        done = batch.run(
            [str(tmp_path / "a.hlo"), str(tmp_path / "b.hlo")],
            FileOptions(check=True),
            executor=executor,
            max_in_flight=1,
            advance=lambda _: gone.rmdir() if gone.exists() else None,
        )
    assert [m.status for m in done.modules] == ["changed", "failed"]
    assert done.modules[1].error == {
        "message": f"{tmp_path}/b.hlo: this worker cannot reach the batch's directory {gone} (No such file or "
        "directory); an executor's workers need the filesystem the batch was started on"
    }


def test_dask_scheduler_refused_with_a_lone_file_and_without_dask(tree: Path) -> None:
    lone = subprocess.run(
        [sys.executable, "-m", "hloopt", "run", tree / "deep" / "plain.hlo", "--dask-scheduler", "tcp://x:1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lone.returncode == 2 and "--dask-scheduler only applies to a directory INPUT" in lone.stderr
    # As if the extra were not installed: importing distributed fails.
    no_dask = "import sys; sys.modules['distributed'] = None; from hloopt.cli.main import main; main()"
    missing = subprocess.run(
        [sys.executable, "-c", no_dask, "run", tree, "-o", "out", "--dask-scheduler", "tcp://127.0.0.1:1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr == "hloopt: error: --dask-scheduler needs the optional extra: pip install 'hloopt[dask]'\n"
    assert not Path("out").exists()


def test_the_public_module_imports_no_dask() -> None:
    """``hloopt.batch`` is the driver's batch under a public name; the caller brings the executor (and dask)."""
    assert hloopt.batch.run is batch.run and hloopt.batch.BatchOptions is BatchOptions
    assert hloopt.batch.FileOptions is FileOptions
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import hloopt.batch"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "hloopt.driver.batch" in rows
    assert sorted(row for row in rows if row.partition(".")[0] in ("dask", "distributed")) == []
