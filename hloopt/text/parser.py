"""HLO text → IR, with the Lark grammar in ``hlo.lark``.

The LALR parser runs with an inline transformer: no parse tree is built, each
rule's callback builds IR objects directly. Lark's cost is per token, so a
whole computation body is one BODY token, which this module splits into
instructions (`splitting.py`), and each instruction into its head, arguments
and attributes, keeping offsets only where an error will need them. The other
jobs live beside it: `shapes.py` reads shape text, `assembly.py` turns names
into references and builds the computations and the module, `locations.py`
says where an error is, `lark_errors.py` words what Lark refused.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from importlib import resources
from sys import intern
from typing import TYPE_CHECKING, cast

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedInput
from lark.lexer import BasicLexer, ContextualLexer
from lark.utils import TextSlice

from hloopt.errors import HloParseError, parse_error_at
from hloopt.ir.brackets import split_top
from hloopt.ir.element_types import ROWS as ELEMENT_TYPE_ROWS
from hloopt.ir.literal import Literal, LiteralError
from hloopt.ir.module import INSTRUCTION_LIST_ATTRIBUTES, AttributeValue, Computation, Instruction, Module
from hloopt.ir.opcodes import COMPUTATION_ATTRIBUTES, COMPUTATION_LIST_ATTRIBUTES
from hloopt.ir.shape import ArrayShape, BufferShape, Shape, TupleShape
from hloopt.text.assembly import Assembly, OperandItem
from hloopt.text.lark_errors import expected_terminals, wording
from hloopt.text.locations import Locations
from hloopt.text.shapes import SIZE, ShapeReader
from hloopt.text.splitting import (
    MAX_INLINE_NESTING,
    MAX_NESTING,
    MAX_OPERAND_NESTING,
    Brackets,
    Piece,
    Spans,
    Splitters,
    TooDeep,
    attribute,
    attribute_name_offset,
    deepest,
    masked,
    piece,
)
from hloopt.text.validation import (
    InvalidHlo,
    check_computation_attribute,
    check_stack_frame_entry,
    check_stack_frame_id,
)

if TYPE_CHECKING:
    from hloopt.text.truncation import Units

_TRAILING_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*(?:#\d+)*)\s*$")
#: ``ROOT`` needs a blank or comment after it, or a ``%`` (XLA's lexer ends the keyword there: ``ROOT%x``).
_HEAD = re.compile(r"(ROOT(?:(?:\s|/\*.*?\*/)+|(?=%)))?%?([A-Za-z_][A-Za-z0-9_.\-]*)(?:\s|/\*.*?\*/)*=", re.S)
_TRAILING_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)\s*$")
#: What follows a nested instruction's shape: the last run of its head without blanks or closing brackets.
_OPCODE_AFTER_SHAPE = re.compile(r"[^\s\])}]*$")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
#: An operand name; ``#i`` suffixes are XLA 0.11+'s compact get-tuple-element (``%while.5#1``).
_NAME = r"%?[A-Za-z_][A-Za-z0-9_.\-]*(?:#\d+)*"
#: An operand list of names alone (compiled text).
_NAMES = re.compile(rf"\s*(?:{_NAME}\s*(?:,\s*{_NAME}\s*)*)?")
#: One operand name, group 1 without its `%` (also the end of `_OPERAND_TEXT`).
_OPERAND_NAME_TEXT = r"%?([A-Za-z_][A-Za-z0-9_.\-]*(?:#\d+)*)"
_OPERAND_NAME = re.compile(_OPERAND_NAME_TEXT)
_OPERAND_TEXT = rf"(?:([a-z][a-z0-9]*\s*\[[^\]\[]*\](?:\s*\{{[^{{}}]*\}})?)\s*,?\s*)?{_OPERAND_NAME_TEXT}"
#: An operand: group 1 its declared array shape, if any, group 2 its name.
_OPERAND = re.compile(_OPERAND_TEXT)
#: An operand list as XLA prints names: each name is what stands between its `%` and the next `, %`.
_PRINTED_NAMES = re.compile(r"%[A-Za-z_][A-Za-z0-9_.\-]*+(?:#\d++)*+(?:, %[A-Za-z_][A-Za-z0-9_.\-]*+(?:#\d++)*+)*+")
#: An operand list of names with array shapes (XLA's canonical text), split without Lark.
_SIMPLE_OPERANDS = re.compile(rf"\s*(?:{_OPERAND_TEXT}\s*(?:,\s*{_OPERAND_TEXT}\s*)*)?")
#: A head `ROOT %name = shape opcode(` with no comments in it.
#: Words XLA's lexer reads as something other than a name (grammar §1): a primitive type
#: (not ``tuple``) or a keyword. Written bare they cannot name an instruction or computation.
_NOT_NAMES = frozenset(row.name for row in ELEMENT_TYPE_ROWS) | frozenset(
    [
        "true",
        "false",
        "inf",
        "nan",
        "HloModule",
        "ENTRY",
        "ROOT",
        "FileNames",
        "FunctionNames",
        "FileLocations",
        "StackFrames",
        "maximal",
        "replicated",
        "manual",
        "last_tile_dim_replicate",
        "shard_as",
        "shard_like",
        "unknown",
        "unreduced",
    ]
)
#: Names XLA's name sanitizer would change (it appends ``_`` to a primitive type's name).
_ILLEGAL_NAMES = frozenset(row.name for row in ELEMENT_TYPE_ROWS)


def check_name(name: str, written: str, offset: int, error: Callable[[int, str], HloParseError], kind: str) -> None:
    """Refuse an instruction or computation name XLA's parser refuses; `written` is how the text
    spells it (with or without ``%``)."""
    if kind == "instruction" and name[:2] == "__":  # XLA's name sanitizer keeps `__` for its own names
        raise error(offset, f"illegal instruction name: {name}; suggest renaming to: a{name[1:]}")
    if name not in _NOT_NAMES:
        return
    illegal = kind == "instruction" and name in _ILLEGAL_NAMES
    if not written.startswith("%"):
        fix = f"rename it, e.g. {name}_" if illegal else f"write %{name} or rename it"
        raise error(offset, f"expects name: {name} is a type name or keyword here; {fix}")
    if illegal:
        raise error(offset, f"illegal instruction name: {name}; suggest renaming to: {name}_")


#: The common instruction, canonical text without comments: `ROOT %name = type[dims]{layout} opcode(`
#: (a bare name not against its `=`: see the grammar's _INSTRUCTION_NAME),
#: then arguments with no parentheses, strings or nested brackets, then `)`. Where it matches, the
#: grammar's HEAD and ARGS match the same spans (they allow more); elsewhere the splitter reads the line.
#: Every repeat is possessive: what follows each cannot continue it, so giving characters back never
#: leads to a match, and the engine keeps no positions to give back (a seventh fewer instructions).
_CANONICAL = re.compile(
    r"\s*+((ROOT\s++)?(?=%|[A-Za-z_][A-Za-z0-9_.\-]*+[^=])%?([A-Za-z_][A-Za-z0-9_.\-]*+)\s*+=\s*+"
    r"([a-z][a-z0-9]*+\[[^\[\]{}()]*+\](?:\{[0-9:][^{}()]*+\})?+)\s++([a-z][a-z0-9\-]*+)\()"
    r"((?:[^()\"'{}\[\]/]++|\[[^\[\](){}\"'/]*+\]|\{[^{}()\[\]\"'/]*+\})*+)\)"
)
#: The common attribute: `, name=value`, the value a string, or bare text and `{...}` groups holding text,
#: strings and `[...]`, then a comma or the end of the line. Where it matches, ATTR matches the same
#: (a `%` starts a name, at the value's start only; after a group, `ROOT`, `ENTRY` or a `%` name starts what follows).
_CANONICAL_ATTRIBUTE = re.compile(
    r", ([A-Za-z_][A-Za-z0-9_.\-]*+)=("
    r"\"[^\"\\]*+(?:\\.[^\"\\]*+)*+\""
    r"|(?:%(?=[A-Za-z_]))?(?:[^\s,{}()\[\]\"'%]++"
    r"|\{(?:[^{}()\[\]\"']++|\"[^\"\\]*+(?:\\.[^\"\\]*+)*+\"|\[[^\[\]{}()\"']*+\])*+\}(?!ROOT\b|ENTRY\b|%))++"
    r")(?=[,\n]|\Z)"
)
#: An attribute whose value starts with a `%` that starts no name (`, to_apply=%%c`): up to that `%`.
_STRAY_PERCENT = re.compile(r"\s*,\s*[A-Za-z_][A-Za-z0-9_.\-]*=\s*(?=%(?![A-Za-z_]))")
#: The longest rest of a line whose attribute run `_Parse._add_attributes` remembers.
_RUN_CACHED = 4096
#: How the next line starts in XLA's print when no attribute follows (ATTR needs a `,` or a comment
#: first): checked before the attribute regexes, which cost more to fail.
_NEXT_INSTRUCTION = ("\n  %", "\n  ROOT ", "\n}")
#: The blanks a COMPUTATION token starts with (the lexer would have skipped them as WS): matched,
#: since `lstrip` would copy the whole token, megabytes of body, to count them.
_BLANKS = re.compile(r"[ \t\f\r\n]*+")
#: One parameter of a computation's signature: its name, `:` right after it (XLA's lexer reads `name:` as one token;
#: it reads `(operand f32[2])` too) and its shape (group 1).
_PARAMETER = re.compile(
    r"[ \t\n\r]*%?[A-Za-z_][A-Za-z0-9_.\-]*(?::|(?=[ \t\n\r]))[ \t\n\r]*(\S(?:.*\S)?)[ \t\n\r]*", re.S
)
#: A signature's parameter list as XLA prints it, every shape an array's written without blanks (others go
#: through `split_top`): then each shape is what follows a `: `.
_PRINTED_ARRAY = r"[a-z][a-z0-9]*\[[^\[\]{}() ]*\](?:\{[^{}() ]*\})?"
_PRINTED_PARAMETERS = re.compile(
    rf"[A-Za-z_][A-Za-z0-9_.\-]*: {_PRINTED_ARRAY}(?:, [A-Za-z_][A-Za-z0-9_.\-]*: {_PRINTED_ARRAY})*"
)
_PRINTED_PARAMETER_SHAPE = re.compile(rf": ({_PRINTED_ARRAY})")
_PLAIN_HEAD = re.compile(
    r"(ROOT(?:\s+|(?=%)))?%?([A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*(?:(.*[\]})])\s*)?([a-z][a-z0-9\-]*)\s*\(", re.S
)
#: How deep an argument list may nest for the grammar's unmasked regexes to pair all its brackets: the
#: list's `(`, then a LITERAL's 16 levels (`_G15`); `_Parse._quick_items` is used within that or on the masked reading.
_REGEX_DEPTH = 16
_CLOSING = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class _Signature:
    """A computation's ``(params) -> result``; XLA checks only the result against the root."""

    result: Piece


