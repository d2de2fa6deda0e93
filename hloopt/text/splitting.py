"""Splitting what Lark lexed as one token (a computation body, an instruction) into its pieces.

The regexes are the grammar's own terminals (HEAD, ARGS, ATTR and what the
lexer ignores), taken from the Lark parser, so a split is exactly what the
lexer would have produced with one INSTRUCTION token per instruction. A piece
keeps its offset in the source (`Piece`), so an error can point at it later.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass

from lark import Lark


@dataclass(frozen=True)
class Splitters:
    """Regexes built from the grammar's own terminals, to split what Lark lexed as one token."""

    #: Optional gap, then an instruction's head and argument list: groups `head` and `args` (up to its `)`).
    instruction: re.Pattern[str]
    #: Optional gap, then an instruction's head (group `head`).
    head: re.Pattern[str]
    #: One ``, name=value``; the attributes follow the argument list one match at a time.
    attribute: re.Pattern[str]
    gap: re.Pattern[str]
    #: One computation of a COMPUTATIONS token (the token's repeated part), its name, and it up to
    #: its body's `{` (without BODY).
    computation: re.Pattern[str]
    computation_name: re.Pattern[str]
    computation_head: re.Pattern[str]

    @classmethod
    def from_lark(cls, lark: Lark) -> Splitters:
        head, args, attr, space, comment, name, computations, body = (
            lark.get_terminal(n).pattern.to_regexp()
            for n in ("HEAD", "ARGS", "ATTR", "WS", "COMMENT", "COMPUTATION_NAME", "COMPUTATIONS", "BODY")
        )
        assert computations.startswith("(?:") and computations.endswith(")+"), "COMPUTATIONS is a repetition"
        computation = computations[3:-2]
        assert computation.endswith(body), "a computation ends with BODY"
        gap = f"(?:{space}|{comment})*+"  # what the lexer ignores between tokens (%ignore WS, COMMENT)
        return cls(
            instruction=re.compile(f"{gap}(?P<head>{head})(?P<args>{args})"),
            head=re.compile(f"{gap}(?P<head>{head})"),
            attribute=re.compile(attr),
            gap=re.compile(gap),
            computation=re.compile(computation),
            computation_name=re.compile(name),
            computation_head=re.compile(computation[: len(computation) - len(body)]),
        )

    def split(self, text: str, position: int) -> Spans | None:
        """The head and argument list of the instruction after `position`, as INSTRUCTION matches them."""
        line_end = text.find("\n", position + 1)
        if (line_end if line_end >= 0 else len(text)) - position > LONG_LINE:
            spans = self._split_long(text, position)
            if spans is not None:
                return spans
        match = self.instruction.match(text, position)
        return None if match is None else match.span("head") + match.span("args")

    def _split_long(self, text: str, position: int) -> Spans | None:
        """A big literal's instruction, split with str methods, which are faster than the ARGS regex.

        When no `(` or quote comes before the first `)` and the brackets before it nest as
        the regex's groups do, that `)` closes the argument list. None: use the regex.
        """
        head = self.head.match(text, position)
        if head is None:
            return None
        start = head.end()
        close = text.find(")", start)
        if close < 0 or any(text.find(c, start, close) >= 0 for c in "(\"'"):
            return None
        if not nests_as_groups(text, start, close):
            return None
        return (*head.span("head"), start, close + 1)


#: More brackets than this in a long argument list: let the regex walk them.
_MAX_WALKED_BRACKETS = 4096
#: The grammar's groups nest this deep inside an argument list.
_GROUP_DEPTH = 15


def nests_as_groups(text: str, start: int, end: int) -> bool:
    """The brackets in text[start:end] open before they close, all close, and nest at most _GROUP_DEPTH deep."""
    opened = text.count("{", start, end) + text.count("[", start, end)
    if opened != text.count("}", start, end) + text.count("]", start, end) or opened > _MAX_WALKED_BRACKETS:
        return False
    brackets: list[tuple[int, int]] = []
    for char, step in (("{", 1), ("[", 1), ("}", -1), ("]", -1)):
        at = text.find(char, start, end)
        while at >= 0:
            brackets.append((at, step))
            at = text.find(char, at + 1, end)
    depth = 0
    for _, step in sorted(brackets):
        depth += step
        if not 0 <= depth <= _GROUP_DEPTH:
            return False
    return True


