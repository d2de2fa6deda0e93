"""``hloopt --version``, ``--help`` and ``hloopt passes`` start without numpy, lark, jax or dask (issue #10 §1);
``hloopt run`` on a module without constants imports lark but not numpy (issue 14: start-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.formatting import HelpFormatter

from hloopt.cli.main import main

HEAVY = ("numpy", "lark", "jax", "jaxlib", "ml_dtypes", "dask", "distributed")


def imported_modules(*args: str, cwd: Path | None = None) -> set[str]:
    """Every module ``python -X importtime -m hloopt ARGS`` imports (its report goes to stderr)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hloopt", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    rows = (line.rpartition("|")[2] for line in result.stderr.splitlines() if line.startswith("import time:"))
    return {row.strip() for row in rows}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--version"], id="version"),
        pytest.param(["--help"], id="help"),
        pytest.param(["run", "--help"], id="run-help"),
        pytest.param(["passes"], id="passes"),
    ],
)
def test_starts_without_numpy_lark_jax_or_dask(args: list[str]) -> None:
    modules = imported_modules(*args)
    assert "hloopt.cli.main" in modules  # the report was read
    assert sorted(m for m in modules if m.partition(".")[0] in HEAVY) == []


@pytest.mark.parametrize("name", ["exec", "compare", "cast", "report"])
def test_lazy_summaries_say_what_the_commands_say(name: str) -> None:
    """--help lists the lazy commands from their summaries; each must read as the command's own short help."""
    assert isinstance(main, click.Group)
    command = main.get_command(click.Context(main), name)
    assert command is not None and command.help is not None
    for limit in (45, 200):
        listed = click.Command(name, help=main.lazy[name][1])  # what the lazy listing says, as click shortens it
        assert listed.get_short_help_str(limit) == command.get_short_help_str(limit)
    listing = HelpFormatter()
    main.format_commands(click.Context(main), listing)
    assert name in listing.getvalue()


def test_run_on_a_module_without_constants_does_not_import_numpy(tmp_path: Path) -> None:
    """numpy waits for the first literal to scan or decode: a third of a one-instruction run's start-up."""
    (tmp_path / "one.hlo").write_text(
        "HloModule m\n\nENTRY %e (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n"
    )
    modules = imported_modules("run", "one.hlo", cwd=tmp_path)
    assert "hloopt.text.parser" in modules and "lark" in modules
    assert sorted(m for m in modules if m.partition(".")[0] in HEAVY and m.partition(".")[0] != "lark") == []
    assert "hloopt.text.truncation" not in modules  # it words an early end of the text: errors only