def _declared_result(text: str, end: int) -> Piece:
    """The result shape of the SIGNATURE `text` that ends at offset `end`."""
    result = text.rpartition("->")[2]
    return piece(result.strip(), "SHAPE", end - len(result.lstrip()))


@dataclass(frozen=True)
class _Header:
    """``HloModule name, attr=value, …``."""

    name: str
    attributes: list[Piece]


@dataclass(frozen=True)
class _StackFrames:
    """The stack-frame index between the header and the first computation, verbatim."""

    text: str


@dataclass(frozen=True, slots=True)
class _LiteralText:
    """A constant's literal, `text[start:end]`, and where it starts (kept apart from operands: it is no name).

    `text` may be the whole module's: a long literal stays a view of it (`Literal.in_source`), not a copy.
    """

    text: str
    offset: int
    start: int = 0
    end: int | None = None


@dataclass(frozen=True, slots=True)
class _Nested:
    """An anonymous instruction as its argument list's parse meets it: its head and argument list
    with their offsets, built once the list is read (`_Parse._argument_list`).

    The argument list is `source[start:end]`, not a copy: in a chain nested d deep each list holds the
    ones below it, and copying each would cost d times the text.
    """

    head: str
    head_pos: int
    source: str
    start: int
    end: int
    arguments_pos: int


@dataclass(slots=True)
class _ListFrame:
    """An argument list being built: its items, the next to look at, the instructions built for its
    `_Nested` ones (in order); for an anonymous instruction's list, that instruction's head."""

    items: list[Token | _Nested]
    offset: int
    nested: _Nested | None
    refusal: HloParseError | None = None
    next: int = 0
    built: list[Instruction] = field(default_factory=list)
    shape: Shape | None = None
    opcode: str | None = None


@dataclass(frozen=True, slots=True)
class _InlineBody:
    """An inline computation (``to_apply={...}``): the instruction and attribute it is written in, its text."""

    instruction: Instruction
    key: str
    value: str
    value_pos: int


@dataclass(slots=True)
class _BodyFrame:
    """An inline body being built: its INSTRUCTION tokens, the next to build, the instructions built,
    the inline bodies the last one wrote (read before the next)."""

    job: _InlineBody
    tokens: list[Token]
    refusal: HloParseError | None = None
    next: int = 0
    built: list[Instruction] = field(default_factory=list)
    jobs: list[_InlineBody] = field(default_factory=list)


class _Builder(Transformer[Token, Module]):
    """Inline transformer: rule callbacks build the IR while the LALR parser reduces."""

    def __init__(self, holder: _ParseHolder) -> None:
        super().__init__()
        self._holder = holder

    @property
    def _parse(self) -> _Parse:
        assert self._holder.current is not None
        return self._holder.current

    def shape(self, children: list[Shape | Token]) -> Shape:
        child = children[0]
        if isinstance(child, Token):
            return self._parse.shapes.array(str(child), self._parse.position(child))
        return child

    def tuple_shape(self, children: list[Shape | None]) -> TupleShape:
        return TupleShape(tuple(c for c in children if c is not None))

    def buffer_shape(self, children: list[Shape]) -> BufferShape:
        inner = children[0]
        if not isinstance(inner, ArrayShape):
            raise self._parse.error(self._parse.fragment_start(), "a buffer shape b(...) must wrap an array shape")
        return BufferShape(inner)

    def header(self, children: list[Token]) -> _Header:
        attributes = [self._parse.piece(token) for token in children[1:]]
        written = children[0].rstrip(":")
        name = written.lstrip("%")
        if name in _NOT_NAMES:
            check_name(name, written, self._parse.position(children[0]), self._parse.error, "module")
        return _Header(name, attributes)

    def stack_frame_section(self, children: list[Token]) -> tuple[int, int]:
        for number, entry in zip(children[1::2], children[2::2]):  # kept as written, but read as XLA reads it
            self._parse.check(partial(check_stack_frame_id, children[0], str(number)), self._parse.position(number))
            self._parse.check(partial(check_stack_frame_entry, children[0], str(entry)), self._parse.position(entry))
        return (self._parse.position(children[0]), self._parse.position(children[-1]) + len(children[-1]))

    def stack_frames(self, children: list[tuple[int, int]]) -> _StackFrames:
        return _StackFrames(self._parse.text[children[0][0] : children[-1][1]])

    def nested_operand(self, children: list[Token]) -> _Nested:
        return self._parse.defer_nested(children[0], children[1])

    def nested_arguments(self, children: list[Token | _Nested | None]) -> list[Token | _Nested]:
        return [c for c in children if c is not None]

    def signature(self, children: list[Token]) -> _Signature:
        token = children[0]  # in the whole text: signatures are never in a sub-parse
        self._parse.check_parameter_list(str(token), int(token.start_pos or 0))
        return _Signature(_declared_result(token, int(token.end_pos or 0)))

    def instruction(self, children: list[Token]) -> Instruction | Token:
        return self._parse.lexed_instruction(children[0])

    def computation(self, children: list[Token | _Signature | Instruction | None]) -> list[Computation]:
        return self._parse.computation(children)

    def inline_body(self, children: list[Token]) -> list[Token]:
        return children

    def module(self, children: list[_Header | _StackFrames | list[Computation] | None]) -> Module:
        return self._parse.module(children)

    def start(self, children: list[Module]) -> Module:
        return children[0]

    # The exact rules build the same things (see `exact_start` in the grammar).
    exact_computation = computation
    exact_module = module
    exact_start = start


@lru_cache(maxsize=1)
def _grammar() -> str:
    return resources.files("hloopt.text").joinpath("hlo.lark").read_text()


class _ParseHolder:
    """The parse the shared builder is working for (sub-parses nest inside one text's parse)."""

    current: _Parse | None = None


