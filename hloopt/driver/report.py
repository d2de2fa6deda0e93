"""The JSON report of a batch (``--report``): its summary and verdict, and merging the reports of shards.

A report holds ``input`` (the INPUT, or the list of INPUTs), ``options`` (those that decide the
results), ``shard`` (``{"index", "count"}``, or null for a whole run), ``summary``, ``seconds``,
``modules`` (one entry per module, a split file's chunks each with its ``chunk``, ``{"index",
"line"}``) and ``skipped`` (the files found that are not modules, ``{"path", "reason"}``). The
summary lines and the exit code are computed from this form, for a run and for a merge of its
shards alike, so the two cannot say different things.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from hloopt.driver.chunks import Place, label
from hloopt.errors import HloError, parse_error_at
from hloopt.support.fileio import read_text

Report = dict[str, Any]
#: What every report has; `merge` refuses a file without them.
_KEYS = ("input", "options", "shard", "summary", "seconds", "modules")


def summarise(modules: Sequence[Mapping[str, Any]], skipped: Sequence[Mapping[str, Any]] = ()) -> dict[str, int]:
    """The counts of the summary line and of ``summary``; `skipped` are the files found that are not modules."""
    statuses = [module["status"] for module in modules]
    return {
        "processed": len(statuses),
        "changed": statuses.count("changed"),
        "unchanged": statuses.count("unchanged"),
        "failed": statuses.count("failed"),
        "skipped": len(skipped),
    }


def _numerics_failed(module: Mapping[str, Any]) -> bool:
    return module["numerics"] is not None and not module["numerics"].get("ok")


def _label(module: Mapping[str, Any]) -> str:
    chunk = module["chunk"]
    return label(module["path"], None if chunk is None else Place(chunk["index"], chunk["line"]))


def report_ok(report: Mapping[str, Any]) -> bool:
    """No module failed or is over tolerance, and with --check none would change: exit 0."""
    check = report["options"]["check"]
    return not any(
        m["status"] == "failed" or _numerics_failed(m) or (check and m["status"] == "changed")
        for m in report["modules"]
    )


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """The tally, each module --check would change, then each failure's located message (once: a file's
    chunks share a write error)."""
    counts, modules = report["summary"], report["modules"]
    changed = "would change" if report["options"]["check"] else "changed"
    shard = report["shard"]
    prefix = "" if shard is None else f"shard {shard['index']}/{shard['count']}: "
    skipped = f", {counts['skipped']} skipped (not modules)" if counts.get("skipped") else ""
    lines = [
        f"hloopt: {prefix}{counts['processed']} processed, {counts['changed']} {changed}, "
        f"{counts['unchanged']} unchanged, {counts['failed']} failed{skipped} ({report['seconds']:.1f}s)"
    ]
    if report["options"]["check"]:  # which file to fix, as a lone file says it
        lines += [f"hloopt: {_label(m)} would change" for m in modules if m["status"] == "changed"]
    errors = (m["error"]["message"] for m in modules if m["status"] == "failed" and m["error"] is not None)
    lines += [f"hloopt: error: {message}" for message in dict.fromkeys(errors)]
    for module in filter(_numerics_failed, modules):
        why = module["numerics"].get("error") or "outputs differ beyond tolerance (see --report)"
        lines.append(f"hloopt: numerics: {_label(module)}: {why}")
    return lines


def to_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2) + "\n"


def read(path: str) -> Report:
    """A report written by ``hloopt run --report``; bad JSON is a located error."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise parse_error_at(text, err.pos, path, f"expected a JSON report: {err.msg}") from None
    missing = [key for key in _KEYS if not isinstance(data, dict) or key not in data]
    if missing or not isinstance(data["modules"], list):
        raise HloError(f"{path}: not a report of `hloopt run --report` (no {', '.join(missing) or 'module list'})")
    return data


def merge(reports: Sequence[tuple[str, Report]]) -> Report:
    """The report of the whole run, from the reports (name, report) of its shards, one per shard.

    HloError when they are not the shards of one run: a report of a whole run, a different INPUT,
    options or shard count, a shard given twice or missing, or a module in two of them.
    """
    (first_name, first), *others = reports
    for name, report in reports:
        if report["shard"] is None:
            raise HloError(f"{name}: not the report of a shard (its run had no --shard K/N)")
    for name, report in others:
        for key in ("input", "options"):
            if report[key] != first[key]:
                raise HloError(
                    f"{name}: not a shard of the run {first_name} is from, its {key} differ: "
                    f"{_difference(key, (first_name, first), (name, report))}"
                )
        if report["shard"]["count"] != first["shard"]["count"]:
            count, theirs = first["shard"]["count"], report["shard"]["count"]
            raise HloError(f"{name}: is a shard of {theirs}, {first_name} of {count}")
    count = first["shard"]["count"]
    by_index: dict[int, str] = {}
    for name, report in reports:
        index = report["shard"]["index"]
        if index in by_index:
            raise HloError(f"{by_index[index]} and {name}: both are shard {index}/{count}")
        by_index[index] = name
    missing = [str(index) for index in range(1, count + 1) if index not in by_index]
    if missing:
        raise HloError(
            f"shard {', '.join(f'{k}/{count}' for k in missing)} missing: its modules are in no report given"
        )
    seen: dict[tuple[str, int | None], str] = {}
    modules: list[dict[str, Any]] = []
    for name, report in reports:
        for module in report["modules"]:
            key = (module["path"], None if module["chunk"] is None else module["chunk"]["index"])
            if key in seen:
                raise HloError(f"{seen[key]} and {name}: both list {_label(module)}")
            seen[key] = name
            modules.append(module)
    modules.sort(key=lambda m: (PurePosixPath(m["path"]), 0 if m["chunk"] is None else m["chunk"]["index"]))
    # A report from before files were skipped has no "skipped": it skipped none.
    skipped = sorted((f for _, r in reports for f in r.get("skipped", [])), key=lambda f: PurePosixPath(f["path"]))
    return {
        "input": first["input"],
        "options": first["options"],
        "shard": None,
        "summary": summarise(modules, skipped),
        "seconds": round(sum(report["seconds"] for _, report in reports), 3),
        "modules": modules,
        "skipped": skipped,
    }


def _difference(key: str, *named: tuple[str, Report]) -> str:
    """What differs between two reports' `key` (``input``, or each option that differs)."""
    (a_name, a), (b_name, b) = named
    if key != "options":
        return f"{a[key]!r} in {a_name}, {b[key]!r} in {b_name}"
    names = sorted(set(a[key]) | set(b[key]))
    return "; ".join(
        f"{option} {a[key].get(option)!r} in {a_name}, {b[key].get(option)!r} in {b_name}"
        for option in names
        if a[key].get(option) != b[key].get(option)
    )
