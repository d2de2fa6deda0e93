"""``hloopt run --shard K/N``: stable, disjoint shards that together cover a batch; and the CI examples that use them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_invoke import invoke
from hlo_text import hlo

from hloopt.driver.batch import BatchOptions, Shard, plan
from hloopt.driver.flow import FileOptions

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "examples" / "ci"
PLAIN = hlo("""
    HloModule m
    ENTRY e {
      ROOT p = f32[2] parameter(0)
    }
    """)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """in/ with 12 modules at two depths."""
    root = tmp_path / "in"
    for i in range(12):
        path = root / ("deep" if i % 3 else "") / f"m{i:02d}.hlo"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PLAIN)
    return root


def shard_of_each(root: Path | str, count: int) -> dict[str, int]:
    """Each module's shard (by its path below `root`), as `hloopt run` picks them."""
    found: dict[str, int] = {}
    for index in range(1, count + 1):
        for job in plan([str(root)], BatchOptions(FileOptions(check=True), shard=Shard(index, count))):
            assert job.relative is not None
            assert job.relative.as_posix() not in found  # disjoint
            found[job.relative.as_posix()] = index
    return found


def test_corpus_shards_are_disjoint_cover_it_and_are_even(corpus_dir: Path) -> None:
    """`Shard.holds` is what `plan` (so ``hloopt run``) filters the batch with."""
    root = str(corpus_dir / "xla")
    jobs = plan([root], BatchOptions(FileOptions(check=True)))
    assert len(jobs) == 8058
    for count in (1, 2, 7, 16):
        shards = [[job for job in jobs if Shard(k, count).holds(job)] for k in range(1, count + 1)]
        assert sorted(job.path for shard in shards for job in shard) == sorted(job.path for job in jobs)
        mean = len(jobs) / count
        assert all(abs(len(shard) - mean) < 0.1 * mean + 10 for shard in shards), [len(s) for s in shards]
    assert plan([root], BatchOptions(FileOptions(check=True), shard=Shard(3, 7))) == [
        job for job in jobs if Shard(3, 7).holds(job)
    ]