class _ParserPool(threading.local):
    """The thread's Lark parsers: the builder they are bound to carries per-parse state."""

    lark: Lark | None = None
    #: The `exact_start` parser, built on the first text the coarse one cannot split.
    exact: Lark | None = None
    holder: _ParseHolder = _ParseHolder()


_POOL = _ParserPool()
#: The coarse parser's start rules; the sub-parses of either parse use it too.
_STARTS = ["start", "shape", "inline_body", "nested_arguments", "instruction_parts"]


def _lark_for(parse: _Parse, exact: bool = False) -> Lark:
    """The thread's coarse or `exact_start` Lark parser (built once; Lark caches its tables on
    disk), bound to `parse`."""
    if _POOL.lark is None:
        _POOL.holder = _ParseHolder()
        _POOL.lark = _new_lark(_STARTS)
    _POOL.holder.current = parse
    if not exact:
        return _POOL.lark
    if _POOL.exact is None:
        _POOL.exact = _new_lark(["exact_start"])
    return _POOL.exact


def _new_lark(starts: list[str]) -> Lark:
    lark = Lark(
        _grammar(),
        parser="lalr",
        lexer="contextual",
        start=starts,
        transformer=_Builder(_POOL.holder),
        cache=True,
        propagate_positions=False,
        maybe_placeholders=True,
    )
    lexer = lark.parser.lexer
    assert isinstance(lexer, ContextualLexer)  # lexer="contextual"
    for basic in {id(basic): basic for basic in [*lexer.lexers.values(), lexer.root_lexer]}.values():
        assert isinstance(basic, BasicLexer)
        vars(basic)["match"] = partial(_match_runs_uncopied, basic)  # this instance's, not Lark's class's
    return lark


class _Run(str):
    """A token's text, not copied out of the source: the token is empty, and its span is `start` to `end`
    of `source`. A COMPUTATIONS token, or an anonymous instruction's argument list (`_Parse._quick_items`).

    Lark's lexer copies each match twice (the match's text, then the token made from it); a run can hold
    a gigabyte of constants. Lark reads only a run's length and its newlines, which this answers from the
    source; the parser reads the run's computations from the source by offsets.
    """

    source: str
    start: int
    end: int
    #: A COMPUTATIONS run's computations, where each ends in `source` (`_computations`).
    ends: tuple[int, ...] = ()

    def __new__(cls, source: str, start: int, end: int) -> _Run:
        run = super().__new__(cls, "")
        run.source, run.start, run.end = source, start, end
        return run

    def __len__(self) -> int:
        return self.end - self.start

    def count(self, sub: str, *_: object) -> int:
        return self.source.count(sub, self.start, self.end)

    def rindex(self, sub: str, *_: object) -> int:
        return self.source.rindex(sub, self.start, self.end) - self.start


def _match_runs_uncopied(basic: BasicLexer, text: TextSlice, position: int) -> tuple[str, str] | None:
    """Lark's `BasicLexer.match`, except that a COMPUTATIONS match comes back as a `_Run`, not a copy.

    Where COMPUTATIONS is the pattern's first alternative, the pattern's match is COMPUTATIONS' own if it has
    one, and that is the repeated part matched again and again (no iteration gives back what it matched: what
    follows the repetition always matches): `_computations` reads it so, once, keeping where each ends.
    """
    for pattern in basic.scanner._mres:
        if pattern.pattern.startswith("(?P<COMPUTATIONS>") and text.end == len(text.text):
            run = _computations(text.text, position)
            if run is not None:
                return run, "COMPUTATIONS"
        match = pattern.match(text.text, position, text.end)
        if match is not None:
            if match.lastgroup == "COMPUTATIONS":  # (not the first alternative: matched twice)
                run = _computations(text.text, position)
                assert run is not None and run.end == match.end()
                return run, "COMPUTATIONS"
            return match.group(0), str(match.lastgroup)
    return None


def _computations(text: str, position: int) -> _Run | None:
    """The COMPUTATIONS run at `position` in `text`, with where each of its computations ends; None if none starts there."""
    one = _splitters().computation.match
    ends: list[int] = []
    while (match := one(text, ends[-1] if ends else position)) is not None:
        ends.append(match.end())
    if not ends:
        return None
    run = _Run(text, position, ends[-1])
    run.ends = tuple(ends)
    return run


@lru_cache(maxsize=1)
def _splitters() -> Splitters:
    assert _POOL.lark is not None
    return Splitters.from_lark(_POOL.lark)


@lru_cache(maxsize=1)
def _units() -> Units:
    from hloopt.text.truncation import Units  # only for an error: not on the parser's start-up

    assert _POOL.lark is not None
    return Units.from_lark(_POOL.lark)


def _attribute_pattern() -> re.Pattern[str]:
    return _splitters().attribute


#: Attributes whose values name computations or instructions (the rest stay text as written).
_RESOLVED_LATER = INSTRUCTION_LIST_ATTRIBUTES | COMPUTATION_ATTRIBUTES | COMPUTATION_LIST_ATTRIBUTES


def _operand_item(name: str, declared: str | None) -> OperandItem:
    """An operand as assembly resolves it: its name, with the shape text it declares if any."""
    return (name, declared) if declared else name


#: A computation read but not closed: it, where its name is, the result its signature declares, its instructions.
_OpenComputation = tuple[Computation, int, Piece | None, list[Instruction]]


class _Relex(Exception):
    """A computation body the BODY token cannot stand for: parse the text from `exact_start`."""


