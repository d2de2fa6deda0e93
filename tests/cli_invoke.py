"""`hloopt` run in-process through click, for tests that check exit codes and stderr."""

from __future__ import annotations

from click.testing import CliRunner, Result

from hloopt.cli.main import main


def invoke(*args: object) -> Result:
    """``hloopt ARGS…``; a bad input must never end in a traceback."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.stderr
    return result
