"""hloopt.support.pool without XLA: what a call's outcome is when it cannot come home, and a worker that
cannot start saying why."""

from __future__ import annotations

import os
import threading
import time

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


def test_a_worker_dying_of_a_signal_is_said_to_die_of_it_whoever_ends_it() -> None:
    """jaxlib's abort handler can spend long symbolising the stack after its `*** SIGSEGV` line, so the
    pool kills the worker then; the crash names the signal it was dying of either way, not the kill."""
    dying = "import os, time; os.write(2, b'*** SIGSEGV received at time=1 on cpu 0 ***\\n'); time.sleep(600)"
    with WorkerPool() as pool:
        started = time.monotonic()
        crash = pool.call(exec, (dying,))
        assert time.monotonic() - started < 60
        assert isinstance(crash, Crash) and crash.how == "worker died with SIGSEGV", crash
        aborted = pool.call(exec, ("import os; os.abort()",))
        assert isinstance(aborted, Crash) and aborted.how == "worker died with SIGABRT", aborted
        assert pool.call(int, ("7",)) == 7


def test_a_pool_starts_as_many_workers_as_asked_and_a_map_the_rest() -> None:
    """`start(1)` for a caller that may have a single call: the second worker (a jax import in XLA's pools)
    starts only when a second call runs beside the first."""
    before = children()
    with WorkerPool(2) as pool:
        pool.start(1)
        assert len(children() - before) == 1
        assert pool.call(int, ("3",)) == 3
        assert len(children() - before) == 1
        assert pool.map(exec, [("import time; time.sleep(0.5)",)] * 2) == [None, None]
        assert len(children() - before) == 2
    assert children() == before
