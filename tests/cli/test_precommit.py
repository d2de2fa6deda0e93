"""The hooks in .pre-commit-hooks.yaml, run by pre-commit itself on a scratch git repo, offline.

pre-commit builds each hook's environment as it would for a user (``language: python``: a virtualenv
and ``pip install .`` of the hooks repo), but with no package index: the environment takes jax, numpy,
lark and click from this interpreter's packages, and setuptools from the virtualenv's seed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib.util import find_spec
from pathlib import Path

import pytest

from hloopt.driver.chunks import as_file

ROOT = Path(__file__).resolve().parents[2]

# `hloopt run` prints both in XLA's canonical text (% names, layouts, signatures).
FIRST = "HloModule first\n\nENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  ROOT s = f32[4] add(x, y)\n}\n"
SECOND = "HloModule second\n\nENTRY e {\n  a = s8[2,3] parameter(0)\n  ROOT c = f32[2,3] convert(a)\n}\n"
BROKEN = "HloModule broken\n\nENTRY e {\n  ROOT b = f32[] add(x, y)\n}\n"


@pytest.fixture(scope="module", autouse=True)
def pre_commit_installed() -> None:
    found = {"pre-commit": find_spec("pre_commit"), "git": shutil.which("git")}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        reason = f"needs {' and '.join(missing)} (pre-commit is in the test extra: pip install -e '.[test]')"
        if os.environ.get("HLOOPT_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " — HLOOPT_REQUIRE_SHARED=1 makes it required")
        pytest.skip(reason)


def clean_env() -> dict[str, str]:
    """This environment without the variables that would point git or pre-commit elsewhere (a test run from a
    git hook has GIT_DIR and GIT_INDEX_FILE set), with no user or system git config, and a fixed committer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT")) and k != "SKIP"}
    for who in ("AUTHOR", "COMMITTER"):
        env.update({f"GIT_{who}_NAME": "hloopt tests", f"GIT_{who}_EMAIL": "tests@hloopt.invalid"})
    return {**env, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=clean_env(), check=True, capture_output=True, text=True)
    return done.stdout


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout as it is on disk (tracked and untracked files, as git lists them), committed in a scratch repo.

    try-repo on the checkout itself reads HEAD plus the tracked files' changes: an uncommitted hooks file or
    new module would be missing, and this test, like every other, is about the working tree.
    """
    repo = tmp_path_factory.mktemp("hooks")
    for name in git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0"):
        if name and (ROOT / name).is_file():  # a tracked file deleted on disk is listed too
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "the checkout", cwd=repo)
    return repo


# What a venv's packages lend the hooks' environment leaves out: hloopt (the hook installs its own) and the
# build tools (pip builds hloopt with the setuptools virtualenv seeds; a venv's may be too old to build wheels).
NOT_LENT = {"hloopt", "pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel"}


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pre-commit's environment: its store in a temporary directory (hook environments are built once for this
    file, not per test), and pip with no package index.

    The hooks' virtualenv sees the base interpreter's site-packages; when the tests run in a venv, its packages
    are lent too, through PYTHONPATH (virtualenv bases every environment on the base interpreter).
    """
    env = clean_env()
    env.update(
        PRE_COMMIT_HOME=str(tmp_path_factory.mktemp("pre-commit-home")),
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",  # pip reads 0 as "build without isolation": no setuptools from an index
        VIRTUALENV_SYSTEM_SITE_PACKAGES="1",
        VIRTUALENV_SETUPTOOLS="bundle",  # the build backend: virtualenv seeds it for Python < 3.12 only by default
    )
    if sys.prefix != sys.base_prefix:
        lent = tmp_path_factory.mktemp("venv-packages")
        for directory in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
            for entry in Path(directory).iterdir():
                top = re.split(r"[-.]", entry.name)[0]
                if top not in NOT_LENT and entry.suffix != ".pth" and not (lent / entry.name).exists():
                    (lent / entry.name).symlink_to(entry)
        env["PYTHONPATH"] = os.pathsep.join([str(lent), *filter(None, [env.get("PYTHONPATH")])])
    return env


def pre_commit(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``pre-commit ARGS`` in `cwd`; its output, hooks' included, in stdout."""
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


#: pre-commit's standard end-of-file-fixer (from the pre-commit-hooks package, run by this interpreter):
#: hloopt-format writes files ending in one newline, as it wants, so the two never undo each other.
END_OF_FILE_FIXER = {
    "repo": "local",
    "hooks": [
        {
            "id": "end-of-file-fixer",
            "name": "fix end of files",
            "entry": f"{sys.executable} -m pre_commit_hooks.end_of_file_fixer",
            "language": "system",
            "types": ["text"],
        }
    ],
}


@pytest.fixture(scope="module")
def canonical(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What ``hloopt run`` prints for FIRST and SECOND, as a file holds it: ending in one newline."""
    printed: dict[str, str] = {}
    for text in (FIRST, SECOND):
        source = tmp_path_factory.mktemp("canonical") / "module.hlo"
        source.write_text(text)
        command = [sys.executable, "-m", "hloopt", "run", str(source)]
        printed[text] = as_file(subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout)
    return printed


@pytest.fixture
def project(tmp_path: Path, hooks_repo: Path, canonical: dict[str, str]) -> Path:
    """A git repo whose last commit has a canonical module and a text file, with two non-canonical modules staged,
    and a .pre-commit-config.yaml naming both hooks at the hooks repo's commit."""
    work = tmp_path / "project"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "good.hlo").write_text(canonical[FIRST])
    (work / "notes.txt").write_text(SECOND)  # HLO, but not a *.hlo file: neither hook reads it
    rev = git("rev-parse", "HEAD", cwd=hooks_repo).strip()
    hooks = [{"id": "hloopt-check"}, {"id": "hloopt-format"}]
    config = {"repos": [{"repo": str(hooks_repo), "rev": rev, "hooks": hooks}, END_OF_FILE_FIXER]}
    (work / ".pre-commit-config.yaml").write_text(json.dumps(config) + "\n")  # JSON is YAML
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "canonical", cwd=work)
    (work / "models").mkdir()
    (work / "bad.hlo").write_text(FIRST)
    (work / "models" / "second.hlo").write_text(SECOND)
    git("add", "-A", cwd=work)
    return work


