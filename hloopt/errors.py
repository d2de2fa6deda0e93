"""Errors that hloopt reports to users: located, readable, never a traceback."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: What an error is about: an instruction's name and its computation's (None when unknown).
Subject = tuple[str, str | None]


class HloError(Exception):
    """Base of every error hloopt reports to a user (the CLI exits 2 on these)."""

    #: The instruction the error is about, as (name, computation name), so that a caller holding the text the
    #: module was parsed from can point at its statement (`located`); None when it is about none.
    subject: Subject | None = None

    def headline(self) -> tuple[str, str]:
        """The message as `located` shows it: the first line, beside the location, and the lines below the caret."""
        first, _, rest = str(self).partition("\n")
        return first, rest


def about(err: HloError, instruction: str, computation: str | None) -> HloError:
    """`err`, saying which instruction it is about (a pass's refusal of its input names one)."""
    err.subject = (instruction, computation)
    return err


@dataclass(frozen=True)
class SourceLocation:
    """A 1-based line and column in a named source text."""

    filename: str
    line: int
    column: int


class HloParseError(HloError):
    """Malformed HLO text, reported as ``FILE:LINE:COL: message`` plus the line and a caret."""

    def __init__(self, message: str, location: SourceLocation, source_line: str, notes: str = "") -> None:
        self.message = message
        self.location = location
        self.source_line = source_line
        #: Lines shown below the caret (the other problems of a verifier's refusal).
        self.notes = notes
        super().__init__(self.render())

    def __reduce__(self) -> tuple[type[HloParseError], tuple[str, SourceLocation, str, str]]:
        """Rebuilt from its parts, so it crosses from a worker process as itself."""
        return HloParseError, (self.message, self.location, self.source_line, self.notes)

    def render(self) -> str:
        """``FILE:LINE:COL: message``, the source line with its unprintable characters escaped, a caret.

        A long line (a 1 MB literal on one line) is shown clipped around the caret, ``…`` on each side
        cut, so an error costs a screenful, never a copy of the input.
        """
        loc = self.location
        line = self.source_line.expandtabs(1).rstrip("\n")
        column = max(loc.column - 1, 0)
        start = max(0, min(column - SHOWN_BEFORE, len(line) - SHOWN_WIDTH))
        end = start + SHOWN_WIDTH
        before = ("…" if start > 0 else "") + shown(line[start:column])
        after = shown(line[column:end]) + ("…" if end < len(line) else "")
        caret = " " * len(before) + "^"
        notes = f"\n{self.notes}" if self.notes else ""
        return f"{loc.filename}:{loc.line}:{loc.column}: {self.message}\n  {before}{after}\n  {caret}{notes}"


#: The most characters of a source line an error shows, and how many of them come before the caret.
SHOWN_WIDTH = 160
SHOWN_BEFORE = 100


def shown(text: str) -> str:
    """`text` safe for a terminal: NUL, ESC and every other unprintable character as its escape (``\\x1b``),
    so a binary file cannot drive the terminal and the caret under it stays aligned."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def locate(text: str, offset: int, filename: str) -> tuple[SourceLocation, str]:
    """The location and the source line of a character offset in `text`."""
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    if line_end < 0:
        line_end = len(text)
    line = text.count("\n", 0, offset) + 1
    return SourceLocation(filename, line, offset - line_start + 1), text[line_start:line_end]


def parse_error_at(text: str, offset: int, filename: str, message: str) -> HloParseError:
    """Build a located parse error for a character offset in `text`."""
    location, source_line = locate(text, offset, filename)
    return HloParseError(message, location, source_line)


def definition_offset(text: str, instruction: str, computation: str | None = None) -> int | None:
    """Where `instruction` is defined in the HLO `text` (its statement's ``ROOT`` or name, where located
    errors point), looked for first inside `computation`; else that computation's header (a nested
    operand has no line of its own); None when neither is written there."""
    header = None
    if computation is not None:
        header = re.compile(rf"^[ \t]*(?:ENTRY[ \t]+)?%?{re.escape(computation)}[ \t]*[({{]", re.M).search(text)
    line = re.compile(rf"^[ \t]*((?:ROOT[ \t]+)?%?{re.escape(instruction)}[ \t]*=)", re.M)
    found = line.search(text, header.end() if header is not None else 0) or line.search(text)
    if found is not None:
        return found.start(1)
    return len(text) - len(text[header.start() :].lstrip()) if header is not None else None


def located(err: HloError, source: str, filename: str) -> HloError:
    """`err` pointed at the statement in `source`, the text the module was parsed from, of the instruction it is
    about (``FILE:LINE:COL``, the line and a caret, the rest of the message below); `err` itself when it is about
    none, is located already, or `source` does not define that instruction (a pass made it)."""
    if err.subject is None or isinstance(err, HloParseError):
        return err
    offset = definition_offset(source, *err.subject)
    if offset is None:
        return err
    first, rest = err.headline()
    location, line = locate(source, offset, filename)
    return HloParseError(first, location, line, rest)