class _Parse:
    """One parse of one text: reads the tokens Lark hands over, delegating shapes, names and locations."""

    def __init__(self, text: str, filename: str, callees_first: bool = False, deep: bool = False) -> None:
        self.text = text
        #: The deep reading (`splitting.masked`): every regex reads a copy with the deepest brackets masked.
        self.deep = deep
        self.locations = Locations(text, filename, _attribute_pattern)
        self.shapes = ShapeReader(self.locations.error, self._nested_shape)
        self.assembly = Assembly(self.shapes, self.locations, callees_first)
        self._pending = self.assembly.pending
        self._anon_counts: dict[str, int] = {}
        #: (start, end) in the text of what Lark is parsing now: the text, or a sub-parse's fragment.
        self._fragment = (0, len(text))
        #: The anonymous instructions the argument list being parsed has met so far (`_argument_list`).
        self._deferred: list[_Nested] = []
        #: The INSTRUCTION tokens of the inline body being lexed, and the inline bodies met by the
        #: instruction being built (`_inline_bodies`); None outside it.
        self._inline_tokens: list[Token] | None = None
        self._inline_jobs: list[_InlineBody] | None = None
        #: The attributes of each run read so far that makes up the rest of its line, is canonical and names
        #: nothing, by that text (`_add_attributes`): the instructions one jax operation lowers to share theirs.
        self._runs: dict[str, dict[str, AttributeValue]] = {}
        #: The short literals checked so far, by their shape's id and their text (`_build`): `f32[] constant(1)`
        #: recurs, and the same text checks the same against the same shape.
        self._literals: set[tuple[int, str]] = set()
        #: Characters handed to Lark by sub-parses: what a deep nesting must keep about linear in the text
        #: (`tests/text/test_deep_nesting.py` reads it).
        self.lexed = 0

    def error(self, offset: int, message: str) -> HloParseError:
        return self.locations.error(offset, message)

    def check(self, check: Callable[[], None], offset: int) -> None:
        """Run a validation `check` on text kept as written, its refusal located at `offset`."""
        try:
            check()
        except InvalidHlo as issue:
            raise self.error(offset, issue.message) from None

    # -- fragments: sub-parses of a piece of the text ---------------------------------
    def _sub_parse(self, fragment: str, start: str, offset: int) -> object:
        """Parse `fragment`, which stands at `offset` in the text, from the start rule `start`.

        Lark sees the fragment alone (no padding to rescan); `position` adds the offset back.
        """
        outer = self._fragment
        self._fragment = (offset, offset + len(fragment))
        self.lexed += len(fragment)
        try:
            # A shape nests in the grammar's rules, not in a regex: it is never masked.
            return self.run(_lark_for(self), fragment, start, self.deep and start != "shape")
        except UnexpectedInput as err:
            raise self.lark_error(err) from None
        finally:
            self._fragment = outer
            _POOL.holder.current = self

    @staticmethod
    def run(lark: Lark, text: str, start: str, deep: bool) -> object:
        """Parse `text` from `start`; `deep`: lexed from its masked copy, each token's value the original's."""
        lexed = masked(text) if deep else text
        if lexed is text:
            return lark.parse(text, start=start)
        interactive = lark.parse_interactive(lexed, start=start)
        token: Token | None = None
        for token in interactive.lexer_thread.lex(interactive.parser_state):
            start_pos, end_pos = int(token.start_pos or 0), int(token.end_pos or 0)
            interactive.feed_token(Token.new_borrow_pos(token.type, text[start_pos:end_pos], token))
        return interactive.feed_eof(token)

    def _nested_shape(self, text: str, offset: int) -> Shape:
        return cast(Shape, self._sub_parse(text, "shape", offset))

    def position(self, token: Token) -> int:
        """A Lark token's offset in the whole text (tokens of a sub-parse count from its fragment)."""
        return int(token.start_pos or 0) + self._fragment[0]

    def fragment_start(self) -> int:
        return self._fragment[0]

    def piece(self, token: Token) -> Piece:
        """A Lark token as a piece that knows its offset in the whole text."""
        return piece(str(token), token.type, self.position(token))

    def lark_error(self, err: UnexpectedInput) -> HloParseError:
        """A located error for what Lark refused (positions made absolute for a sub-parse)."""
        start, end = self._fragment
        offset, message = wording(err, self.text, start, end)
        if (start, end) == (0, len(self.text)):
            history = getattr(err, "token_history", None)
            previous = history[-1].start_pos if history and history[-1] is not None else None
            from hloopt.text.truncation import end_of_input

            ended = end_of_input(self.text, offset, self.locations.filename, _units(), previous)
            if ended is not None:
                return ended
        expected = expected_terminals(err)
        in_fragment: int | None = getattr(err, "pos_in_stream", None)
        position = None if in_fragment is None else start + in_fragment
        stray = None if position is None else _STRAY_PERCENT.match(self.text, position, end)
        if stray is not None:  # `, to_apply=%%c`: XLA's lexer reads a `%` only before a name
            return self.error(stray.end(), "expects name")
        if "INSTRUCTION" in expected and position is not None:
            # A line that is not one whole instruction: the fine-grained rule says where it breaks.
            self._sub_parse(self.text[position:end], "instruction_parts", position)
        if "ARGS" in expected and position is not None:
            # An argument list that does not close: the fine-grained grammar says why (when its `(` is
            # in the fragment before Lark stopped; else Lark's own words are where it stopped).
            opening = self.text.rfind("(", start, position)
            if opening >= 0:
                self._argument_list(self.text[opening:end], opening)
        return self.error(offset, message)

    def check_parameter_list(self, signature: str, offset: int) -> None:
        """The ``(name: shape, …)`` of a computation's signature `signature` (at `offset`): XLA reads each
        name and shape though only the result counts, so a shape it cannot read is refused here too."""
        lead = len(signature) - len(signature.lstrip(" \t\n\r"))
        inner = signature[lead + 1 : signature.rfind(")", 0, signature.rfind("->"))]
        if not inner.strip():
            return
        at = offset + lead + 1
        if _PRINTED_PARAMETERS.fullmatch(inner):
            known = self.shapes.get  # most shapes were read before: no offset, match object or call for them
            if all(map(known, _PRINTED_PARAMETER_SHAPE.findall(inner))):
                return
            for shape in _PRINTED_PARAMETER_SHAPE.finditer(inner):
                self.shapes.read(shape.group(1), at + shape.start(1))
            return
        for part in split_top(inner):
            match = _PARAMETER.fullmatch(part)
            if match is None:
                raise self.error(at + len(part) - len(part.lstrip(" \t\n\r")), "expects a parameter `name: shape`")
            self.shapes.read(match.group(1), at + match.start(1))
            at += len(part) + 1

    # -- instructions -------------------------------------------------------------
    def body(self, text: str, begin: int, base: int, computation: Computation) -> list[Instruction]:
        """Split the body that ends `text` (which is at `base` in the whole text) from its `{` at
        `begin` into instructions, exactly as the lexer would have (see the grammar), each placed
        in `computation` as it is read.

        `text` is the token itself, not a copy: a body can be megabytes.
        """
        splitters = _splitters()
        place, scope = self.assembly.place, self.assembly.scope(computation)
        canonical, known_shape, read_shape = _CANONICAL.match, self.shapes.get, self.shapes.read
        instructions: list[Instruction] = []
        position = begin + 1
        while True:
            match = canonical(text, position)
            if match is not None:  # the common line: its head read here, saving a call per instruction
                root, name, shape_text, opcode = match.group(2, 3, 4, 5)
                head_pos = base + match.start(1)
                if name in _NOT_NAMES or name[:2] == "__":
                    self._check_head_name(match.group(1), head_pos, match.start(3) - match.start(1))
                shape = known_shape(shape_text)
                if shape is None:
                    shape = read_shape(shape_text, base + match.start(4))
                instruction, position = self._arguments_and_attributes(
                    text,
                    base,
                    head_pos,
                    root,
                    name,
                    shape,
                    opcode,
                    base + match.start(5),
                    match.end(1),
                    match.end(),
                )
            else:
                spans = splitters.split(text, position)
                if spans is None:
                    break
                instruction, position = self._instruction(text, spans, base)
            place(instruction, computation, scope)
            instructions.append(instruction)
        gap = splitters.gap.match(text, position)
        if gap is None or gap.end() != len(text) - 1:
            raise _Relex  # the lexer would not have split this body so: let it lex one instruction at a time
        return instructions

    def lexed_instruction(self, token: Token) -> Instruction | Token:
        """An INSTRUCTION token as Lark reduces it: built, or kept for `_inline_bodies` to build."""
        if self._inline_tokens is not None:
            self._inline_tokens.append(token)
            return token
        return self.instruction(token)

    def instruction(self, token: Token) -> Instruction:
        """An INSTRUCTION token (inline bodies and the token-per-instruction fallback)."""
        text = str(token)
        spans = _splitters().split(masked(text) if self.deep else text, 0)
        instruction, end = self._instruction(text, spans, self.position(token)) if spans else (None, 0)
        if instruction is None or end != len(text):
            raise self.error(self.position(token), "expects an instruction (`name = shape opcode(...)`)")
        return instruction

    def _instruction(self, text: str, spans: Spans, base: int) -> tuple[Instruction, int]:
        """Build the instruction whose head and arguments are at `spans` in `text` (which starts at
        `base` in the whole text) with the attributes that follow; also return where it ends."""
        head_start, head_end, _, _ = spans
        head = text[head_start:head_end]
        head_pos = base + head_start
        parts = _PLAIN_HEAD.fullmatch(head) if "/*" not in head else None
        if parts is not None:
            root, name, shape_text, opcode = parts.groups()
            shape_pos, opcode_pos = head_pos + parts.start(3), head_pos + parts.start(4)
            if name in _NOT_NAMES or name[:2] == "__":
                self._check_head_name(head, head_pos, parts.start(2))
        else:
            root, name, shape_text, shape_pos, opcode, opcode_pos = self._commented_head(head, head_pos)
        shape = self.shapes.read(shape_text, shape_pos) if shape_text else None
        return self._arguments_and_attributes(
            text, base, head_pos, root, name, shape, opcode, opcode_pos, spans[2], spans[3]
        )

    def _arguments_and_attributes(
        self,
        text: str,
        base: int,
        head_pos: int,
        root: str | None,
        name: str,
        shape: Shape | None,
        opcode: str,
        opcode_pos: int,
        args_start: int,
        args_end: int,
    ) -> tuple[Instruction, int]:
        """The instruction of a head already read, with its arguments (text[args_start:args_end], from just
        after its `(` to just after its `)`) and attributes; and where it ends."""
        args_pos = base + args_start
        if opcode == "constant":
            start, end = args_start, args_end - 1
            while start < end and text[start].isspace():  # `strip()` without a copy of a long literal
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            # A span of the whole text (`text` is at `base` in it): a long literal is not copied out of it.
            literal = _LiteralText(self.text, base + start, base + start, base + end)
            instruction = self._build(name, shape, opcode, opcode_pos, [], args_pos, literal)
        else:
            # XLA's `%a, %b` is matched where it stands and split; any other list is read from its copy.
            arguments = (
                text[args_start + 1 : args_end - 1].split(", %")
                if _PRINTED_NAMES.fullmatch(text, args_start, args_end - 1)
                else self._arguments(opcode, text[args_start : args_end - 1], args_pos)
            )
            instruction = self._build(name, shape, opcode, opcode_pos, arguments, args_pos)
        self.locations.instructions[instruction] = head_pos
        # XLA's print of an instruction without attributes: the next line follows; no attribute regex is tried.
        end = (
            args_end
            if text.startswith(_NEXT_INSTRUCTION, args_end)
            else self._add_attributes(instruction, text, args_end, base)
        )
        if root:
            self.assembly.mark_root(instruction)
        return instruction, end

    def _check_head_name(self, head: str, head_pos: int, start: int) -> None:
        """The instruction name at `start` in `head`, checked with its ``%`` if written."""
        percent = head[start - 1] == "%" if start else False
        name = re.match(r"[A-Za-z_][A-Za-z0-9_.\-]*", head[start:])
        assert name is not None
        check_name(
            name.group(),
            head[start - percent : name.end() + start],
            head_pos + start - percent,
            self.error,
            "instruction",
        )

    def _commented_head(self, head: str, head_pos: int) -> tuple[str | None, str, str | None, int, str, int]:
        """(root, name, shape text, its offset, opcode, its offset) of a head with comments in it."""
        match = _HEAD.match(head)
        if match is None:
            raise self.error(head_pos, "expects an instruction name and `=`")
        if match.group(2) in _NOT_NAMES or match.group(2)[:2] == "__":
            self._check_head_name(head, head_pos, match.start(2))
        rest = _COMMENT.sub(lambda m: " " * len(m.group()), head[match.end() : -1])
        opcode_match = _TRAILING_OPCODE.search(rest)
        if opcode_match is None:
            raise self.error(head_pos, "expects an opcode before `(`")
        shape_text = rest[: opcode_match.start()].strip()
        shape_pos = head_pos + match.end() + (len(rest) - len(rest.lstrip()))
        opcode_pos = head_pos + match.end() + opcode_match.start(1)
        return match.group(1), match.group(2), shape_text or None, shape_pos, opcode_match.group(1), opcode_pos

    def _arguments(self, opcode: str, body: str, start: int) -> Sequence[OperandItem] | int:
        """What stands between `opcode(` and `)` (at `start` in the text), a constant's literal and XLA's `%a, %b`
        apart (`_arguments_and_attributes`): operands or a parameter number.

        A parameter's number written plainly comes back as the int.
        Operands come back as a bare name, a (name, declared shape text) pair, or a
        nested Instruction; their offsets are found again only for an error.
        """
        if "/*" in body:
            body = _COMMENT.sub(lambda m: " " * len(m.group()), body)
        if opcode == "parameter" and SIZE.fullmatch(number := body.strip()):
            return int(number)
        if opcode == "parameter" and "," in body:
            self._check_parameter_comma(body, start)
        if "[" not in body and _NAMES.fullmatch(body):
            return _OPERAND_NAME.findall(body)
        if _SIMPLE_OPERANDS.fullmatch(body):
            return [_operand_item(name, declared) for declared, name in _OPERAND.findall(body)]
        return self._nested_arguments("(" + body + ")", start - 1, opcode)

    def _check_parameter_comma(self, body: str, start: int) -> None:
        """XLA reads a parameter's number, then its `)`: a comma before or after the number is refused
        (the empty operands other opcodes skip are not read here)."""
        comma = body.index(",")
        before = body[:comma].strip()
        if not before:
            raise self.error(start + comma, "expects integer")
        if re.fullmatch(r"-?[0-9]+", before):
            raise self.error(start + comma, "expects ')' after parameter number")

    def _nested_arguments(self, text: str, offset: int, opcode: str) -> list[OperandItem]:
        """An argument list ``(...)`` of `opcode` at `offset` read with the grammar (tuple shapes,
        nested instructions).

        Any other token (an INT) is refused here unless it may be a parameter number: then it
        stays a piece, which `_build` reads or refuses.
        """
        return self._operand_items(self._argument_list(text, offset), offset, opcode)

    def _operand_items(self, items: list[Token | Instruction], offset: int, opcode: str) -> list[OperandItem]:
        """The items of an argument list at `offset` as `_build` takes them (see `_nested_arguments`)."""
        converted: list[OperandItem] = []
        for item in items:
            if isinstance(item, Instruction):
                converted.append(item)
            elif item.type == "OPERAND":
                match = _TRAILING_NAME.search(item)
                assert match is not None
                converted.append(_operand_item(match.group(1), item[: match.start()].strip().rstrip(",").rstrip()))
            elif opcode == "parameter":
                converted.append(piece(str(item), item.type, offset + int(item.start_pos or 0)))
            else:
                raise self.error(offset + int(item.start_pos or 0), f"expects an operand name, found {item!s}")
        return converted

    def _argument_list(self, text: str, offset: int) -> list[Token | Instruction]:
        """The items of the argument list `text` at `offset`, each anonymous instruction in it built.

        A loop over an explicit stack, not a recursion: XLA reads anonymous instructions nested
        `MAX_OPERAND_NESTING` deep, each a sub-parse here. Everything happens in the order a
        recursive reading has: an instruction's shape, then its arguments, then it; a list's
        names checked once its instructions are built; and a list that Lark refuses after some of
        its instructions were reduced refused only once those are built (their errors come first).
        """
        structures: dict[int, Brackets] = {}  # each list's source's brackets, found once (`_quick_items`)
        stack = [self._list_frame(text, 0, len(text), offset, None, structures)]
        while True:
            frame = stack[-1]
            if frame.next < len(frame.items):
                item = frame.items[frame.next]
                frame.next += 1
                if isinstance(item, _Nested):
                    if len(stack) > MAX_OPERAND_NESTING:
                        message = (
                            f"anonymous instructions nest more than {MAX_OPERAND_NESTING} levels deep "
                            "(XLA's parser overflows its stack)"
                        )
                        raise self.error(item.head_pos, message)
                    opened = self._open_nested(item, structures)
                    if isinstance(opened, Instruction):
                        frame.built.append(opened)
                    else:
                        stack.append(opened)
                continue
            stack.pop()
            if frame.refusal is not None:
                raise frame.refusal
            built = iter(frame.built)
            items = [next(built) if isinstance(item, _Nested) else item for item in frame.items]
            if frame.nested is None:
                return items
            assert frame.opcode is not None
            operands = self._operand_items(items, frame.offset, frame.opcode)
            stack[-1].built.append(self._anonymous(frame.nested, frame.shape, frame.opcode, operands, None))

    def _list_frame(
        self, source: str, start: int, end: int, offset: int, nested: _Nested | None, structures: dict[int, Brackets]
    ) -> _ListFrame:
        """The argument list `source[start:end]` at `offset` parsed, its anonymous instructions still to
        build; a refusal is kept, to be raised once the instructions Lark reduced before it are built."""
        outer, self._deferred = self._deferred, []
        try:
            items = self._quick_items(source, start, end, offset, structures)
            if items is None:
                text = source if (start, end) == (0, len(source)) else source[start:end]
                items = cast("list[Token | _Nested]", self._sub_parse(text, "nested_arguments", offset))
            return _ListFrame(items, offset, nested)
        except HloParseError as refusal:
            if not self._deferred:
                raise
            return _ListFrame(list(self._deferred), offset, None, refusal=refusal)
        finally:
            self._deferred = outer

    def _quick_items(
        self, source: str, start: int, end: int, offset: int, structures: dict[int, Brackets]
    ) -> list[Token | _Nested] | None:
        """The items of the argument list `source[start:end]` at `offset`, read by Lark from its skeleton: the
        list with each `(...)` group directly inside it written `()`. None: read the list itself.

        A chain of anonymous instructions nested d deep costs d sub-parses; were each of the whole list,
        the text below it included, that would be d times the text. The skeleton is the list's own text
        and the brackets' pairing is found once for the whole source (`Brackets`), so the chain costs
        about the text once. Lark lexes the skeleton as it would the list: the grammar's regexes read a
        `(...)` group only whole (LITERAL, a tuple shape), and `Brackets` pairs them as those regexes do
        (where it may not, or where they could not reach so deep, the list is read itself). Each token is
        handed on with the list's own text and offsets; a LITERAL as a `_Run` of the source, not a copy.
        Anything Lark refuses is read again from the list itself, so errors are worded from the text.
        """
        brackets = structures.get(id(source))
        if brackets is None:
            brackets = structures[id(source)] = Brackets(source)
        # Unpaired, or nested deeper than the regexes reach unmasked (the skeleton's groups always match).
        if not brackets.usable or (not self.deep and brackets.depth > _REGEX_DEPTH):
            return None
        index = brackets.index(start)
        if index is None or source[start] != "(" or brackets.closes[index] != end - 1 or source[end - 1] != ")":
            return None
        pieces: list[str] = []
        #: (where in the skeleton, where in the source) each stretch of the source it copies starts.
        stretches = [(0, start)]
        at, length = start, 0
        for child in brackets.children(index):
            opened, closed = brackets.opens[child], brackets.closes[child]
            bracket = source[opened]
            if source[closed] != _CLOSING[bracket]:
                return None  # a pairing the group regexes make too, but nothing reads it as this pass does
            if bracket == "(":
                pieces.append(source[at : opened + 1])
                length += opened + 1 - at
                stretches.append((length, closed))
                at = closed
        if not pieces:
            return None  # nothing to leave out: the list itself is as short
        pieces.append(source[at:end])
        skeleton = "".join(pieces)
        try:
            lexed = masked(skeleton) if self.deep else skeleton
        except TooDeep:
            return None
        skeleton_starts = [stretch[0] for stretch in stretches]

        def in_source(position: int) -> int:
            skeleton_at, source_at = stretches[bisect_right(skeleton_starts, position) - 1]
            return source_at + position - skeleton_at

        outer = self._fragment
        self._fragment = (offset, offset + end - start)
        self.lexed += len(lexed)
        try:
            interactive = _lark_for(self).parse_interactive(lexed, start="nested_arguments")
            token: Token | None = None
            for token in interactive.lexer_thread.lex(interactive.parser_state):
                first, last = in_source(int(token.start_pos or 0)), in_source(int(token.end_pos or 0) - 1) + 1
                value = _Run(source, first, last) if token.type == "LITERAL" else source[first:last]
                interactive.feed_token(Token(token.type, value, start_pos=first - start, end_pos=last - start))
            return cast("list[Token | _Nested]", interactive.feed_eof(token))
        except UnexpectedInput:
            self._deferred = []
            return None
        finally:
            self._fragment = outer
            _POOL.holder.current = self

    def defer_nested(self, head: Token, arguments: Token) -> _Nested:
        """An anonymous instruction written as an operand, as its list's parse meets it: built later."""
        run = arguments.value
        if isinstance(run, _Run):  # `_quick_items`: a span of its source
            source, start, end = run.source, run.start, run.end
        else:
            source = str(arguments)
            start, end = 0, len(source)
        nested = _Nested(str(head), self.position(head), source, start, end, self.position(arguments))
        self._deferred.append(nested)
        return nested

    def _open_nested(self, nested: _Nested, structures: dict[int, Brackets]) -> Instruction | _ListFrame:
        """Read the head of an anonymous instruction: a constant is built at once; any other
        comes back as its argument list's frame, built when the frame is done."""
        # XLA's lexer needs no blank between the shape and the opcode (`f32[2]broadcast(`).
        written = nested.head.strip()
        after_shape = _OPCODE_AFTER_SHAPE.search(written)
        assert after_shape is not None  # it matches the empty end at least
        shape_text, opcode = written[: after_shape.start()].strip(), after_shape.group()
        shape = self.shapes.read(shape_text, nested.head_pos) if shape_text else None
        source, start, end = nested.source, nested.start, nested.end
        if opcode == "constant":
            literal = _LiteralText(source[start + 1 : end - 1].strip(), nested.arguments_pos + 1)
            return self._anonymous(nested, shape, opcode, [], literal)
        comma = source.find(",", start, end) if opcode == "parameter" else -1
        if comma >= 0:
            # Up to the first comma, unless a comment may hide it: the rest is not read here.
            inside = source[start + 1 : comma + 1]
            if "/*" in inside:
                inside = source[start + 1 : end - 1]
            body = _COMMENT.sub(lambda m: " " * len(m.group()), inside)
            if "," in body:
                self._check_parameter_comma(body, nested.arguments_pos + 1)
        frame = self._list_frame(source, start, end, nested.arguments_pos, nested, structures)
        frame.shape, frame.opcode = shape, opcode
        return frame

    def _anonymous(
        self,
        nested: _Nested,
        shape: Shape | None,
        opcode: str,
        operands: list[OperandItem],
        literal: _LiteralText | None,
    ) -> Instruction:
        """The anonymous instruction `nested`, named ``<opcode>.anon`` as XLA does."""
        name = f"{opcode}.anon"
        count = self._anon_counts.get(name, 0)
        self._anon_counts[name] = count + 1
        unique = name if count == 0 else f"{name}.{count}"
        instruction = self._build(unique, shape, opcode, nested.head_pos, operands, nested.arguments_pos + 1, literal)
        self.locations.instructions[instruction] = nested.head_pos
        return instruction

    def _build(
        self,
        name: str,
        shape: Shape | None,
        opcode: str,
        opcode_pos: int,
        arguments: Sequence[OperandItem] | int,
        args_pos: int,
        literal_text: _LiteralText | None = None,
    ) -> Instruction:
        """The instruction, its operands held as names; `literal_text` is a constant's (its `arguments` are empty),
        and an int `arguments` a parameter's number."""
        literal: Literal | None = None
        parameter_number: int | None = None
        operands: Sequence[OperandItem] = ()
        if literal_text is not None:
            if shape is None:
                raise self.error(opcode_pos, "constant needs a shape")
            text, start, end = literal_text.text, literal_text.start, literal_text.end
            literal = Literal(shape, text=text) if end is None else Literal.in_source(shape, text, start, end)
            try:
                literal.check_once(literal.check, self._literals)
            except LiteralError as err:
                raise self.error(literal_text.offset + err.offset, str(err)) from None
        elif isinstance(arguments, int):
            parameter_number = arguments
        elif opcode == "parameter":
            number = arguments[0] if len(arguments) == 1 else None
            if not (isinstance(number, Piece) and number.type == "INT" and SIZE.fullmatch(number)):
                raise self.error(opcode_pos, "parameter expects one non-negative parameter number")
            parameter_number = int(number)
        else:
            operands = arguments  # names, pairs and instructions: `_nested_arguments` refused any other item
        if opcode in ("send-done", "outfeed") and shape is not None:
            # XLA's parser gives these the shape token[] whatever the text says (old
            # dumps write `(data, token[])` or `()`); keep the two in agreement.
            shape = ArrayShape("token")
        # Opcodes and attribute names repeat on every line: one string each, not one per instruction.
        instruction = Instruction(name, intern(opcode), shape, (), None, literal, parameter_number)
        self._pending[instruction] = (operands, None, args_pos)
        return instruction

    def _add_attributes(self, instruction: Instruction, text: str, position: int, base: int) -> int:
        """The ``, name=value`` run at `position` in `text` (at `base` in the whole text); return its end.

        Attribute offsets are found again only for an error. A run that is the rest of its line and was
        read before (`_runs`) is not matched again.
        """
        newline = text.find("\n", position, position + _RUN_CACHED)  # bounded: a body may be one long line
        line_rest = text[position:newline] if newline >= 0 and not self.deep else None
        if line_rest is not None and text.startswith(_NEXT_INSTRUCTION, newline):
            known = self._runs.get(line_rest)
            if known is not None:
                self.locations.attribute_runs[instruction] = base + position
                instruction.attributes.update(known)
                return newline
        attribute_re = _splitters().attribute
        canonical = _CANONICAL_ATTRIBUTE.match
        lexed = masked(text) if self.deep else text  # what the regexes read; values come from `text`
        match = canonical(lexed, position) or attribute_re.match(lexed, position)
        if match is None:
            return position
        self.locations.attribute_runs[instruction] = base + position
        attributes = instruction.attributes  # empty until now, and every key read goes in
        plain = True  # every attribute canonical, none to resolve
        while match is not None:
            position = match.end()
            if lexed is not text:
                key, value = attribute(text[match.start() : position])
            elif match.re is _CANONICAL_ATTRIBUTE:
                key, value = match.group(1, 2)
            else:
                key, value = attribute(match.group())
                if value[:1] == '"' or (key == "backend_config" and value[:1] == "{" and value[-1] != "}"):
                    self._check_value_end(value, base + position - len(value))
            key = intern(key)
            if key in attributes:  # even with the same value, as XLA's parser
                where = base + match.start() + attribute_name_offset(match.group())
                raise self.error(where, f"attribute {key} already exists")
            if key in _RESOLVED_LATER:
                self._set_attribute(instruction, key, value, base + position - len(value))
                plain = False
            else:
                attributes[key] = value
                plain = plain and match.re is _CANONICAL_ATTRIBUTE
            if text.startswith(_NEXT_INSTRUCTION, position):
                break
            match = canonical(lexed, position) or attribute_re.match(lexed, position)
        if plain and position == newline and line_rest is not None:
            # Canonical attributes up to the end of the line, which the next line cannot continue: the same
            # text reads the same way wherever it stands (the regex looks no further than the newline).
            self._runs[line_rest] = dict(attributes)
        return position

    def _check_value_end(self, value: str, value_pos: int) -> None:
        """A string value, or a JSON `backend_config`, is one token to XLA's lexer: what the grammar read on
        after it (`"x"6`, `{…}.`) starts the next instruction, which needs a name."""
        string = _STRING_VALUE.match(value)
        end = _past_braces(value, 1) if string is None else string.end()
        gap = _BLANKS_AND_COMMENTS.match(value, end)
        junk = len(value) if gap is None else gap.end()
        if junk < len(value) and value[junk] != "}":
            raise self.error(value_pos + junk, "expects name")

    def _set_attribute(self, instruction: Instruction, key: str, value: str, value_pos: int) -> None:
        """Record one attribute of `_RESOLVED_LATER`: names of callees and control predecessors."""
        if key in INSTRUCTION_LIST_ATTRIBUTES:
            self.assembly.hold_control_predecessors(instruction, value)
        elif key in COMPUTATION_ATTRIBUTES and value.startswith("{"):
            job = _InlineBody(instruction, key, value, value_pos)
            if self._inline_jobs is None:
                self._inline_bodies(job)
            else:  # inside `_inline_bodies`: its loop reads this body before the next instruction
                self._inline_jobs.append(job)
                instruction.attributes[key] = value  # until then: a second `key` is still "already exists"
        else:
            instruction.attributes[key] = value  # resolved when the module closes: callees may come later
            self.assembly.hold_callee(instruction, key)

    def _inline_bodies(self, job: _InlineBody) -> None:
        """The inline computation of `job` and those written inside it, from an explicit stack: XLA
        reads them `MAX_INLINE_NESTING` deep, each a sub-parse here.

        Everything happens in the order of a recursive reading: a body's instructions built one by
        one, the inline bodies an instruction writes read right after it (before the next, so
        anonymous instructions are counted in text order) and named innermost first; an error
        that Lark or an instruction raises after an inline body is raised once that body is read.
        """
        stack, outer = [self._body_frame(job)], self._fragment
        try:
            while stack:
                frame = stack[-1]
                if frame.jobs:
                    if len(stack) >= MAX_INLINE_NESTING:
                        message = (
                            f"inline computations nest more than {MAX_INLINE_NESTING} levels deep "
                            "(XLA's parser overflows its stack)"
                        )
                        raise self.error(frame.jobs[0].value_pos, message)
                    stack.append(self._body_frame(frame.jobs.pop(0)))
                    continue
                if frame.next < len(frame.tokens):
                    token = frame.tokens[frame.next]
                    frame.next += 1
                    self._inline_jobs = frame.jobs
                    # The token's offsets count from its body, the fragment Lark lexed it in.
                    self._fragment = (frame.job.value_pos, frame.job.value_pos + len(frame.job.value))
                    try:
                        frame.built.append(self.instruction(token))
                    except HloParseError as refusal:
                        if not frame.jobs:
                            raise
                        frame.refusal, frame.next = refusal, len(frame.tokens)
                    continue
                stack.pop()
                if frame.refusal is not None:
                    raise frame.refusal
                computation = self.assembly.inline_computation(frame.built, frame.job.value_pos)
                frame.job.instruction.attributes[frame.job.key] = computation
        finally:
            self._inline_jobs, self._fragment = None, outer

    def _body_frame(self, job: _InlineBody) -> _BodyFrame:
        """The inline body of `job` lexed into its instructions' tokens, to be built one by one; a
        refusal is kept, to be raised once the instructions Lark reduced before it are built."""
        self._inline_tokens = []
        try:
            tokens = cast("list[Token]", self._sub_parse(job.value, "inline_body", job.value_pos))
            return _BodyFrame(job, tokens)
        except HloParseError as refusal:
            if not self._inline_tokens:
                raise
            return _BodyFrame(job, list(self._inline_tokens), refusal=refusal)
        finally:
            self._inline_tokens = None

    # -- computations and module -----------------------------------------------
    def computation(self, children: list[Token | _Signature | Instruction | None]) -> list[Computation]:
        """``ENTRY? name signature? { body } attributes``, its body one BODY token or INSTRUCTION tokens;
        or ``ENTRY? COMPUTATIONS attributes``, a run of computations.

        The children come in that order: the name is checked for a duplicate before the body is split.
        """
        is_entry = False
        closed: list[Computation] = []
        computation: Computation | None = None
        name_at = 0
        declared: Piece | None = None
        instructions: list[Instruction] = []
        for child in children:
            if child is None:
                continue
            if isinstance(child, Instruction):
                instructions.append(child)
            elif isinstance(child, _Signature):
                declared = child.result
            elif child.type == "COMPUTATIONS":
                closed, (computation, name_at, declared, instructions) = self._computation_run(child, is_entry)
            elif computation is None:
                if child.type == "ENTRY":
                    is_entry = True
                    continue
                name_at = self.position(child)
                computation = self._open_computation(child, name_at, is_entry)
            elif child.type == "BODY":
                instructions = self.body(child, 0, self.position(child), computation)
            elif child.type == "ATTR":
                key, value = attribute(child)
                at = self.position(child) + attribute_name_offset(child)
                if key in computation.attributes:
                    raise self.error(at, f"attribute {key} already exists")
                self.check(partial(check_computation_attribute, key, value), at)
                computation.attributes[key] = value
        assert computation is not None
        closed.append(self.assembly.close_computation(computation, name_at, instructions, declared))
        return closed

    def _open_computation(self, written: str, name_at: int, is_entry: bool) -> Computation:
        """The computation named `written` (with or without its ``%``) at `name_at`."""
        name = written.lstrip("%")
        if name in _NOT_NAMES:
            check_name(name, written, name_at, self.error, "computation")
        return self.assembly.open_computation(name, name_at, is_entry)

    def _computation_run(self, token: Token, is_entry: bool) -> tuple[list[Computation], _OpenComputation]:
        """A COMPUTATIONS token: every computation in it but the last closed, and the last still open
        (the attributes after the token are its own).

        Each one is the repeated part's match in the whole text where the lexer's repetition matched
        it (a sub-parse never reads computations): the same match, lookaheads past the token included.
        """
        text = self.text
        position = self.position(token)
        run = token.value
        assert isinstance(run, _Run) and run.start == position  # `_match_runs_uncopied`
        closed: list[Computation] = []
        # Each slice is the one copy of a computation's text that the parser holds (Lark's lexer made none: `_Run`).
        for stop in run.ends[:-1]:
            computation, name_at, declared, instructions = self._whole_computation(
                text[position:stop], position, is_entry
            )
            closed.append(self.assembly.close_computation(computation, name_at, instructions, declared))
            position, is_entry = stop, False
        return closed, self._whole_computation(text[position : run.ends[-1]], position, is_entry)

    def _whole_computation(self, text: str, at: int, is_entry: bool) -> _OpenComputation:
        """One computation of a run, `text`, at `at` in the whole text, read as the lexer would have read its name,
        signature and body one by one."""
        splitters = _splitters()
        head, blanks = splitters.computation_head.match(text), _BLANKS.match(text)
        assert head is not None and blanks is not None  # the computation's own pieces
        name = splitters.computation_name.match(text, blanks.end())
        assert name is not None
        body_at = head.end()
        if name.group().lstrip("%") in _NOT_NAMES or not text.startswith("{", body_at):
            raise _Relex  # a keyword, not a name, to the lexer; or not the lexer's signature: let it say
        start = at + name.start()  # `at`: where the blanks before the name start
        computation = self._open_computation(name.group(), start, is_entry)
        written = text[name.end() : body_at].rstrip()  # the signature, after the blanks the lexer skips
        if written:
            self.check_parameter_list(written, at + name.end())
        declared = _declared_result(written, at + name.end() + len(written)) if "->" in written else None
        return computation, start, declared, self.body(text, body_at, at, computation)

    def module(self, children: list[_Header | _StackFrames | list[Computation] | None]) -> Module:
        header = next((c for c in children if isinstance(c, _Header)), None)
        stack_frames = next((c.text for c in children if isinstance(c, _StackFrames)), None)
        if header is None:
            return self.assembly.module(None, [], stack_frames)
        return self.assembly.module(header.name, header.attributes, stack_frames)