def test_a_module_keeps_its_shard_wherever_the_tree_is_and_whatever_is_added(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = shard_of_each(tree, 5)
    assert len(before) == 12 and len(set(before.values())) > 1
    elsewhere = tmp_path / "checkout" / "somewhere" / "else"
    shutil.copytree(tree, elsewhere)
    assert shard_of_each(elsewhere, 5) == before
    monkeypatch.chdir(elsewhere.parent)
    assert shard_of_each("else", 5) == before  # a relative spelling
    (elsewhere / "deep" / "new.hlo").write_text(PLAIN)
    after = shard_of_each(elsewhere, 5)
    assert {path: shard for path, shard in after.items() if path != "deep/new.hlo"} == before


def test_file_inputs_shard_by_their_path_from_the_current_directory(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a CI runner names them (absolute or not), wherever its checkout is."""
    monkeypatch.chdir(tree)
    names = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*.hlo"))
    for k in (1, 2, 3):
        by_name = plan(names, BatchOptions(FileOptions(check=True), shard=Shard(k, 3)))
        absolute = plan([str(tree / name) for name in names], BatchOptions(FileOptions(check=True), shard=Shard(k, 3)))
        assert [job.path for job in by_name] == [str(Path(job.path).relative_to(tree)) for job in absolute]
    assert sum(len(plan(names, BatchOptions(FileOptions(check=True), shard=Shard(k, 3)))) for k in (1, 2, 3)) == len(
        names
    )


def test_the_cli_shards_a_directory(tree: Path, tmp_path: Path) -> None:
    seen: list[str] = []
    for k in (1, 2, 3):
        report = tmp_path / f"r{k}.json"
        result = invoke("run", tree, "--check", "--shard", f"{k}/3", "--report", report, "-j", "1")
        data = json.loads(report.read_text())
        assert result.exit_code == (1 if data["modules"] else 0)  # each module would change (made canonical)
        assert data["shard"] == {"index": k, "count": 3}
        assert f"hloopt: shard {k}/3: {len(data['modules'])} processed" in result.stderr
        seen += [m["path"] for m in data["modules"]]
    assert sorted(seen) == sorted(str(p) for p in tree.rglob("*.hlo"))


def test_an_empty_shard_is_fine(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "only.hlo").write_text(PLAIN)
    results = [invoke("run", tmp_path / "in", "--check", "--shard", f"{k}/4") for k in (1, 2, 3, 4)]
    assert sorted(r.exit_code for r in results) == [0, 0, 0, 1]
    assert sum("0 processed" in r.stderr for r in results) == 3


@pytest.mark.parametrize(
    "value, message",
    [
        ("0/4", "0/4: K counts from 1, so shards run from 1/4 to 4/4"),
        ("5/4", "5/4: K counts from 1, so shards run from 1/4 to 4/4"),
        ("1/0", "1/0: N, the number of shards, must be at least 1"),
        ("2", "expected K/N, shard K of N shards (like 1/4), found '2'"),
        ("-1/4", "expected K/N, shard K of N shards (like 1/4), found '-1/4'"),
    ],
)
def test_a_bad_shard_exits_2(tree: Path, value: str, message: str) -> None:
    result = invoke("run", tree, "--check", "--shard", value)
    assert result.exit_code == 2 and f"Invalid value for '--shard': {message}" in result.stderr, result.stderr


def test_a_shard_of_one_file_is_refused(tree: Path) -> None:
    result = invoke("run", tree / "m00.hlo", "--check", "--shard", "1/2")
    assert result.exit_code == 2 and "--shard only applies to a directory INPUT or several INPUTs" in result.stderr


# --- the examples in examples/ci, run as CI would run them ----------------------------------------


@pytest.fixture
def on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose `hloopt` is this checkout's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hloopt").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m hloopt "$@"\n')
    (bin_dir / "hloopt").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}


@pytest.mark.slow
def test_the_slurm_array_script(tree: Path, tmp_path: Path, on_path: dict[str, str]) -> None:
    script = CI / "hloopt-slurm-array.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    (tree / "deep" / "bad.hlo").write_text("HloModule bad\n")
    work = tmp_path / "work"
    work.mkdir()
    for task in (0, 1, 2):  # --array=0-2: K counts from 1 all the same
        array = {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3"}
        subprocess.run(["bash", str(script), str(tree)], cwd=work, env={**on_path, **array}, check=False, timeout=300)
    assert sorted(p.name for p in (work / "reports").iterdir()) == ["shard-1.json", "shard-2.json", "shard-3.json"]
    merged = subprocess.run(
        ["hloopt", "report", "merge", *sorted(map(str, (work / "reports").iterdir())), "-o", "report.json"],
        cwd=work,
        env=on_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert merged.returncode == 1, merged.stderr  # bad.hlo failed (the passes change no f32 module)
    assert "hloopt: 13 processed, 0 changed, 12 unchanged, 1 failed" in merged.stderr
    assert len(list((work / "out").rglob("*.hlo"))) == 12  # every shard wrote into the one tree


def _steps(workflow: dict[str, object], job: str) -> list[dict[str, object]]:
    jobs = workflow["jobs"]
    assert isinstance(jobs, dict)
    steps = jobs[job]["steps"]
    assert isinstance(steps, list)
    return steps


@pytest.mark.slow  # CI runs it; the fast tier keeps the Slurm array script
def test_the_github_actions_matrix(tree: Path, tmp_path: Path, on_path: dict[str, str]) -> None:
    """The workflow loads as YAML; its hloopt steps, with the matrix filled in, run and merge for real."""
    import yaml  # in the test extra

    workflow = yaml.safe_load((CI / "hloopt-shards.yml").read_text())
    matrix = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    assert matrix == [1, 2, 3, 4]
    env = {**on_path, **{key: str(value) for key, value in workflow["env"].items()}, "MODULES": str(tree)}
    (runner := tmp_path / "runner").mkdir()
    for shard in matrix:
        for step in _steps(workflow, "shard"):
            command = step.get("run")
            if isinstance(command, str) and "hloopt run" in command:
                filled = command.replace("${{ matrix.shard }}", str(shard))
                filled = filled.replace("${{ strategy.job-total }}", str(len(matrix)))
                assert "${{" not in filled
                done = subprocess.run(["bash", "-c", filled], cwd=runner, env=env, check=False, timeout=300)
                assert done.returncode == 0
    (merge,) = [s["run"] for s in _steps(workflow, "merge") if "hloopt report merge" in str(s.get("run"))]
    assert isinstance(merge, str)
    merged = subprocess.run(["bash", "-c", merge], cwd=runner, env=env, capture_output=True, text=True, check=False)
    assert merged.returncode == 0, merged.stderr
    data = json.loads((runner / "report.json").read_text())
    assert data["shard"] is None and data["summary"]["processed"] == 12
    assert re.fullmatch(r"hloopt: 12 processed, 0 changed, 12 unchanged, 0 failed \(\d+\.\ds\)\n", merged.stderr)


def test_the_ci_examples_install_hloopt_from_its_repository() -> None:
    """hloopt is not on PyPI: every install in examples/ci is a pinned direct reference to its git repository."""
    import yaml  # in the test extra
    from packaging.requirements import Requirement

    workflow = yaml.safe_load((CI / "hloopt-shards.yml").read_text())
    installs = [
        str(step["run"])
        for job in ("shard", "merge")
        for step in _steps(workflow, job)
        if "pip install" in str(step.get("run"))
    ]
    assert installs == ['python -m pip install "$HLOOPT"'] * 2  # both jobs, the one pinned requirement
    slurm = [line for line in (CI / "hloopt-slurm-array.sh").read_text().splitlines() if "pip install" in line]
    readme = [line for line in (CI.parent / "README.md").read_text().splitlines() if "pip install" in line]
    requirements = [workflow["env"]["HLOOPT"]] + [line.partition("pip install")[2].strip(" '\"") for line in slurm]
    assert len(requirements) == 2 and readme == []
    for spelled in requirements:
        requirement = Requirement(spelled)
        assert requirement.name == "hloopt" and requirement.url is not None
        assert requirement.url.startswith("git+https://github.com/<owner>/hloopt@"), spelled