def texts(work: Path) -> dict[str, str]:
    return {
        str(p.relative_to(work)): p.read_text()
        for p in sorted(work.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


@pytest.mark.slow
def test_try_repo_check_fails_on_the_staged_non_canonical_modules_and_changes_nothing(
    project: Path, hooks_repo: Path, offline: dict[str, str]
) -> None:
    before = texts(project)
    done = pre_commit("try-repo", str(hooks_repo), "hloopt-check", cwd=project, env=offline)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "hloopt check (canonical HLO text)" in done.stdout and "Failed" in done.stdout
    assert "- exit code: 1" in done.stdout
    assert "hloopt: bad.hlo would change" in done.stdout
    assert f"hloopt: {Path('models', 'second.hlo')} would change" in done.stdout
    assert "good.hlo" not in done.stdout  # committed, not staged: pre-commit does not pass it
    assert texts(project) == before


@pytest.mark.slow  # CI runs it; the fast tier keeps the format-then-check test
def test_check_passes_on_a_canonical_module(project: Path, offline: dict[str, str]) -> None:
    done = pre_commit("run", "hloopt-check", "--files", "good.hlo", "notes.txt", cwd=project, env=offline)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hloopt check (canonical HLO text)" in done.stdout and "Passed" in done.stdout


@pytest.mark.slow
def test_format_rewrites_to_what_hloopt_run_prints_and_then_check_passes(
    project: Path, offline: dict[str, str], canonical: dict[str, str]
) -> None:
    before = texts(project)
    check = pre_commit("run", "hloopt-check", "--all-files", cwd=project, env=offline)
    assert check.returncode == 1, check.stdout + check.stderr
    assert texts(project) == before

    formatted = pre_commit("run", "hloopt-format", "--all-files", cwd=project, env=offline)
    assert formatted.returncode == 1, formatted.stdout + formatted.stderr  # pre-commit fails a hook that changes files
    assert "files were modified by this hook" in formatted.stdout
    after = texts(project)
    expected = {"bad.hlo": canonical[FIRST], str(Path("models", "second.hlo")): canonical[SECOND]}
    assert after == {**before, **expected}
    assert expected["bad.hlo"] == before["good.hlo"] != before["bad.hlo"]  # a real rewrite, to the real canonical text

    # canonical now: formatting again changes nothing, and end-of-file-fixer agrees with what was written
    for hook in ("hloopt-check", "hloopt-format", "end-of-file-fixer"):
        done = pre_commit("run", hook, "--all-files", cwd=project, env=offline)
        assert done.returncode == 0, done.stdout + done.stderr
    assert texts(project) == after


@pytest.mark.slow
def test_a_malformed_module_fails_both_hooks_with_its_location(project: Path, offline: dict[str, str]) -> None:
    (project / "broken.hlo").write_text(BROKEN)
    for hook in ("hloopt-check", "hloopt-format"):
        done = pre_commit("run", hook, "--files", "broken.hlo", "good.hlo", cwd=project, env=offline)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "- exit code: " in done.stdout  # pre-commit names a failing hook's code (hloopt: 2 for bad input)
        assert "hloopt: error: broken.hlo:4:22: instruction x does not exist" in done.stdout
        assert (project / "broken.hlo").read_text() == BROKEN


SHIPPED = sorted((ROOT / "examples").glob("*.hlo"))


@pytest.fixture
def examples_project(tmp_path: Path, hooks_repo: Path) -> Path:
    """A git repo holding the shipped examples, committed, with both hooks configured."""
    work = tmp_path / "examples-project"
    (work / "examples").mkdir(parents=True)
    git("init", "-q", cwd=work)
    for example in SHIPPED:
        shutil.copy2(example, work / "examples" / example.name)
    rev = git("rev-parse", "HEAD", cwd=hooks_repo).strip()
    config = {
        "repos": [
            {"repo": str(hooks_repo), "rev": rev, "hooks": [{"id": "hloopt-check"}, {"id": "hloopt-format"}]},
            END_OF_FILE_FIXER,
        ]
    }
    (work / ".pre-commit-config.yaml").write_text(json.dumps(config) + "\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "the shipped examples", cwd=work)
    return work


def test_both_hooks_pass_on_every_shipped_example(examples_project: Path, offline: dict[str, str]) -> None:
    """The project's own examples are canonical: neither hook fails on them or changes them."""
    assert [p.name for p in SHIPPED] == [
        "bf16_conv_batchnorm_train.hlo",
        "fp8_bf16_mlp.hlo",
        "fp8_mlp.hlo",
        "int8_matmul.hlo",
    ]
    before = texts(examples_project)
    done = pre_commit("run", "--all-files", cwd=examples_project, env=offline)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("Passed") == 3  # end-of-file-fixer too
    assert texts(examples_project) == before