#: The characters XLA's lexer reads outside strings and comments, as bytes: printable ASCII, space, tab, CR and LF
#: (Python's ``\\s`` and ``\\d`` match far more: a no-break space, ``٣``, ``２``). Any other is foreign.
_READ_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\r"
#: How much of a text `_has_foreign` encodes at a time: a bounded copy (a constant may be a gigabyte), in the cache.
_FOREIGN_CHUNK = 1 << 16


def _has_foreign(text: str) -> bool:
    """Whether `text` has a foreign character. A non-ASCII text has one; an ASCII one is searched as bytes, a
    chunk at a time: `bytes.translate` deletes the characters XLA reads, in a seventh of the time a regex's
    search for the others takes (it steps through a character class once per character)."""
    if not text.isascii():
        return True
    return any(
        text[at : at + _FOREIGN_CHUNK].encode("ascii").translate(None, _READ_BYTES)
        for at in range(0, len(text), _FOREIGN_CHUNK)
    )


#: What XLA's lexer reads past whole (strings and comments, where any character goes), the start of a
#: `backend_config={` (group 1: XLA reads a JSON config as raw text), the start of `frontend_attributes={`
#: (group 3), or a foreign character (group 2); plain characters match nothing, so `search` skips them
#: at C speed.
_LEXED = re.compile(
    r'"(?:[^"\\]|\\.)*+"|\'(?:[^\'\\]|\\.)*+\'|/\*(?:[^*]|\*(?!/))*+\*/|//[^\n\r]*+'
    r"|(backend_config=\{)|([^\x20-\x7e\t\n\r])|(frontend_attributes=\{)"
)
#: Blanks and block comments, where XLA's lexer looks for the next token.
_BLANKS_AND_COMMENTS = re.compile(r"(?:[ \t\r\n]|/\*.*?\*/)*", re.S)
#: A string value as XLA's lexer reads it.
_STRING_VALUE = re.compile(r'"(?:[^"\\]|\\.)*+"')
_FOREIGN_MESSAGE = "unexpected character U+{:04X} (outside strings and comments XLA reads ASCII only)"
#: A backslash escape absl::CUnescape refuses, if the backslash is not itself escaped (`_bad_escape` looks): XLA's
#: lexer refuses a string holding one (a comment or a raw JSON value may hold one too: `_lexer_refusal` looks).
#: It starts with the backslash, so that `search` skips the text between at C speed.
_ESCAPE_CANDIDATE = re.compile(r"\\(?:[^ntr\\'\"?abfv0-7xuU]|x(?![0-9a-fA-F])|u(?![0-9a-fA-F]{4})|U(?![0-9a-fA-F]{8}))")


