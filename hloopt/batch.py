"""Batches from Python: ``hloopt.batch.run(["dumps/"], RunOptions(passes="all", output="out"))``, and on a
Dask cluster (or any `concurrent.futures.Executor`) with ``executor=client.get_executor()``.

A thin public name for `hloopt.driver.batch`; it imports no dask (the caller brings the executor).
"""

from __future__ import annotations

from hloopt.driver.batch import BatchReport, Shard, Skipped, plan, run
from hloopt.driver.flow import FileResult, ModuleResult, RunOptions

__all__ = ["BatchReport", "FileResult", "ModuleResult", "RunOptions", "Shard", "Skipped", "plan", "run"]
