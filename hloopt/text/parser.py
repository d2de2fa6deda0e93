"""HLO text → IR, with the Lark grammar in ``grammar/hlo.lark``.

The LALR parser runs with an inline transformer: no parse tree is built, each
rule's callback builds IR objects directly. Operand names are resolved when a
computation closes, in text order, exactly as XLA requires (an operand must
be defined earlier in the same computation).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from hloopt.errors import HloParseError, parse_error_at
from hloopt.support.gcpause import paused_gc
from hloopt.text.splitting import Spans, Splitters
from hloopt.ir.literal import Literal, LiteralError
from hloopt.ir.module import (
    COMPUTATION_ATTRIBUTES,
    COMPUTATION_LIST_ATTRIBUTES,
    INSTRUCTION_LIST_ATTRIBUTES,
    Computation,
    ComputationList,
    Instruction,
    InstructionList,
    Module,
    ProgramLayout,
)
from hloopt.text.validation import InvalidHlo, compatible, validate
from hloopt.ir.shape import (
    PRIMITIVE_TYPES,
    UNBOUNDED,
    ArrayShape,
    BufferShape,
    Layout,
    Shape,
    TupleShape,
    default_layout,
)

_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\s*\[([^\]]*)\](?:\s*\{\s*([^{}]*?)\s*\})?")
_NAME_LIST = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_TRAILING_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)\s*$")
_HEAD = re.compile(r"(ROOT(?:\s|/\*.*?\*/)+)?%?([A-Za-z_][A-Za-z0-9_.\-]*)(?:\s|/\*.*?\*/)*=", re.S)
#: A dimension, layout entry or parameter number: XLA's int64, so at most 18 digits here.
_SIZE = re.compile(r"\d{1,18}")
_TRAILING_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)\s*$")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_NAME = r"%?[A-Za-z_][A-Za-z0-9_.\-]*"
#: An operand list of names alone (compiled text): split on commas.
_NAMES = re.compile(rf"\s*(?:{_NAME}\s*(?:,\s*{_NAME}\s*)*)?")
_OPERAND_TEXT = r"(?:([a-z][a-z0-9]*\s*\[[^\]\[]*\](?:\s*\{[^{}]*\})?)\s*,?\s*)?%?([A-Za-z_][A-Za-z0-9_.\-]*)"
#: An operand: group 1 its declared array shape, if any, group 2 its name.
_OPERAND = re.compile(_OPERAND_TEXT)
#: An operand list of names with array shapes (XLA's canonical text), split without Lark.
_SIMPLE_OPERANDS = re.compile(rf"\s*(?:{_OPERAND_TEXT}\s*(?:,\s*{_OPERAND_TEXT}\s*)*)?")
#: A head `ROOT %name = shape opcode(` with no comments in it.
_PLAIN_HEAD = re.compile(r"(ROOT\s+)?%?([A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*(?:(.*[\]})])\s*)?([a-z][a-z0-9\-]*)\s*\(", re.S)

#: Human words for the grammar's terminals, for "expected …" messages.
_TERMINAL_WORDS = {
    "INSTRUCTION": "an instruction (`name = shape opcode(...)`)",
    "HEAD": "an instruction (`name = shape opcode(...)`)",
    "ARGS": "an argument list closed by `)`",
    "OPERAND": "an operand name",
    "ATTR": "an attribute (`name=value`)",
    "SHAPE": "a shape",
    "ARRAY_SHAPE": "a shape",
    "LITERAL": "a literal in parentheses",
    "INT": "an integer",
    "COMPUTATION_NAME": "a computation name",
    "MODULE_NAME": "a module name",
    "SIGNATURE": "a signature `(params) -> shape`",
    "ENTRY": "`ENTRY`",
    "HLOMODULE": "`HloModule`",
    "STACK_KEYWORD": "a stack-frame section",
    "STRING": "a string",
    "GROUP": "a `{...}` group",
    "COMMA": "`,`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "__ANON_0": "`b(`",
    "$END": "end of input",
}


class _Builder(Transformer):  # type: ignore[type-arg]
    """Inline transformer: rule callbacks build the IR while the LALR parser reduces."""

    def __init__(self, holder: _ParseHolder) -> None:
        super().__init__()
        self._holder = holder

    @property
    def _parse(self) -> _Parse:
        assert self._holder.current is not None
        return self._holder.current

    def shape(self, children: list[Any]) -> Shape:
        child = children[0]
        if isinstance(child, (TupleShape, BufferShape)):
            return child
        return self._parse.array_shape(child, self._parse.position(child))

    def tuple_shape(self, children: list[Any]) -> TupleShape:
        return TupleShape(tuple(c for c in children if c is not None))

    def buffer_shape(self, children: list[Any]) -> BufferShape:
        inner = children[0]
        if not isinstance(inner, ArrayShape):
            raise self._parse.error(self._parse.position_of_fragment(), "a buffer shape b(...) must wrap an array shape")
        return BufferShape(inner)

    def header(self, children: list[Token]) -> tuple[str, Token, list[Token]]:
        return ("header", children[0], children[1:])

    def stack_frame_section(self, children: list[Token]) -> tuple[int, int]:
        return (children[0].start_pos, children[-1].end_pos)

    def stack_frames(self, children: list[tuple[int, int]]) -> tuple[str, str]:
        return ("stack_frames", self._parse.text[children[0][0] : children[-1][1]])

    def nested_operand(self, children: list[Token]) -> Instruction:
        return self._parse.nested_instruction(children[0], children[1])

    def nested_arguments(self, children: list[Any]) -> list[Any]:
        return [c for c in children if c is not None]

    def signature(self, children: list[Token]) -> _Signature:
        token = children[0]
        result = token.rpartition("->")[2]
        return _Signature(_piece(result.strip(), "SHAPE", token.end_pos - len(result.lstrip())))

    def instruction(self, children: list[Token]) -> Instruction:
        return self._parse.instruction(children[0])

    def computation(self, children: list[Any]) -> Computation:
        return self._parse.computation(children)

    def inline_body(self, children: list[Any]) -> list[Instruction]:
        return children

    def module(self, children: list[Any]) -> Module:
        return self._parse.module(children)

    def start(self, children: list[Any]) -> Module:
        return children[0]

    # The exact rules build the same things (see `exact_start` in the grammar).
    exact_computation = computation
    exact_module = module
    exact_signature = signature
    exact_start = start


@lru_cache(maxsize=1)
def _grammar() -> str:
    return resources.files("hloopt.text").joinpath("hlo.lark").read_text()


class _ParseHolder:
    """The parse the shared builder is working for (sub-parses nest inside one text's parse)."""

    current: _Parse | None = None


class _ParserPool(threading.local):
    """One Lark parser per thread: the builder it is bound to carries per-parse state."""

    lark: Lark | None = None
    holder: _ParseHolder = _ParseHolder()


_POOL = _ParserPool()


def _lark_for(parse: _Parse) -> Lark:
    """The thread's Lark parser (built once; Lark caches its tables on disk), bound to `parse`."""
    if _POOL.lark is None:
        holder = _ParseHolder()
        _POOL.lark = Lark(
            _grammar(),
            parser="lalr",
            lexer="contextual",
            start=["start", "exact_start", "shape", "inline_body", "nested_arguments", "instruction_parts"],
            transformer=_Builder(holder),
            cache=True,
            propagate_positions=False,
            maybe_placeholders=True,
        )
        _POOL.holder = holder
    _POOL.holder.current = parse
    return _POOL.lark


@dataclass(frozen=True)
class _Signature:
    """A computation's ``(params) -> result``; XLA checks only the result against the root."""

    result: _Piece


class _Piece(str):
    """A slice of the source with its offset: what a Lark Token is, for much less work."""

    type: str
    start_pos: int
    end_pos: int


def _operand_item(name: str, declared: str | None) -> str | tuple[str, str]:
    """An operand as `_place` resolves it: its name, with the shape text it declares if any."""
    return (name, declared) if declared else name


def _piece(text: str, kind: str, start: int) -> _Piece:
    piece = _Piece(text)
    piece.type = kind
    piece.start_pos = start
    piece.end_pos = start + len(text)
    return piece


@lru_cache(maxsize=1)
def _splitters() -> Splitters:
    assert _POOL.lark is not None
    return Splitters.from_lark(_POOL.lark)


class _Parse:
    """State of one parse of one text."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.computations: dict[str, Computation] = {}
        self.ordered: list[Computation] = []
        #: Operand items, control-predecessors text and the argument list's offset, until placed.
        self._pending: dict[Instruction, tuple[list[Any], str | None, int]] = {}
        self._shape_cache: dict[str, Shape] = {}
        self._inline_count = 0
        self._callee_refs: list[tuple[Instruction, list[str]]] = []
        self._roots: set[Instruction] = set()
        self._positions: dict[Instruction, int] = {}
        self._computation_positions: dict[Computation, int] = {}
        self._module_attribute_positions: dict[str, int] = {}
        #: Where each instruction's attribute run starts, to find an attribute again for an error.
        self._attribute_runs: dict[Instruction, int] = {}
        self._anon_counts: dict[str, int] = {}
        #: (start, end) in the text of what Lark is parsing now: the text, or a sub-parse's fragment.
        self._fragment = (0, len(text))

    # -- errors ---------------------------------------------------------------
    def error(self, offset: int, message: str) -> HloParseError:
        return parse_error_at(self.text, offset, self.filename, message)

    # -- shapes ---------------------------------------------------------------
    def array_shape(self, token: str, offset: int = 0) -> ArrayShape:
        match = _ARRAY_SHAPE.fullmatch(token.strip())
        if match is None:
            raise self.error(offset, f"expects a shape, found {token!r}")
        element_type, dims_text, layout_text = match.groups()
        if element_type not in PRIMITIVE_TYPES:
            raise self.error(offset, f"unknown primitive type {element_type!r}")
        dims: list[int] = []
        dynamic: list[bool] = []
        for part in (p.strip() for p in dims_text.split(",")) if dims_text.strip() else ():
            if part == "?":
                dims.append(UNBOUNDED)
                dynamic.append(True)
                continue
            bounded = part.startswith("<=")
            digits = part[2:].strip() if bounded else part
            if not _SIZE.fullmatch(digits):
                raise self.error(offset, f"bad dimension {part[:40]!r} in shape {token[:80]!r}")
            dims.append(int(digits))
            dynamic.append(bounded)
        layout = self._layout(layout_text, len(dims), token, offset) if layout_text is not None else None
        if layout is None and element_type not in ("token", "opaque"):
            layout = default_layout(len(dims))
        return ArrayShape(element_type, tuple(dims), tuple(dynamic), layout)

    def _layout(self, text: str, rank: int, token: str, offset: int) -> Layout:
        order_text, _, tail = text.partition(":")
        parts = [p for p in order_text.replace(" ", "").split(",") if p]
        if not all(_SIZE.fullmatch(p) for p in parts):
            raise self.error(offset, f"expects a layout of dimension numbers, found {{{text[:60]}}}")
        order = tuple(int(p) for p in parts)
        if len(order) != rank:
            raise self.error(offset, f"layout {{{text}}} does not match the rank of {token!r}")
        return Layout(order, tail.strip())

    def shape(self, token: Token | str, offset: int | None = None) -> Shape:
        text = str(token)
        cached = self._shape_cache.get(text)
        if cached is not None:
            return cached
        where = offset if offset is not None else getattr(token, "start_pos", 0)
        if text[:1] == "(" or text[:2] == "b(":
            shape: Shape = self._sub_parse(text, "shape", where)
        else:
            shape = self.array_shape(text, where)
        self._shape_cache[text] = shape
        return shape

    def _sub_parse(self, fragment: str, start: str, offset: int) -> Any:
        """Parse `fragment`, which stands at `offset` in the text, from the start rule `start`.

        Lark sees the fragment alone (no padding to rescan); `position` adds the offset back.
        """
        outer = self._fragment
        self._fragment = (offset, offset + len(fragment))
        try:
            return _lark_for(self).parse(fragment, start=start)
        except UnexpectedInput as err:
            raise self.lark_error(err) from None
        finally:
            self._fragment = outer
            _POOL.holder.current = self

    def position(self, token: Token) -> int:
        """A Lark token's offset in the whole text (tokens of a sub-parse count from its fragment)."""
        return int(token.start_pos or 0) + self._fragment[0]

    def position_of_fragment(self) -> int:
        return self._fragment[0]

    # -- instructions -------------------------------------------------------------
    def body(self, token: Token) -> list[Instruction]:
        """Split a BODY token into instructions, exactly as the lexer would have (see the grammar)."""
        text = str(token)
        base = self.position(token)
        splitters = _splitters()
        instructions: list[Instruction] = []
        position = 1
        spans = splitters.split(text, position)
        while spans is not None:
            instruction, position = self._instruction(text, spans, base)
            instructions.append(instruction)
            spans = splitters.split(text, position)
        gap = splitters.gap.match(text, position)
        if gap is None or gap.end() != len(text) - 1:
            raise _Relex  # the lexer would not have split this body so: let it lex one instruction at a time
        return instructions

    def instruction(self, token: Token) -> Instruction:
        """An INSTRUCTION token (inline bodies and the token-per-instruction fallback)."""
        text = str(token)
        spans = _splitters().split(text, 0)
        instruction, end = self._instruction(text, spans, self.position(token)) if spans else (None, 0)
        if instruction is None or end != len(text):
            raise self.error(self.position(token), "expects an instruction (`name = shape opcode(...)`)")
        return instruction

    def _instruction(self, text: str, spans: Spans, base: int) -> tuple[Instruction, int]:
        """Build the instruction whose head and arguments are at `spans` in `text` (which starts at
        `base` in the whole text) with the attributes that follow; also return where it ends."""
        head_start, head_end, args_start, args_end = spans
        head = text[head_start:head_end]
        head_pos = base + head_start
        parts = _PLAIN_HEAD.fullmatch(head) if "/*" not in head else None
        if parts is not None:
            root, name, shape_text, opcode = parts.groups()
            shape_pos, opcode_pos = head_pos + parts.start(3), head_pos + parts.start(4)
        else:
            root, name, shape_text, shape_pos, opcode, opcode_pos = self._commented_head(head, head_pos)
        shape = self.shape(shape_text, shape_pos) if shape_text else None
        args_pos = base + args_start
        arguments = self._arguments(opcode, text[args_start : args_end - 1], args_pos)
        instruction = self._build(name, shape, opcode, opcode_pos, arguments, args_pos)
        self._positions[instruction] = head_pos
        end = self._add_attributes(instruction, text, args_end, base)
        if root:
            self._roots.add(instruction)
        return instruction, end

    def _commented_head(self, head: str, head_pos: int) -> tuple[str | None, str, str | None, int, str, int]:
        """(root, name, shape text, its offset, opcode, its offset) of a head with comments in it."""
        match = _HEAD.match(head)
        if match is None:
            raise self.error(head_pos, "expects an instruction name and `=`")
        rest = _COMMENT.sub(lambda m: " " * len(m.group()), head[match.end() : -1])
        opcode_match = _TRAILING_OPCODE.search(rest)
        if opcode_match is None:
            raise self.error(head_pos, "expects an opcode before `(`")
        shape_text = rest[: opcode_match.start()].strip()
        shape_pos = head_pos + match.end() + (len(rest) - len(rest.lstrip()))
        opcode_pos = head_pos + match.end() + opcode_match.start(1)
        return match.group(1), match.group(2), shape_text or None, shape_pos, opcode_match.group(1), opcode_pos

    def _arguments(self, opcode: str, body: str, start: int) -> list[Any]:
        """What stands between `opcode(` and `)`: operands, a parameter number or a literal.

        Operands come back as a bare name, a (name, declared shape text) pair, or a
        nested Instruction; their offsets are found again only for an error.
        """
        if opcode == "constant":
            return [(body.strip(), start + len(body) - len(body.lstrip()))]
        if "/*" in body:
            body = _COMMENT.sub(lambda m: " " * len(m.group()), body)
        if opcode == "parameter" and _SIZE.fullmatch(body.strip()):
            return [_piece(body.strip(), "INT", start + body.index(body.strip()))]
        if _NAMES.fullmatch(body):
            return [name.strip().lstrip("%") for name in body.split(",")] if body.strip() else []
        if _SIMPLE_OPERANDS.fullmatch(body):
            return [_operand_item(m.group(2), m.group(1)) for m in _OPERAND.finditer(body)]
        items = self._sub_parse("(" + body + ")", "nested_arguments", start - 1)
        return self._operand_items(items)

    def _operand_items(self, items: list[Any]) -> list[Any]:
        """The tokens of the `nested_arguments` rule as operand items (INT tokens stay, for _build)."""
        converted: list[Any] = []
        for item in items:
            if isinstance(item, Token) and item.type == "OPERAND":
                match = _TRAILING_NAME.search(item)
                assert match is not None
                converted.append(_operand_item(match.group(1), item[: match.start()].strip().rstrip(",").rstrip()))
            elif isinstance(item, Token):
                converted.append(_piece(str(item), item.type, self.position(item)))
            else:
                converted.append(item)
        return converted

    def nested_instruction(self, head: Token, arguments: Token) -> Instruction:
        """An anonymous instruction written as an operand, named ``<opcode>.anon`` as XLA does."""
        shape_text, _, opcode = head.strip().rpartition(" ")
        head_pos, arguments_pos = self.position(head), self.position(arguments)
        shape = self.shape(shape_text.strip(), head_pos) if shape_text.strip() else None
        if opcode == "constant":
            items: list[Any] = [(str(arguments)[1:-1].strip(), arguments_pos + 1)]
        else:
            items = self._operand_items(self._sub_parse(str(arguments), "nested_arguments", arguments_pos))
        name = f"{opcode}.anon"
        count = self._anon_counts.get(name, 0)
        self._anon_counts[name] = count + 1
        unique = name if count == 0 else f"{name}.{count}"
        return self._build(unique, shape, opcode, head_pos, items, arguments_pos + 1)

    def _build(
        self, name: str, shape: Shape | None, opcode: str, opcode_pos: int, arguments: list[Any], args_pos: int
    ) -> Instruction:
        literal: Literal | None = None
        parameter_number: int | None = None
        operands: list[Any] = []
        if opcode == "constant":
            literal_text, literal_pos = arguments[0]
            if shape is None:
                raise self.error(opcode_pos, "constant needs a shape")
            literal = Literal(shape, text=literal_text)
            try:
                literal.check()
            except LiteralError as err:
                raise self.error(literal_pos + err.offset, str(err)) from None
        elif opcode == "parameter":
            number = arguments[0] if len(arguments) == 1 else None
            if not (getattr(number, "type", None) == "INT" and _SIZE.fullmatch(str(number))):
                raise self.error(opcode_pos, "parameter expects one non-negative parameter number")
            parameter_number = int(number)  # type: ignore[arg-type]
        else:
            for item in arguments:
                if isinstance(item, _Piece):
                    raise self.error(item.start_pos, f"expects an operand name, found {item!s}")
            operands = arguments
        if opcode in ("send-done", "outfeed") and shape is not None:
            # XLA's parser gives these the shape token[] whatever the text says (old
            # dumps write `(data, token[])` or `()`); keep the two in agreement.
            shape = ArrayShape("token")
        instruction = Instruction(name, opcode, shape, (), {}, literal, parameter_number)
        self._pending[instruction] = (operands, None, args_pos)
        return instruction

    def _add_attributes(self, instruction: Instruction, text: str, position: int, base: int) -> int:
        """The ``, name=value`` run at `position` in `text` (at `base` in the whole text); return its end.

        Attribute offsets are found again only for an error.
        """
        attribute_re = _splitters().attribute
        match = attribute_re.match(text, position)
        if match is None:
            return position
        self._attribute_runs[instruction] = base + position
        raw: dict[str, str] = {}
        forward: list[str] = []
        while match is not None:
            position = match.end()
            key, value = _attribute(match.group())
            if key not in raw:
                raw[key] = value
                self._set_attribute(instruction, key, value, base + position - len(value), forward)
            elif raw[key] != value:  # XLA's printer repeats `statistics=` on async ops: same value, same meaning
                where = _name_pos(_piece(match.group(), "ATTR", base + match.start()))
                raise self.error(where, f"attribute {key} already exists")
            match = attribute_re.match(text, position)
        if forward:
            self._callee_refs.append((instruction, forward))
        return position

    def _set_attribute(self, instruction: Instruction, key: str, value: str, value_pos: int, forward: list[str]) -> None:
        """Record one attribute; names of callees and control predecessors are resolved later."""
        if key in INSTRUCTION_LIST_ATTRIBUTES:
            operands, _, args_pos = self._pending[instruction]
            self._pending[instruction] = (operands, value, args_pos)
            instruction.attributes[key] = InstructionList(())  # resolved when the computation closes
        elif key in COMPUTATION_ATTRIBUTES and value.startswith("{"):
            instruction.attributes[key] = self._inline_computation(value, value_pos)
        elif key in COMPUTATION_ATTRIBUTES or key in COMPUTATION_LIST_ATTRIBUTES:
            instruction.attributes[key] = value  # resolved when the module closes: callees may come later
            forward.append(key)
        else:
            instruction.attributes[key] = value

    def _attribute_offset(self, instruction: Instruction, key: str) -> int | None:
        """Where attribute `key` of `instruction` is named in the text."""
        position = self._attribute_runs.get(instruction)
        if position is None:
            return None
        attribute_re = _splitters().attribute
        match = attribute_re.match(self.text, position)
        while match is not None:
            if _attribute(match.group())[0] == key:
                return _name_pos(_piece(match.group(), "ATTR", match.start()))
            match = attribute_re.match(self.text, match.end())
        return None

    def _resolve_callees(self) -> None:
        for instruction, keys in self._callee_refs:
            for key in keys:
                value = str(instruction.attributes[key])
                if key in COMPUTATION_LIST_ATTRIBUTES:
                    names = _NAME_LIST.findall(value)
                    instruction.attributes[key] = ComputationList(tuple(self._callee(n, instruction, key) for n in names))
                else:
                    instruction.attributes[key] = self._callee(value, instruction, key)

    def _callee(self, name: str, instruction: Instruction, key: str) -> Computation:
        computation = self.computations.get(name.lstrip("%"))
        if computation is None:
            where = self._attribute_offset(instruction, key) or 0
            raise self.error(where, f"computation {name.lstrip('%')} does not exist")
        return computation

    def _inline_computation(self, body: str, offset: int) -> Computation:
        instructions = self._sub_parse(body, "inline_body", offset)
        name = "_" if self._inline_count == 0 else f"_.{self._inline_count}"
        while name in self.computations:
            self._inline_count += 1
            name = f"_.{self._inline_count}"
        self._inline_count += 1
        return self._finish_computation(Computation(name), instructions, offset)

    # -- computations and module -----------------------------------------------
    def computation(self, children: list[Any]) -> Computation:
        items = [c for c in children if c is not None]
        index = 0
        is_entry = isinstance(items[0], Token) and items[0].type == "ENTRY"
        if is_entry:
            index += 1
        name_token: Token = items[index]
        name = name_token.lstrip("%")
        if name in self.computations:
            raise self.error(name_token.start_pos, f"computation {name} already exists")
        computation = Computation(name, is_entry)
        instructions = [i for i in items[index + 1 :] if isinstance(i, Instruction)]
        for token in items[index + 1 :]:
            if isinstance(token, Token) and token.type == "BODY":
                instructions = self.body(token)
            elif isinstance(token, Token) and token.type == "ATTR":
                key, value = _attribute(token)
                computation.attributes[key] = value
        self._computation_positions[computation] = name_token.start_pos
        self._finish_computation(computation, instructions, name_token.start_pos)
        signature = next((i for i in items if isinstance(i, _Signature)), None)
        root = computation.root
        if signature is not None and root is not None and root.shape is not None:
            declared = self.shape(signature.result)
            if not compatible(declared, root.shape):
                raise self.error(
                    signature.result.start_pos,
                    f"Shape of computation {name}, {declared.to_text(False)}, is not compatible "
                    f"with that of its root instruction {root.name}, {root.shape.to_text(False)}",
                )
        return computation

    def _finish_computation(self, computation: Computation, instructions: list[Instruction], offset: int) -> Computation:
        scope: dict[str, Instruction] = {}
        root: Instruction | None = None
        for instruction in instructions:
            self._place(instruction, computation, scope, offset)
            if instruction in self._roots:
                if root is not None:
                    where = self._positions.get(instruction, offset)
                    raise self.error(where, f"computation {computation.name} has more than one ROOT")
                root = instruction
        computation.root = root if root is not None else (instructions[-1] if instructions else None)
        self.computations[computation.name] = computation
        self.ordered.append(computation)
        return computation

    def _place(self, instruction: Instruction, computation: Computation, scope: dict[str, Instruction], offset: int) -> None:
        """Resolve an instruction's operands in `scope`, then append it (nested operands first)."""
        operand_items, control, args_pos = self._pending.pop(instruction)
        for item in operand_items:
            if isinstance(item, Instruction):
                self._place(item, computation, scope, offset)
                instruction.append_operand(item)
                continue
            name, declared_text = (item, None) if isinstance(item, str) else item
            operand = scope.get(name)
            if operand is None:
                raise self.error(
                    self._operand_offset(args_pos, name),
                    f"instruction {name} does not exist (operands must be defined earlier in the computation)",
                )
            if declared_text is not None and operand.shape is not None:
                declared = self._shape_cache.get(declared_text)
                if declared is None:
                    declared = self.shape(declared_text, self._declared_offset(args_pos, name, declared_text))
                if not compatible(declared, operand.shape):
                    where = self._declared_offset(args_pos, name, declared_text)
                    raise self.error(
                        where,
                        f"The declared operand shape {declared.to_text()} is not compatible with the shape "
                        f"of the operand instruction {operand.shape.to_text()}.",
                    )
            instruction.append_operand(operand)
        if instruction.opcode == "recv-done" and instruction.operands:
            # Like XLA's parser: recv-done yields (the recv's data, token[]), whatever the text says.
            recv_shape = instruction.operands[0].shape
            if isinstance(recv_shape, TupleShape) and recv_shape.elements:
                instruction.shape = TupleShape((recv_shape.elements[0], ArrayShape("token")))
        if control is not None:
            preds = []
            for pred_name in _NAME_LIST.findall(control):
                if pred_name not in scope:
                    where = self._attribute_offset(instruction, "control-predecessors") or offset
                    raise self.error(where, f"control predecessor {pred_name} does not exist")
                preds.append(scope[pred_name])
            instruction.attributes["control-predecessors"] = InstructionList(tuple(preds))
        if instruction.name in scope:
            where = self._positions.get(instruction, offset)
            raise self.error(where, f"instruction {instruction.name} already exists in computation {computation.name}")
        scope[instruction.name] = instruction
        computation.append(instruction)

    def _declared_offset(self, args_pos: int, name: str, declared_text: str) -> int:
        """Where the shape declared for operand `name` is written."""
        return self.text.rfind(declared_text, args_pos, self._operand_offset(args_pos, name))

    def _operand_offset(self, args_pos: int, name: str) -> int:
        """Where operand `name` is written in the argument list starting at `args_pos`."""
        match = re.compile(rf"(?<![A-Za-z0-9_.\-%])%?{re.escape(name)}(?![A-Za-z0-9_.\-])").search(self.text, args_pos)
        return match.start() if match is not None else args_pos

    def module(self, children: list[Any]) -> Module:
        header: tuple[str, Token, list[Token]] | None = None
        stack_frames: str | None = None
        for child in children:
            if isinstance(child, tuple) and child[0] == "header":
                header = child  # type: ignore[assignment]
            elif isinstance(child, tuple) and child[0] == "stack_frames":
                stack_frames = child[1]
        entries = [c for c in self.ordered if c.is_entry]
        if len(entries) > 1:
            raise self.error(len(self.text), "expects only one ENTRY computation")
        if not self.ordered:
            raise self.error(len(self.text), "module has no computations")
        if not entries:
            self.ordered[-1].is_entry = True
        entry = next(c for c in self.ordered if c.is_entry)
        self._resolve_callees()
        if header is not None:
            module = Module(header[1].rstrip(":").lstrip("%"))
            for token in header[2]:
                key, value = _attribute(token)
                self._module_attribute_positions[key] = _name_pos(token)
                if key in module.attributes or (key == "entry_computation_layout" and module.entry_layout):
                    raise self.error(_name_pos(token), f"module attribute {key} already exists")
                if key == "entry_computation_layout":
                    module.entry_layout = self._program_layout(value, token.start_pos + str(token).index(value))
                else:
                    module.attributes[key] = value
        else:
            module = Module(f"module_{entry.name}")
        module.stack_frames = stack_frames
        for computation in self.ordered:
            module.add_computation(computation)
        try:
            validate(module, lambda text: self.shape(text, 0))
        except InvalidHlo as issue:
            raise self.error(self._issue_offset(issue), issue.message) from None
        return module

    def _issue_offset(self, issue: InvalidHlo) -> int:
        """Where to point for a semantic error: the attribute, else the instruction or computation."""
        if issue.instruction is None:
            position = self._module_attribute_positions.get(issue.attribute or "")
        else:
            position = self._attribute_offset(issue.instruction, issue.attribute) if issue.attribute else None
        if position is None and issue.instruction is not None:
            position = self._positions.get(issue.instruction)
        if position is None and issue.computation is not None:
            position = self._computation_positions.get(issue.computation)
        return position if position is not None else 0

    def _program_layout(self, value: str, offset: int) -> ProgramLayout:
        inner = value.strip()
        if not (inner.startswith("{") and inner.endswith("}")) or "->" not in inner:
            raise self.error(offset, "expects entry_computation_layout={(shapes)->shape}")
        params_text, _, result_text = inner[1:-1].rpartition("->")
        params = self.shape(params_text.strip(), offset + 1)
        result = self.shape(result_text.strip(), offset + 1 + len(params_text))
        if not isinstance(params, TupleShape):
            raise self.error(offset, "expects the parameter shapes of entry_computation_layout in parentheses")
        return ProgramLayout(params.elements, result)

    def lark_error(self, err: UnexpectedInput) -> HloParseError:
        """A located error for what Lark refused (positions made absolute for a sub-parse)."""
        start, end = self._fragment
        expected = getattr(err, "expected", None) or getattr(err, "allowed", None) or ()
        position = getattr(err, "pos_in_stream", None)
        position = None if position is None else start + position
        if "INSTRUCTION" in expected and position is not None:
            # A line that is not one whole instruction: the fine-grained rule says where it breaks.
            self._sub_parse(self.text[position:end], "instruction_parts", position)
        if "ARGS" in expected and position is not None:
            # An argument list that does not close: the fine-grained grammar says why.
            opening = self.text.rfind("(", start, position)
            self._sub_parse(self.text[opening:end], "nested_arguments", opening)
        if isinstance(err, UnexpectedEOF):
            expected = _describe(err.expected)
            return self.error(end, f"unexpected end of input, expected {expected}")
        if isinstance(err, UnexpectedToken):
            expected = _describe(err.expected)
            found = _describe([err.token.type]) if err.token.type == "$END" else repr(str(err.token)[:40])
            at_end = err.token.type == "$END" or err.token.start_pos is None
            offset = end if at_end else self.position(err.token)
            return self.error(offset, f"expected {expected}, found {found}")
        if isinstance(err, UnexpectedCharacters):
            expected = _describe(err.allowed or [])
            return self.error(start + err.pos_in_stream, f"unexpected character {self.text[start + err.pos_in_stream]!r}, expected {expected}")
        return self.error(start, str(err))


_ATTRIBUTE_PREFIX = re.compile(r"(?:\s|/\*.*?\*/)*,(?:\s|/\*.*?\*/)*", re.S)


def _attribute(token: str) -> tuple[str, str]:
    """``, name=value`` → (name, value)."""
    text = str(token)
    if text[:2] == ", " and text[2:3].isalpha():
        key, _, value = text[2:].partition("=")
        return key, value.strip()
    prefix = _ATTRIBUTE_PREFIX.match(text)
    key, _, value = text[prefix.end() if prefix else 0 :].partition("=")
    return key, value.strip()


def _name_pos(token: Any) -> int:
    """Where the name of a ``, name=value`` token starts."""
    prefix = _ATTRIBUTE_PREFIX.match(str(token))
    return token.start_pos + (prefix.end() if prefix else 0)


def _describe(terminals: Any) -> str:
    words = sorted({_TERMINAL_WORDS.get(t, f"`{t.lower()}`" if not t.startswith("__") else t) for t in terminals})
    if not words:
        return "nothing more"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


class _Relex(Exception):
    """A computation body the BODY token cannot stand for: parse the text from `exact_start`."""


def parse(text: str, filename: str = "<string>") -> Module:
    """Parse HLO module text into the IR; raises HloParseError with file:line:col.

    The fast reading (one token per computation body) is tried first; a text it cannot
    read, errors included, is read again one token per instruction, which says where
    and why it fails.
    """
    if "\0" in text:
        raise parse_error_at(text, text.index("\0"), filename, "NUL character in input")
    with paused_gc():
        try:
            try:
                fast: Module = _lark_for(_Parse(text, filename)).parse(text, start="start")
                return fast
            except (_Relex, UnexpectedInput):
                pass  # read again one instruction at a time, which also words any error
            state = _Parse(text, filename)
            try:
                exact: Module = _lark_for(state).parse(text, start="exact_start")
                return exact
            except UnexpectedInput as err:
                raise state.lark_error(err) from None
        except RecursionError:
            raise parse_error_at(text, 0, filename, "input nests too deeply") from None
