"""MLIR's diagnostics, as jaxlib puts them in its exceptions, read into their error lines.

One reader for every place a jaxlib message is shown (the bridge's one-line `XlaError`, the formats'
StableHLO errors), so that they agree; it imports nothing (no numpy, no jax), for any module to use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    """One MLIR error: where (`buffer` ``-`` is the text jaxlib was given, ``""`` when MLIR gives no file
    position; `line` and `column` 0 when it has none) and the instruction it is about (`name`, from a
    ``"name":`` location, else None), and what."""

    buffer: str
    line: int
    column: int
    name: str | None
    message: str


#: An MLIR error line, in either of the forms jaxlib gives: ``UNKNOWN: -:3:31: error: message`` (a status
#: code, a buffer ``-``, ``<unknown>`` or ``"file.py"`` and a line and maybe a column) from its StableHLO
#: parser, ``error: "name": message`` (the location is the instruction's name) from its verifier. The
#: ``note:`` lines that follow (the operation in MLIR's generic form, the bytecode version) are not errors.
_ERROR = re.compile(
    r'^\s*(?:[A-Z_]+: )?(?:(?P<buffer>"[^"\n]*"|[^\s:"]+):(?P<line>\d+)(?::(?P<column>\d+))?:\s*)?'
    r'error:\s*(?:"(?P<name>[^"\n]+)":\s*)?(?P<message>.*)$',
    re.MULTILINE,
)
#: What MLIR adds after the real error when a StableHLO parse fails: no news to a user.
_GENERIC = re.compile(r"^Failed to parse using StableHLO")


def mlir_errors(text: str) -> list[Diagnostic]:
    """The errors of an MLIR diagnostic in `text`, in order; the generic "Failed to parse using StableHLO"
    line only when there is no other. Empty when `text` holds no MLIR error."""
    errors = [
        Diagnostic(
            (found["buffer"] or "").strip('"'),
            int(found["line"] or 0),
            int(found["column"] or 0),
            found["name"],
            found["message"].strip(),
        )
        for found in _ERROR.finditer(text)
    ]
    return [error for error in errors if not _GENERIC.match(error.message)] or errors
