"""The suite's tiers (tests/conftest.py): what the default run deselects, what CI's switch runs, and that no test
reaches ../shared except through the ``corpus_dir`` fixture, which marks it ``corpus``.

The rules run on a scratch suite, in a pytest of its own, with this suite's conftest and markers.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tokenize
from pathlib import Path
from xml.etree import ElementTree

import pytest

TESTS = Path(__file__).resolve().parent

SCRATCH = {
    "test_plain.py": "def test_plain():\n    pass\n",
    "test_sweep.py": "import pytest\n\n\n@pytest.mark.slow\ndef test_sweep():\n    pass\n",
    "test_reads.py": "def test_reads(corpus_dir):\n    assert (corpus_dir / 'm.hlo').is_file()\n",
    "test_through_a_fixture.py": (
        "import pytest\n\n\n@pytest.fixture\ndef modules(corpus_dir):\n    return sorted(corpus_dir.glob('*.hlo'))\n\n\n"
        "def test_through_a_fixture(modules):\n    assert modules\n"
    ),
    "test_sampled.py": (
        "import pytest\nfrom conftest import sampled\n\n\n"
        "@pytest.mark.parametrize('n', sampled(range(7), 3))\ndef test_sampled(n):\n    pass\n"
    ),
}
SAMPLE = {f"test_sampled[{n}]" for n in (0, 3, 6)}
EVERY = {"test_plain", "test_sweep", "test_reads", "test_through_a_fixture"} | {f"test_sampled[{n}]" for n in range(7)}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A suite with this conftest and pytest settings: a plain test, a slow one, two that read the corpus, and a
    sampled sweep."""
    root = tmp_path_factory.mktemp("tiers")
    (root / "pyproject.toml").write_text((TESTS.parent / "pyproject.toml").read_text())
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    for name, text in SCRATCH.items():
        (root / "tests" / name).write_text(text)
    (root / "shared" / "hlo-corpus").mkdir(parents=True)
    (root / "shared" / "hlo-corpus" / "m.hlo").write_text("HloModule m\n")
    return root


def outcomes(root: Path, *args: str, shared: bool = True, every_tier: bool = False) -> dict[str, str]:
    """Each test's outcome in ``python -m pytest ARGS`` run in `root`; a test left out is absent."""
    env = {k: v for k, v in os.environ.items() if k not in ("HLOOPT_SHARED", "HLOOPT_REQUIRE_SHARED")}
    env["HLOOPT_SHARED"] = str(root / "shared") if shared else str(root / "missing")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the rules need no plugin, and each run starts faster
    if every_tier:
        env["HLOOPT_REQUIRE_SHARED"] = "1"
    report = root / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1, 5), done.stdout + done.stderr  # passed, failed, none selected
    found: dict[str, str] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found[case.attrib["name"]] = kinds[0] if kinds else "passed"
    return found


def test_the_default_run_is_the_fast_tier(scratch: Path) -> None:
    """Corpus tests are deselected whether or not ../shared is there, the fixture marking those that use it."""
    fast = {"test_plain": "passed"} | dict.fromkeys(SAMPLE, "passed")
    assert outcomes(scratch) == fast
    assert outcomes(scratch, shared=False) == fast


def test_ci_runs_every_tier_and_requires_shared(scratch: Path) -> None:
    assert outcomes(scratch, every_tier=True) == dict.fromkeys(EVERY, "passed")
    assert outcomes(scratch, shared=False, every_tier=True) == dict.fromkeys(EVERY, "passed") | {
        "test_reads": "error",
        "test_through_a_fixture": "error",
    }


def test_a_marker_expression_chooses_the_tiers(scratch: Path) -> None:
    assert outcomes(scratch, "-m", "corpus") == {"test_reads": "passed", "test_through_a_fixture": "passed"}
    sweeps = {"test_sweep"} | {f"test_sampled[{n}]" for n in range(7)} - SAMPLE
    assert outcomes(scratch, "-m", "slow") == dict.fromkeys(sweeps, "passed")
    assert outcomes(scratch, "-m", "corpus", shared=False) == {
        "test_reads": "skipped",
        "test_through_a_fixture": "skipped",
    }


def test_a_file_named_on_the_command_line_runs_whole(scratch: Path) -> None:
    assert outcomes(scratch, "tests/test_sweep.py", "tests/test_reads.py::test_reads") == {
        "test_sweep": "passed",
        "test_reads": "passed",
    }
    assert outcomes(scratch, "tests/test_plain.py", "tests/test_sampled.py") == {"test_plain": "passed"} | {
        f"test_sampled[{n}]": "passed" for n in range(7)
    }


#: Ways a test could reach ../shared without the fixture: the folder's name or its variable as a string, or the
#: helpers that find it.
_SHARED_STRINGS = {"shared", "../shared", "HLOOPT_SHARED"}
_SHARED_NAMES = {"shared_dir", "require_shared"}


def _reaches_shared(path: Path) -> list[str]:
    with tokenize.open(path) as source:
        tokens = list(tokenize.generate_tokens(source.readline))
    found: list[str] = []
    for token in tokens:
        if token.type == tokenize.STRING and token.string.isascii():
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str) and value.rstrip("/") in _SHARED_STRINGS:
                found.append(f"{path.relative_to(TESTS)}:{token.start[0]}: {token.string}")
        elif token.type == tokenize.NAME and token.string in _SHARED_NAMES:
            found.append(f"{path.relative_to(TESTS)}:{token.start[0]}: {token.string}")
    return found


def test_only_the_corpus_fixture_reaches_shared() -> None:
    """A test that found ../shared another way would not be marked ``corpus``: it would run in the fast tier,
    and skip or fail on a user's clone."""
    found = [hit for path in sorted(TESTS.rglob("*.py")) if path.name != "conftest.py" for hit in _reaches_shared(path)]
    assert not [hit for hit in found if not hit.startswith("test_tiers.py:")], found


@pytest.mark.parametrize(
    ("pinned", "full", "step", "taken"),
    [("0.0.1", "", 4, [0, 4, 8, 12, 16]), ("999.0", "", 8, [2, 10, 18]), ("999.0", "1", 1, list(range(20)))],
    ids=["the newest line", "an older line", "an older line, HLOOPT_CORPUS_FULL=1"],
)
def test_the_two_ci_legs_sweep_different_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinned: str, full: str, step: int, taken: list[int]
) -> None:
    import conftest

    pins = tmp_path / "constraints.txt"
    pins.write_text(f"jax=={pinned}\njaxlib=={pinned}\n")
    monkeypatch.setattr(conftest, "NEWEST_PINS", pins)
    monkeypatch.setenv("HLOOPT_CORPUS_FULL", full)
    assert conftest.sweep_sample(range(20), 4, 8) == taken
    assert conftest.sweep_step(4, 8) == step
