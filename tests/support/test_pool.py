"""hloopt.support.pool without XLA: what a call's outcome is when it cannot come home, and a worker that
cannot start saying why."""

from __future__ import annotations

import os
import threading

from processes import children

from hloopt.support.pool import Bug, Crash, WorkerPool


def test_a_result_that_does_not_pickle_is_a_bug_and_the_worker_stays() -> None:
    before = children()
    with WorkerPool() as pool:
        worker = pool.call(os.getpid, ())
        lost = pool.call(threading.Lock, ())
        assert isinstance(lost, Bug) and "cannot pickle '_thread.lock' object" in lost.traceback
        assert pool.call(os.getpid, ()) == worker
    assert children() == before


def test_a_worker_that_cannot_start_says_why() -> None:
    """Its interpreter's last line of stderr (here an import of `preload` that fails) is the crash's cause."""
    with WorkerPool(preload=("hloopt_no_such_module",)) as pool:
        crash = pool.call(os.getpid, ())
    assert crash == Crash(
        "start", "", "worker exited with code 1", ("ModuleNotFoundError: No module named 'hloopt_no_such_module'",)
    )


def test_calls_run_in_as_many_workers_as_asked_and_come_home_in_order() -> None:
    with WorkerPool(3) as pool:
        pids = pool.map(os.getpid, [()] * 30)
        assert len(set(pids)) <= 3
        assert pool.map(int, [(str(n),) for n in range(30)]) == list(range(30))