#: Where an instruction's head and argument list (with its `)`) start and end in a text.
Spans = tuple[int, int, int, int]


class Piece(str):
    """A slice of the source with its offset: what a Lark Token is, for much less work."""

    type: str
    start_pos: int
    end_pos: int


def piece(text: str, kind: str, start: int) -> Piece:
    """`text`, found at offset `start` of the source, as a piece of terminal `kind`."""
    made = Piece(text)
    made.type = kind
    made.start_pos = start
    made.end_pos = start + len(text)
    return made


_ATTRIBUTE_PREFIX = re.compile(r"(?:\s|/\*.*?\*/)*,(?:\s|/\*.*?\*/)*", re.S)


def attribute(text: str) -> tuple[str, str]:
    """``, name=value`` (an ATTR match) → (name, value)."""
    if text[:2] == ", " and text[2:3].isalpha():
        key, _, value = text[2:].partition("=")
        return key, value.strip()
    prefix = _ATTRIBUTE_PREFIX.match(text)
    key, _, value = text[prefix.end() if prefix else 0 :].partition("=")
    return key, value.strip()


def attribute_name_offset(text: str) -> int:
    """Where the name starts in a ``, name=value`` match."""
    prefix = _ATTRIBUTE_PREFIX.match(text)
    return prefix.end() if prefix else 0


#: An instruction on a line longer than this (a big literal) is split by `Splitters._split_long`.
LONG_LINE = 1 << 16


#: Brackets nested deeper than this are masked for the deep reading (`masked`): the grammar's groups
#: read 16 levels, and a token the builder splits again starts a level or two inside the text.
MASK_DEPTH = 12
#: What a masked bracket becomes: a character every group regex reads as plain text.
MASK = "\x01"
#: A string as XLA's lexer (and the grammar's STRING and _SQ_STRING) reads it; and a comment.
_STRING = r'"(?:[^"\\]|\\.)*+"|\'(?:[^\'\\]|\\.)*+\''
_COMMENT = r"/\*(?:[^*]|\*(?!/))*+\*/|//[^\n\r]*+"
#: A bracket, or what XLA's lexer reads past whole (strings and comments), whose brackets are text.
_BRACKET_OR_SKIPPED = re.compile(rf"([(){{}}\[\]])|{_STRING}|{_COMMENT}")