def _bad_escape(text: str, start: int = 0, end: int | None = None) -> bool:
    """Whether `text[start:end]` holds an escape absl::CUnescape refuses (after an even run of backslashes)."""
    for candidate in _ESCAPE_CANDIDATE.finditer(text, start, len(text) if end is None else end):
        at = candidate.start()
        while at > start and text[at - 1] == "\\":
            at -= 1
        if (candidate.start() - at) % 2 == 0:
            return True
    return False


#: Inside a JSON value: a string, or a brace (group 1).
_JSON_PART = re.compile(r'"(?:[^"\\]|\\.)*+"|([{}])')
#: Inside `frontend_attributes={…}`: a string value, a braced value (group 1, read raw as XLA reads it),
#: the closing brace (group 2), or a foreign character (group 3), in a key say.
_FRONTEND_PART = re.compile(r'"(?:[^"\\]|\\.)*+"|(=\{)|(\})|([^\x20-\x7e\t\n\r])')


def _lexer_refusal(text: str) -> tuple[int, str] | None:
    """Where and why XLA's lexer refuses `text` before any parse, if it does: a character it does not read
    outside a string, a comment, a JSON `backend_config` or a braced frontend attribute value; or a string
    whose escape it cannot unescape (``"a\\Sb"``: "expects string" where the string starts).

    Two C-speed searches answer for the common text; only a text with some such character or escape (in a
    string or comment, say: metadata may hold any) is walked, one string or comment at a time.
    """
    foreign, escape = _has_foreign(text), "\\" in text and _bad_escape(text)
    if not (foreign or escape):
        return None
    token = _LEXED.search(text)
    while token is not None:
        if token.group(2) is not None:
            return token.start(), _FOREIGN_MESSAGE.format(ord(token.group(2)))
        if escape and token.group()[:1] == '"' and _bad_escape(text, token.start(), token.end()):
            return token.start(), "expects string"
        position = token.end()
        if token.group(1) is not None:
            position = _past_braces(text, position)
        elif token.group(3) is not None:  # keys are lexed; values are strings or raw braces
            part = _FRONTEND_PART.search(text, position)
            while part is not None and part.group(2) is None:
                if part.group(3) is not None:
                    return part.start(), _FOREIGN_MESSAGE.format(ord(part.group(3)))
                if escape and part.group()[:1] == '"' and _bad_escape(text, part.start(), part.end()):
                    return part.start(), "expects string"
                position = part.end() if part.group(1) is None else _past_braces(text, part.end())
                part = _FRONTEND_PART.search(text, position)
            position = len(text) if part is None else part.end()
        if position >= len(text):
            return None
        token = _LEXED.search(text, position)
    return None


