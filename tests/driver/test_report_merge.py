"""``hloopt report merge``: the shards' reports are the whole run's report, or a clear refusal (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from cli_invoke import invoke
from hlo_text import hlo

from hloopt.cli.main import main

PLAIN = hlo("""
    HloModule m
    ENTRY e {
      ROOT p = f32[2] parameter(0)
    }
    """)
BF16 = hlo("""
    HloModule half
    ENTRY e {
      p = bf16[2] parameter(0)
      ROOT n = bf16[2] negate(p)
    }
    """)
BAD = "HloModule bad\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """10 files, one of them two chunks, one malformed: 11 modules."""
    root = tmp_path / "in"
    (root / "deep").mkdir(parents=True)
    for i in range(8):
        (root / ("deep" if i % 2 else "") / f"m{i}.hlo").write_text(BF16 if i % 3 else PLAIN)
    (root / "deep" / "two.hlo").write_text(PLAIN + "// -----\n" + BF16)
    (root / "deep" / "bad.hlo").write_text(BAD)
    return root


RUN = ("--passes", "all", "--check", "--split-input-file", "-j", "1")


def shards(tree: Path, count: int, *extra: str, name: str = "shard") -> list[Path]:
    """The reports of a run in `count` shards, `name`-K-of-N.json."""
    paths = []
    for k in range(1, count + 1):
        path = tree.parent / f"{name}-{k}-of-{count}.json"
        invoke("run", tree, *RUN, *extra, "--shard", f"{k}/{count}", "--report", path)
        paths.append(path)
    return paths


def without_times(report: dict[str, Any]) -> dict[str, Any]:
    return {
        **report,
        "seconds": None,
        "modules": [{**module, "seconds": None} for module in report["modules"]],
    }


@pytest.mark.slow
def test_the_merged_shards_are_the_whole_run(tree: Path, tmp_path: Path) -> None:
    whole = invoke("run", tree, *RUN, "--report", tmp_path / "whole.json")
    merged = invoke("report", "merge", *shards(tree, 3), "-o", tmp_path / "merged.json")
    assert whole.exit_code == merged.exit_code == 1  # bad.hlo failed (and modules would change)
    expected = json.loads((tmp_path / "whole.json").read_text())
    data = json.loads((tmp_path / "merged.json").read_text())
    assert without_times(data) == without_times(expected)
    assert data["summary"] == {"processed": 11, "changed": 6, "unchanged": 4, "failed": 1, "skipped": 0}
    assert [(m["chunk"]["index"], m["chunk"]["line"]) for m in data["modules"] if m["path"].endswith("two.hlo")] == [
        (1, 1),
        (2, 6),
    ]
    strip = [line.rpartition(" (")[0] if " processed," in line else line for line in merged.stderr.splitlines()]
    assert strip == [line.rpartition(" (")[0] if " processed," in line else line for line in whole.stderr.splitlines()]


@pytest.mark.slow
def test_all_fine_is_exit_0_and_stdout_without_o(tree: Path) -> None:
    (tree / "deep" / "bad.hlo").unlink()
    paths = []
    for k in (1, 2):
        paths.append(tree.parent / f"r{k}.json")
        out = tree.parent / "out"
        invoke(
            "run", tree, "--split-input-file", "--passes", "all", "-o", out, "--shard", f"{k}/2", "--report", paths[-1]
        )
    merged = invoke("report", "merge", *paths)
    assert merged.exit_code == 0, merged.stderr
    assert json.loads(merged.stdout)["summary"]["failed"] == 0


def rewrite(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.slow  # CI runs it; the fast tier keeps the merge of real shards
def test_reports_that_are_not_the_shards_of_one_run_are_refused(tree: Path, tmp_path: Path) -> None:
    r1, r2, r3 = shards(tree, 3)
    halves = shards(tree, 2)
    other = shards(tree, 2, "--numerics", "neuron", name="neuron")
    out = tmp_path / "merged.json"
    cases = [
        ([r1, r2], "shard 3/3 missing: its modules are in no report given"),
        ([r1, r2, r2], f"{r2} and {r2}: both are shard 2/3"),
        ([r1, r2, halves[1]], f"{halves[1]}: is a shard of 2, {r1} of 3"),
        ([other[0], r2], f"{r2}: not a shard of the run {other[0]} is from, its options differ: "),
    ]
    for paths, message in cases:
        result = invoke("report", "merge", *paths, "-o", out)
        assert result.exit_code == 2 and result.stderr.startswith(f"hloopt: error: {message}"), result.stderr
    assert "numerics 'neuron' in" in invoke("report", "merge", other[0], r2).stderr
    rewrite(r3, lambda data: data["modules"].append(json.loads(r1.read_text())["modules"][0]))
    overlap = invoke("report", "merge", r1, r2, r3, "-o", out)
    first = json.loads(r1.read_text())["modules"][0]
    assert overlap.exit_code == 2 and f"{r1} and {r3}: both list {first['path']}:1 (chunk 1)" in overlap.stderr
    rewrite(r3, lambda data: data.update(input="elsewhere"))
    assert "its input differ: " in invoke("report", "merge", r1, r2, r3).stderr
    whole = tmp_path / "whole.json"
    invoke("run", tree, *RUN, "--report", whole)
    unsharded = invoke("report", "merge", whole)
    assert unsharded.exit_code == 2 and "not the report of a shard (its run had no --shard K/N)" in unsharded.stderr
    assert not out.exists()


def test_a_file_that_is_no_report_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"input": "in",\n "modules": [}\n')
    result = invoke("report", "merge", broken)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"hloopt: error: {broken}:2:14: expected a JSON report: Expecting value",
        '   "modules": [}',
        "               ^",
    ]
    other = tmp_path / "other.json"
    other.write_text('{"modules": []}')
    result = invoke("report", "merge", other)
    assert result.exit_code == 2
    assert f"{other}: not a report of `hloopt run --report` (no input, options, shard, summary, seconds)" in (
        result.stderr
    )


def test_the_output_is_checked_first_and_never_an_input(tree: Path, tmp_path: Path) -> None:
    paths = shards(tree, 2)
    before = paths[0].read_text()
    refused = invoke("report", "merge", *paths, "-o", paths[0])
    assert refused.exit_code == 2 and "is one of the reports being merged" in refused.stderr
    assert paths[0].read_text() == before
    (tmp_path / "FILE").write_text("a file\n")
    blocked = invoke("report", "merge", tmp_path / "missing.json", "-o", tmp_path / "FILE" / "r.json")
    assert blocked.exit_code == 2 and "FILE is a file, not a directory" in blocked.stderr  # before reading


def test_the_lazy_summary_is_the_groups_own_help() -> None:
    assert isinstance(main, click.Group)
    command = main.get_command(click.Context(main), "report")
    assert command is not None and command.help == main.lazy["report"][1]