class TooDeep(Exception):
    """Brackets nested deeper than `MAX_NESTING`; `offset` is the first bracket past it."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


#: The deepest nesting read. XLA's parser recurses per level and has no limit of its own: jaxlib 0.10's
#: reads a tuple shape 7,000 levels deep and dies of a stack overflow at 7,500 (in a worker thread); hloopt
#: refuses past a bound between the two, counting every bracket (a computation's braces too).
MAX_NESTING = 7200
#: The deepest anonymous instructions read (`add(f32[] add(f32[] add(...)))`). XLA's parser spends far more
#: stack on a nested instruction than on a bracket: jaxlib 0.10 reads 1,035 levels and dies of a stack
#: overflow at 1,040, jaxlib 0.12 reads 1,075 and dies at 1,100 (8 MB main-thread stack). hloopt reads
#: up to a bound below both, so XLA reads every nesting hloopt accepts, and refuses past it.
MAX_OPERAND_NESTING = 1024
#: The deepest inline computations read (`to_apply={... call(...), to_apply={...} ...}`): jaxlib 0.10 reads
#: 905 levels and dies at 910, jaxlib 0.12 reads 1,000 and dies at 1,100; hloopt refuses past a bound below both.
MAX_INLINE_NESTING = 900


def deepest(text: str) -> int:
    """Where the first bracket of the deepest nesting opens (outside strings and comments); 0 if none."""
    depth = most = at = 0
    for match in _BRACKET_OR_SKIPPED.finditer(text):
        bracket = match.group(1)
        if bracket is None:
            continue
        depth += 1 if bracket in "({[" else -1
        if depth > most:
            most, at = depth, match.start()
    return at


def masked(text: str) -> str:
    """`text` with every bracket nested more than `MASK_DEPTH` deep (outside strings and comments)
    replaced, one for one, by `MASK`; `text` itself when none is. `TooDeep` past `MAX_NESTING`.

    Python's `re` cannot count brackets, so the grammar's group regexes are unrolled 16 levels deep
    (unrolling further costs Lark's table build about cubically). A text that nests deeper is lexed
    from this copy, its tokens' values taken from the original at the same offsets: the regexes then
    find the same token boundaries, and the deep brackets are read by the grammar's shape rules and
    the literal scanner, which nest freely. One pass, on the error path only.
    """
    if text.count("(") + text.count("{") + text.count("[") <= MASK_DEPTH:
        return text
    depth, deep = 0, []
    for match in _BRACKET_OR_SKIPPED.finditer(text):
        bracket = match.group(1)
        if bracket is None:
            continue
        if bracket in "({[":
            depth += 1
            if depth > MASK_DEPTH:
                if depth > MAX_NESTING:
                    raise TooDeep(match.start())
                deep.append(match.start())
        else:
            if depth > MASK_DEPTH:
                deep.append(match.start())
            depth -= 1
    if not deep:
        return text
    characters = list(text)
    for at in deep:
        characters[at] = MASK
    return "".join(characters)


#: What `Brackets` looks for: a `{`/`[` group at most 4 deep with no `(`, `)`, quote or `/` inside (group 1: a
#: literal's rows, passed over in one match), a bracket (2), a comment (3), a quote that opens no string (4).
#: Strings match no group: their brackets are text.
_FLAT = r"[^(){}\[\]\"'/]++"
_STRUCTURE = re.compile(
    rf"([{{\[](?:{_FLAT}|[{{\[](?:{_FLAT}|[{{\[](?:{_FLAT}|[{{\[]{_FLAT[:-2]}*+[}}\]])*+[}}\]])*+[}}\]])*+[}}\]])"
    rf"|([(){{}}\[\]])|{_STRING}|({_COMMENT})|([\"'])"
)
#: How deep a group that `_STRUCTURE` passes over in one match may nest.
_FLAT_DEPTH = 4


class Brackets:
    """Where each bracket of a text opens and closes, found in one pass, as the grammar's group regexes pair
    them: a close closes the last open bracket of any kind, and strings are text.

    So a nested list can be read level by level without rescanning what lies below it
    (`_Parse._quick_items`). `usable` is False where the regexes and `masked` might pair brackets otherwise
    than this pass (a comment holding a bracket or quote, a quote that opens no string, a bracket that
    closes nothing or never closes): such a text is left to Lark.
    """

    def __init__(self, text: str) -> None:
        #: For the k-th open bracket: where it opens, where its close is, and the index of the first open
        #: bracket after that close (its next sibling, if any).
        self.opens: array[int] = array("q")
        self.closes: array[int] = array("q")
        self.after: array[int] = array("q")
        #: At least as deep as the deepest nesting.
        self.depth = 0
        self.usable = self._scan(text)

    def _scan(self, text: str) -> bool:
        opens, closes, after = self.opens, self.closes, self.after
        stack: list[int] = []
        for match in _STRUCTURE.finditer(text):
            kind = match.lastindex
            if kind == 1:  # a literal's group, whole
                opens.append(match.start())
                closes.append(match.end() - 1)
                after.append(len(opens))
                self.depth = max(self.depth, len(stack) + _FLAT_DEPTH)
            elif kind == 2:
                if match.group(2) in "({[":
                    stack.append(len(opens))
                    opens.append(match.start())
                    closes.append(-1)
                    after.append(-1)
                    self.depth = max(self.depth, len(stack))
                elif not stack:
                    return False
                else:
                    opened = stack.pop()
                    closes[opened] = match.start()
                    after[opened] = len(opens)
            elif kind == 4 or (kind == 3 and any(c in match.group(3) for c in "(){}[]\"'")):
                return False
        return not stack

    def index(self, position: int) -> int | None:
        """The index of the bracket that opens at `position`; None if none does (it is in a string, say)."""
        index = bisect_left(self.opens, position)
        return index if index < len(self.opens) and self.opens[index] == position else None

    def children(self, index: int) -> Iterator[int]:
        """The indexes of the brackets directly inside the `index`-th group, in order."""
        child, close = index + 1, self.closes[index]
        while child < len(self.opens) and self.opens[child] < close:
            yield child
            child = self.after[child]
