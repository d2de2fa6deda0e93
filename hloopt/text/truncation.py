"""Texts that end too early: "unexpected end of input" at the end, naming what is still open.

Lark stops at the first token it cannot lex, which in a cut-off file is often a
valid `,` or name well before the end (a truncated ``metadata={…`` makes the whole
attribute fail to lex). On the error path only, the text is scanned once for its
brackets, strings and comments; when they nest properly up to the end, something is
still open there, Lark stopped in the last unit (an instruction, or the top-level
text since the last computation) and that unit can still be completed, the end of
input is the error, and the error says so at the end and names what it left open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lark import Lark

from hloopt.errors import HloParseError, locate, parse_error_at

#: What the scan stops at: brackets, quotes and comment openers.
_LINE_END = re.compile(r"[\n\r]")
_SPECIAL = re.compile(r"""[{}()\[\]"']|/\*|//""")
_CLOSING = {"}": "{", ")": "(", "]": "["}
_CLOSER = {"{": "}", "(": ")", "[": "]", '"': '"', "'": "'", "/*": "*/"}
_WORD_BEFORE = re.compile(r"(?:ENTRY\s+)?%?[A-Za-z0-9_.\-]+=?\s*$")
#: A `}` that starts a line closes a body as XLA writes one (an indented one may end a group, a JSON
#: backend_config's): a unit read across it (a group's `{` left open before it) is an error in the
#: text, not at its end.
_BODY_CLOSE = re.compile(r"\n\}")
#: How much of the text before a bracket is read back for the word that names it.
_LOOK_BACK = 80
_SIGNATURE_OF = "the signature of "


@dataclass(frozen=True)
class Opener:
    """A bracket, quote or comment opened and not (yet) closed."""

    token: str
    offset: int
    #: Where the message says it opened (a computation's head, else the token).
    at: int
    #: How the message names a computation (``computation %main``), a signature, a string or a comment;
    #: empty for a group, named by the word before it only when an error is made (`_label`).
    label: str = ""
    #: A computation body: instructions start on its lines.
    body: bool = False


@dataclass(frozen=True)
class Scan:
    """What is open at the end of a text, and where its last unit starts."""

    open: tuple[Opener, ...]
    #: Where the innermost open body's instructions start, or the top-level text after the last body.
    unit_start: int
    #: The last unit is read as an instruction (inside a body), else as top-level text.
    in_body: bool
    #: A string or comment is open at the end and its next character would be escaped.
    escaped: bool = False


def scan(text: str) -> Scan | None:
    """The openers left at the end of `text`; None when a closer does not match its opener.

    A `{` at the top level after neither ``=`` nor a number (a stack frame's) opens a computation
    body, named by the word before it or before its signature's `(`; every other bracket is a group.
    """
    stack: list[Opener] = []
    unit_start, position, end = 0, 0, len(text)
    signature: Opener | None = None  # the last top-level `(`: a computation's signature
    find = _SPECIAL.search
    while (match := find(text, position)) is not None:
        token, at = match.group(), match.start()
        position = match.end()
        if token == "//":  # to the line's end: a CR ends it too, as in XLA's lexer
            newline = _LINE_END.search(text, position)
            position = end if newline is None else newline.start()
            continue
        if token in ('"', "'", "/*"):
            close = _close_quoted(text, token, position)
            if close is None:
                stack.append(Opener(token, at, at, "comment /*" if token == "/*" else "string"))
                return Scan(tuple(stack), unit_start, _in_body(stack), _escaped(text, token))
            position = close
            continue
        if token in _CLOSING:
            if not stack or stack[-1].token != _CLOSING[token]:
                return None
            if stack.pop().body:
                unit_start = position
            continue
        opener = _opener(text, token, at, signature) if not stack else Opener(token, at, at)
        if opener.label.startswith(_SIGNATURE_OF):
            signature = opener
        if opener.body:
            unit_start, signature = position, None
        stack.append(opener)
    return Scan(tuple(stack), unit_start, _in_body(stack))


