"""The ``hloopt`` command (the only user of click)."""

from hloopt.cli.main import main

__all__ = ["main"]
