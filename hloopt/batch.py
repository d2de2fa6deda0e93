"""Batches from Python: ``hloopt.batch.run(["dumps/"], FileOptions(passes="all", output="out"))``, and on a
Dask cluster (or any `concurrent.futures.Executor`) with ``executor=client.get_executor()``. The batch's own
options (globs, jobs, report, shard) wrap the file options: ``BatchOptions(FileOptions(...), jobs=4)``.

A thin public name for `hloopt.driver.batch`; it imports no dask (the caller brings the executor).
"""

from __future__ import annotations

from hloopt.driver.batch import BatchOptions, BatchReport, Shard, Skipped, plan, run
from hloopt.driver.flow import FileOptions, FileResult, ModuleResult

__all__ = [
    "BatchOptions",
    "BatchReport",
    "FileOptions",
    "FileResult",
    "ModuleResult",
    "Shard",
    "Skipped",
    "plan",
    "run",
]