def _in_body(stack: list[Opener]) -> bool:
    return bool(stack) and stack[0].body


def _close_quoted(text: str, token: str, position: int) -> int | None:
    """The end of the string or comment opened just before `position`, None if it never closes."""
    if token == "/*":
        close = text.find("*/", position)
        return None if close < 0 else close + 2
    end = _STRING_REST[token].match(text, position)
    return None if end is None else end.end()


#: The rest of a string after its opening quote, up to its closing quote (escapes skipped).
_STRING_REST = {quote: re.compile(rf"(?:[^{quote}\\]++|\\.)*+{quote}", re.S) for quote in "\"'"}


def _escaped(text: str, token: str) -> bool:
    """Whether an open string ends in an odd run of backslashes (its closing quote needs a character first)."""
    return token != "/*" and (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _word_before(text: str, at: int) -> tuple[str, int]:
    """The word written just before offset `at` (``%main``, ``metadata=``, ``ENTRY %main``) and where it starts."""
    before = text[max(0, at - _LOOK_BACK) : at]
    word = _WORD_BEFORE.search(before)
    if word is None:
        return "", at
    return word.group().rstrip(), at - len(before) + word.start()


def _opener(text: str, token: str, at: int, signature: Opener | None) -> Opener:
    """The top-level opener `token` at `at`: a computation's signature or body, else a group; `signature`
    is the last top-level `(` since the last body, which names the body a `{` after it opens."""
    written, head = _word_before(text, at)
    last = written.split()[-1] if written else ""
    if not written.endswith("="):
        if token == "{" and not last.isdigit():
            if last:
                return Opener(token, at, head, f"computation {last}", body=True)
            if signature is not None:
                name = signature.label.removeprefix(_SIGNATURE_OF)
                return Opener(token, at, signature.at, f"computation {name}", body=True)
        if token == "(" and last:
            return Opener(token, at, head, _SIGNATURE_OF + last)
    return Opener(token, at, at)


def _label(text: str, opener: Opener) -> str:
    """How an error names `opener`: its own label, else the word glued to it and the bracket (``convert(``)."""
    if opener.label:
        return opener.label
    written, _ = _word_before(text, opener.offset)
    glued = written and text[opener.offset - 1] not in " \t\n"
    return written.split()[-1] + opener.token if glued else opener.token


def closers(state: Scan) -> str:
    """Text that closes every group, string and comment `state` has open (computation bodies stay open);
    an escaped end first gets a character for its backslash (only the innermost, a string, can be)."""
    shut = "".join(_CLOSER[opener.token] for opener in reversed(state.open) if not opener.body)
    return "x" + shut if state.escaped else shut


#: What may complete a cut piece before its brackets close: a layout's number, a name, an attribute's value,
#: a comment's second `/`.
_INSIDE = ("", "0", "x", "=x", "/")
#: What may complete it after they close: an opcode and its arguments, a name and `=`, an attribute, a
#: shape, a signature's arrow, a stack frame's string.
_AFTER = ("", "x()", " x()", "x = x()", " = x()", "=x", "x=x", "x[]", " -> x[]", "> x[]", ' "x"')


@dataclass(frozen=True)
class Units:
    """Full-match regexes for an instruction line and for the top-level text between bodies."""

    instruction: re.Pattern[str]
    top: re.Pattern[str]

    @classmethod
    def from_lark(cls, lark: Lark) -> Units:
        """The units built from the grammar's own terminals."""
        (
            instruction,
            attr,
            signature,
            module_name,
            name,
            keyword,
            integer,
            string,
            group,
            space,
            comment,
        ) = (
            lark.get_terminal(n).pattern.to_regexp()
            for n in (
                "INSTRUCTION",
                "ATTR",
                "SIGNATURE",
                "MODULE_NAME",
                "COMPUTATION_NAME",
                "STACK_KEYWORD",
                "INT",
                "STRING",
                "GROUP",
                "WS",
                "COMMENT",
            )
        )
        gap = f"(?:{space}|{comment})*+"  # possessive: a run of blanks before a failure must not backtrack 2^n ways
        frame = f"(?:{keyword}|{integer}{gap}(?:{string}|{group})?)"
        top = (
            f"{gap}(?:{attr}{gap})*"
            f"(?P<header>HloModule{gap}(?:{module_name}{gap}(?:{attr}{gap})*)?)?"
            f"(?P<frames>(?:{frame}{gap})+)?"
            f"(?P<computation>(?:ENTRY{gap})?(?P<name>{name}){gap}(?:{signature}{gap})?)?"
        )
        return cls(re.compile(f"{gap}(?:{instruction}{gap})?"), re.compile(top))

    def completes(self, tail: str, in_body: bool) -> re.Match[str] | None:
        """The unit `tail` becomes with some completion (text before and after its closers), if any."""
        unit = self.instruction if in_body else self.top
        for inside in _INSIDE:
            state = scan(tail + inside)
            if state is None:
                continue
            closed = tail + inside + closers(state)
            for after in _AFTER:
                match = unit.fullmatch(closed + after)
                if match is not None:
                    return match
        return None


def end_of_input(
    text: str, stopped: int, filename: str, units: Units, previous: int | None = None
) -> HloParseError | None:
    """The "unexpected end of input" error for `text`, if its end is why Lark stopped at offset `stopped`
    (after the token that starts at `previous`, if Lark says)."""
    state = scan(text)
    if state is None or stopped < state.unit_start:
        return None
    tail, match = "", None
    if stopped < len(text):
        # The unit Lark stopped in: in a body, the instruction on Lark's line or the one Lark took last
        # (its attributes may go on over lines); at the top level, all since the last body.
        starts = [text.rfind("\n", 0, stopped) + 1, previous] if state.in_body else [state.unit_start]
        tails = (text[start:].rstrip() for start in starts if start is not None and start >= state.unit_start)
        tails = (tail for tail in tails if not _BODY_CLOSE.search(tail))
        completed = ((tail, units.completes(tail, state.in_body)) for tail in tails)
        tail, match = next(((t, m) for t, m in completed if m is not None), ("", None))
        if match is None:
            return None
    if state.open:
        return parse_error_at(text, len(text), filename, f"unexpected end of input: {_named(text, state.open)}")
    if match is None:
        return None  # Lark's own words: it reached the end, expecting what it says
    return parse_error_at(text, len(text), filename, f"unexpected end of input: {_unfinished(match, len(tail))}")


def _named(text: str, openers: tuple[Opener, ...]) -> str:
    """``A opened at L:C, B opened at L:C … is not closed``, innermost first (at most four named)."""
    inner = list(reversed(openers))
    if len(inner) > 4:
        inner = [*inner[:3], inner[-1]]
    named = [f"{_label(text, o)} opened at {_line_column(text, o.at)}" for o in inner]
    if len(named) == 1:
        return f"{named[0]} is not closed"
    return f"{', '.join(named[:-1])} and {named[-1]} are not closed"


def _line_column(text: str, offset: int) -> str:
    location, _ = locate(text, offset, "")
    return f"{location.line}:{location.column}"


def _unfinished(match: re.Match[str], cut: int) -> str:
    """What a top-level text cut short at `cut` (`match` is its completion) was writing: the header, stack
    frames, or a computation's head."""
    if 0 <= match.start("computation") < cut:
        name = match.string[match.start("name") : min(match.end("name"), cut)]
        return f"computation {name} is not complete" if name.lstrip("%") else "a computation's name is not complete"
    if 0 <= match.start("frames") < cut:
        return "the stack frames are not complete"
    if 0 <= match.start("header") < cut:
        return "the module header is not complete"
    return "a computation's attributes are not complete"
