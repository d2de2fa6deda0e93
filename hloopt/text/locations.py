"""Where things are written in the source, for errors only.

The parse records one number per instruction, computation and attribute run,
never an offset per operand or attribute: those are found again, from the
recorded starts, only when an error needs them. `locate` is the one place that
turns an issue (what is wrong, tied to a piece of the IR) into an offset.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hloopt.errors import HloParseError, parse_error_at
from hloopt.ir.module import Computation, Instruction
from hloopt.text.splitting import attribute, attribute_name_offset
from hloopt.text.validation import InvalidHlo


@dataclass(frozen=True)
class OperandIssue:
    """Something wrong with operand `name` of the argument list that starts at `arguments`."""

    message: str
    arguments: int
    name: str
    #: The shape text the operand declares: point at it rather than at the name.
    declared: str | None = None


Issue = InvalidHlo | OperandIssue


class Locations:
    """The recorded starts of one source text, and the errors located from them."""

    def __init__(self, text: str, filename: str, attribute_pattern: Callable[[], re.Pattern[str]]) -> None:
        self.text = text
        self.filename = filename
        #: The ATTR terminal's regex, to walk an attribute run again (built with the Lark parser).
        self._attribute_pattern = attribute_pattern
        self.instructions: dict[Instruction, int] = {}
        self.computations: dict[Computation, int] = {}
        self.module_attributes: dict[str, int] = {}
        #: Where each instruction's attribute run starts.
        self.attribute_runs: dict[Instruction, int] = {}

    def error(self, offset: int, message: str) -> HloParseError:
        """A located error at a character offset of the source."""
        return parse_error_at(self.text, offset, self.filename, message)

    def fail(self, issue: Issue) -> HloParseError:
        """The located error for `issue`."""
        return self.error(self.locate(issue), issue.message)

    def locate(self, issue: Issue) -> int:
        """The offset an issue points at.

        An IR issue points at its attribute, else its instruction, else its computation
        (a module issue at the module attribute); an operand issue at the operand.
        """
        if isinstance(issue, OperandIssue):
            return self.operand(issue.arguments, issue.name, issue.declared)
        if issue.instruction is None:
            position = self.module_attributes.get(issue.attribute or "")
        else:
            position = self.attribute(issue.instruction, issue.attribute) if issue.attribute else None
        if position is None and issue.instruction is not None:
            position = self.instructions.get(issue.instruction)
        if position is None and issue.computation is not None:
            position = self.computations.get(issue.computation)
        return position if position is not None else 0

    def attribute(self, instruction: Instruction, key: str) -> int | None:
        """Where attribute `key` of `instruction` is named in the text."""
        position = self.attribute_runs.get(instruction)
        if position is None:
            return None
        pattern = self._attribute_pattern()
        match = pattern.match(self.text, position)
        while match is not None:
            if attribute(match.group())[0] == key:
                return match.start() + attribute_name_offset(match.group())
            match = pattern.match(self.text, match.end())
        return None

    def operand(self, arguments: int, name: str, declared: str | None = None) -> int:
        """Where operand `name` (or the shape text it declares) is written in the argument list at `arguments`."""
        pattern = re.compile(rf"(?<![A-Za-z0-9_.\-%])%?{re.escape(name)}(?![A-Za-z0-9_.\-])")
        match = pattern.search(self.text, arguments)
        at = match.start() if match is not None else arguments
        return at if declared is None else self.text.rfind(declared, arguments, at)
