"""Shared fixtures: where ../shared is, and whether tests that need it may skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Every `hloopt run` in the tests, in-process or a subprocess, checks each pass's "changed" flag against the
# printed module (XLA's VerifyPassChangedReport): the command line reads this once as it starts. The library
# reads no environment, so the pass tests ask for the check themselves (`tests/passes/pass_testing.py`).
os.environ.setdefault("HLOOPT_CHECK_PASS_CHANGED", "both")


def shared_dir() -> Path | None:
    """``$HLOOPT_SHARED`` or ``<repo>/../shared``; None when neither exists."""
    candidate = Path(os.environ.get("HLOOPT_SHARED", REPO.parent / "shared"))
    return candidate if candidate.is_dir() else None


def require_shared() -> Path:
    """The shared folder, or skip (fail when HLOOPT_REQUIRE_SHARED=1, as in CI)."""
    found = shared_dir()
    if found is None:
        reason = "needs ../shared/hlo-corpus beside the checkout (or HLOOPT_SHARED); a user's clone has none"
        if os.environ.get("HLOOPT_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " — HLOOPT_REQUIRE_SHARED=1 makes it required")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return require_shared() / "hlo-corpus"