def _past_braces(text: str, position: int) -> int:
    """Past the brace that closes the one opened just before `position` (the text's end if none), counting
    braces outside JSON strings."""
    depth, part = 1, _JSON_PART.search(text, position)
    while depth and part is not None:
        depth += {"{": 1, "}": -1}.get(part.group(1) or "", 0)
        position, part = part.end(), _JSON_PART.search(text, part.end())
    return position if not depth else len(text)


def parse(text: str, filename: str = "<string>", *, callees_first: bool = False) -> Module:
    """Parse HLO module text into the IR; raises HloParseError with file:line:col.

    The fast reading (one token per computation body) is tried first; a text it cannot
    read, errors included, is read again one token per instruction, which says where
    and why it fails. `callees_first` lets a computation be called before it is defined
    (XLA refuses that) and orders the module's computations callees first.
    """
    if "\0" in text:
        raise parse_error_at(text, text.index("\0"), filename, "NUL character in input")
    refused = _lexer_refusal(text)
    if refused is not None:
        raise parse_error_at(text, refused[0], filename, refused[1])
    try:
        try:
            return cast(Module, _lark_for(_Parse(text, filename, callees_first)).parse(text, start="start"))
        except (_Relex, UnexpectedInput):
            pass  # read again one instruction at a time, which also words any error
        state = _Parse(text, filename, callees_first)
        try:
            return cast(Module, _lark_for(state, exact=True).parse(text, start="exact_start"))
        except UnexpectedInput as err:
            try:
                shallow = masked(text) is text
            except TooDeep as deep:
                message = f"brackets nest more than {MAX_NESTING} levels deep (XLA's parser overflows its stack)"
                raise parse_error_at(text, deep.offset, filename, message) from None
            if shallow:
                raise state.lark_error(err) from None
        # Brackets nested deeper than the grammar's regexes count: read again from the masked copy.
        state = _Parse(text, filename, callees_first, deep=True)
        try:
            return cast(Module, state.run(_lark_for(state, exact=True), text, "exact_start", True))
        except UnexpectedInput as err:
            raise state.lark_error(err) from None
    except RecursionError:  # a check that walks shapes recursively, past Python's recursion limit
        raise parse_error_at(text, deepest(text), filename, "input nests too deeply") from None
