"""The located errors of ``tests/errors/*.hlo``: every check of validation and literal reading, in HLO.

Each file holds cases separated by a ``// -----`` line. A case opens with a one-line
``// label`` naming the rule it breaks and ends with one ``// ERROR: L:C: message``
line: the line and column of the error counted within the case (its label is line 1)
and the exact message. The ERROR line is taken out before the case is parsed, so an
error at the end of the input points at the case's last line, not at the comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from hloopt import parse
from hloopt.driver.chunks import split
from hloopt.errors import HloParseError

ERRORS = Path(__file__).resolve().parents[1] / "errors"
_EXPECTED = re.compile(r"^// ERROR: (\d+):(\d+): (.*)\n", re.M)


@dataclass(frozen=True)
class ErrorCase:
    """One case: the text hloopt parses and the error it must report."""

    file: str
    #: Line in the file where the case starts, for the failure message.
    first_line: int
    label: str
    text: str
    expected: str


def error_cases(path: Path) -> list[ErrorCase]:
    """The cases of one file, in order (split as ``--split-input-file`` splits a file)."""
    cases: list[ErrorCase] = []
    for chunk in split(path.read_text(), path.name):
        first_line = chunk.place.line
        expected = _EXPECTED.findall(chunk.text)
        assert len(expected) == 1, f"{path.name}:{first_line}: a case needs exactly one `// ERROR: L:C: message` line"
        line, column, message = expected[0]
        label = chunk.text.partition("\n")[0].removeprefix("//").strip()
        text = _EXPECTED.sub("", chunk.text)
        cases.append(ErrorCase(path.name, first_line, label, text, f"{line}:{column}: {message}"))
    return cases


CASES = [case for path in sorted(ERRORS.glob("*.hlo")) for case in error_cases(path)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file}:{c.first_line}:{c.label}" for c in CASES])
def test_error_case(case: ErrorCase) -> None:
    with pytest.raises(HloParseError) as caught:
        parse(case.text, case.file)
    error = caught.value
    found = f"{error.location.line}:{error.location.column}: {error.message}"
    assert found == case.expected, f"{case.file}:{case.first_line} ({case.label})\n{error.render()}"


def test_every_file_has_cases() -> None:
    assert len({case.file for case in CASES}) >= 6
    assert all(case.label for case in CASES)
