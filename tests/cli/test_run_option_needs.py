"""`hloopt run` refuses an option that would do nothing without another (exit 2, naming it and what it
needs), and accepts it beside what it needs. Every such option of run is here."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_invoke import invoke

from hloopt.cli.main import _NEEDS

INT8 = Path(__file__).resolve().parents[2] / "examples" / "int8_matmul.hlo"

#: Each option given alone, the message's start, and the same option given with what it needs (exit 0).
CASES = {
    "per_pass": (["--per-pass"], "--per-pass compares", ["--passes", "all", "--verify-numerics", "--per-pass"]),
    "rtol": (["--rtol", "0.1"], "--rtol is a tolerance", ["--passes", "all", "--verify-numerics", "--rtol", "0.1"]),
    "atol": (["--atol", "1e-3"], "--atol is a tolerance", ["--passes", "all", "--verify-numerics", "--atol", "1e-3"]),
    "numerics": (["--numerics", "xla"], "--numerics chooses", ["--passes", "all", "--numerics", "neuron"]),
    "dump_dir": (["--dump-dir", "{tmp}/d"], "--dump-dir keeps", ["--passes", "all", "--dump-dir", "{tmp}/d"]),
    "output_format": (["--check", "--output-format", "pb"], "--output-format chooses", ["--output-format", "pb"]),
    "in_place": (["--check", "--in-place"], "--in-place rewrites INPUT", ["--in-place"]),
    "html": (
        ["--html", "{tmp}/r.html"],
        "--html draws",
        ["--passes", "all", "--verify-numerics", "--html", "{tmp}/r.html"],
    ),
}


def test_every_dependent_option_is_tested() -> None:
    assert sorted(CASES) == sorted(name for name, _, _ in _NEEDS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_alone_it_is_refused_naming_what_it_needs(tmp_path: Path, name: str) -> None:
    module = tmp_path / "m.hlo"
    module.write_text(INT8.read_text())
    alone, message, _ = CASES[name]
    result = invoke("run", module, *[a.format(tmp=tmp_path) for a in alone])
    assert result.exit_code == 2, result.output
    assert f"Error: {message}" in result.stderr
    assert ": it needs " in result.stderr or "--check writes nothing" in result.stderr
    assert module.read_text() == INT8.read_text() and not (tmp_path / "d").exists()  # nothing was done


@pytest.mark.parametrize("name", sorted(CASES))
def test_with_what_it_needs_it_is_accepted(tmp_path: Path, name: str) -> None:
    module = tmp_path / "m.hlo"
    module.write_text(INT8.read_text())
    result = invoke("run", module, *[a.format(tmp=tmp_path) for a in CASES[name][2]])
    assert result.exit_code == 0, result.stderr


def test_several_at_once_are_each_named(tmp_path: Path) -> None:
    result = invoke("run", INT8, "--rtol", "1", "--atol", "1", "--per-pass")
    assert result.exit_code == 2
    assert all(f"--{flag}" in result.stderr for flag in ("rtol", "atol", "per-pass"))


def test_the_defaults_given_by_no_one_are_not_refused() -> None:
    """--numerics, --rtol and --atol have defaults: only options the user gave are refused."""
    assert invoke("run", INT8).exit_code == 0
