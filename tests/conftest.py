"""Shared fixtures and the suite's tiers: where ../shared is, which tests need it, and which run by default.

``python -m pytest`` runs the fast tier: every test not marked ``corpus`` (needs ../shared) or ``slow`` (long
sweeps through XLA, each with a small slice in the fast tier). ``HLOOPT_REQUIRE_SHARED=1`` (CI) runs every tier
and makes ../shared required; ``-m EXPR`` chooses tiers by hand, and a test file named on the command line runs whole.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TypeVar

import pytest

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")

#: The markers that take a test out of the default run (registered, with their meaning, in pyproject.toml).
TIERS = ("corpus", "slow")

# Every `hloopt run` in the tests, in-process or a subprocess, checks each pass's "changed" flag against the
# printed module (XLA's VerifyPassChangedReport): the command line reads this once as it starts. The library
# reads no environment, so the pass tests ask for the check themselves (`tests/passes/pass_testing.py`).
os.environ.setdefault("HLOOPT_CHECK_PASS_CHANGED", "both")


def every_tier() -> bool:
    """CI's switch: every tier runs, and what a tier needs (../shared, dask, pre-commit) must be there."""
    return os.environ.get("HLOOPT_REQUIRE_SHARED") == "1"


def shared_dir() -> Path | None:
    """``$HLOOPT_SHARED`` or ``<repo>/../shared``; None when neither exists."""
    candidate = Path(os.environ.get("HLOOPT_SHARED", REPO.parent / "shared"))
    return candidate if candidate.is_dir() else None


#: Where CI pins the newest jaxlib line it tests (`.ci/pins.py` writes it).
NEWEST_PINS = REPO / ".ci" / "constraints-py312.txt"


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def on_newest_jaxlib_line() -> bool:
    """Whether the installed jaxlib is the newest line CI pins (the users' jax), or newer; true where no pins are."""
    if not NEWEST_PINS.is_file():
        return True
    pinned = re.search(r"^jaxlib==(\S+)", NEWEST_PINS.read_text(), re.MULTILINE)
    return pinned is None or _version_key(version("jaxlib")) >= _version_key(pinned.group(1))


def sweep_step(newest: int, older: int) -> int:
    """Every how-many-th corpus module a long sweep takes on this jaxlib line (`sweep_sample`)."""
    if os.environ.get("HLOOPT_CORPUS_FULL") == "1":
        return 1
    return newest if on_newest_jaxlib_line() else older


def sweep_sample(items: Sequence[T], newest: int, older: int) -> list[T]:
    """The corpus modules a long sweep takes: every `newest`-th on the newest jaxlib line, every `older`-th on
    an older one, starting half a `newest` step in, so that CI's two legs take different modules (for an even
    `newest` that `older` is a multiple of); all of them with ``HLOOPT_CORPUS_FULL=1``."""
    step = sweep_step(newest, older)
    start = 0 if step == 1 or on_newest_jaxlib_line() else newest // 2
    return list(items[start::step])


#: The execution sweeps (self-compare, the device-numerics pair): every how-many-th module on the newest jaxlib
#: line and on an older one.
EXECUTION_SWEEP = (4, 8)


@pytest.fixture(scope="session")
def jax_snapshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """HloSnapshots the installed jax dumps on the CPU, once per session (`snapshot_dumps`)."""
    from snapshot_dumps import dump

    return dump(tmp_path_factory.mktemp("snapshots"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The shared HLO corpus, or skip (fail under HLOOPT_REQUIRE_SHARED=1): the one way a test reaches ../shared,
    so that every test that does is marked ``corpus`` (`pytest_collection_modifyitems`; `tests/test_tiers.py`)."""
    found = shared_dir()
    if found is None:
        reason = "needs ../shared/hlo-corpus beside the checkout (or HLOOPT_SHARED); a user's clone has none"
        if every_tier():
            pytest.fail(reason + " — HLOOPT_REQUIRE_SHARED=1 makes it required")
        pytest.skip(reason)
    return found / "hlo-corpus"


def sampled(values: Iterable[object], every: int, *, unpack: bool = False) -> list[object]:
    """`values` as parameters, all but every `every`-th marked ``slow``: the fast tier keeps an even slice of a
    sweep (the first value included), CI runs all of it. `unpack`: each value is a tuple, one item per name of a
    parametrize with several names."""

    def slow(value: object) -> object:
        args = value if unpack and isinstance(value, tuple) else (value,)
        return pytest.param(*args, marks=pytest.mark.slow)

    return [value if i % every == 0 else slow(value) for i, value in enumerate(values)]


def selected(request: pytest.FixtureRequest, name: str) -> list[object]:
    """The values of parameter `name` in the tests of the requesting module that this run selected, so that a
    module-scoped fixture judging a sampled sweep through XLA judges only the slice that runs."""
    values: list[object] = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if item.module is request.module and callspec is not None and name in callspec.params:  # type: ignore[attr-defined]
            values.append(callspec.params[name])
    return list(dict.fromkeys(values))


def _named_files(config: pytest.Config) -> set[Path]:
    """Test files named on the command line (alone or as ``file::test``): they run whole, whatever their tier."""
    named: set[Path] = set()
    for arg in config.args:
        path = config.invocation_params.dir / arg.split("::")[0]
        if path.is_file():
            named.add(path.resolve())
    return named


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses ``corpus_dir`` (directly or through a fixture) ``corpus``, then, unless every
    tier or a ``-m`` expression was asked for, deselect the tiers outside the fast one."""
    for item in items:
        if "corpus_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)
    if every_tier() or config.option.markexpr:
        return
    named = _named_files(config)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        tiered = any(item.get_closest_marker(tier) for tier in TIERS)
        (dropped if tiered and item.path.resolve() not in named else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> str:
    if every_tier():
        return "tiers: all (HLOOPT_REQUIRE_SHARED=1: ../shared, dask and pre-commit required)"
    if config.option.markexpr:
        return f"tiers: chosen by -m {config.option.markexpr!r}"
    return "tiers: fast (corpus and slow deselected; HLOOPT_REQUIRE_SHARED=1 runs every tier, -m corpus or -m slow one)"
