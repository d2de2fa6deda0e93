"""Lark's refusals (UnexpectedToken, UnexpectedCharacters, UnexpectedEOF) in words a user reads.

Lark names what it expected by terminal (`RPAR`, `ATTR`, …); these messages say
"expected `)` or an attribute (`name=value`), found '}'" instead, with the
offset made absolute for a sub-parse of a fragment of the text.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

#: Human words for the grammar's terminals, for "expected …" messages.
TERMINAL_WORDS = {
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


def expected_terminals(err: UnexpectedInput) -> Collection[str]:
    """What Lark would have accepted where it stopped."""
    if isinstance(err, (UnexpectedToken, UnexpectedEOF)):
        return err.expected or ()
    if isinstance(err, UnexpectedCharacters):
        return err.allowed or ()
    return ()


def describe(terminals: Iterable[str]) -> str:
    """``a, b or c`` in words, sorted so the message does not depend on Lark's set order."""
    words = sorted({TERMINAL_WORDS.get(t, f"`{t.lower()}`" if not t.startswith("__") else t) for t in terminals})
    if not words:
        return "nothing more"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def wording(err: UnexpectedInput, text: str, start: int, end: int) -> tuple[int, str]:
    """The offset and message for what Lark refused in ``text[start:end]`` (the fragment it parsed)."""
    if isinstance(err, UnexpectedEOF):
        return end, f"unexpected end of input, expected {describe(err.expected)}"
    if isinstance(err, UnexpectedToken):
        token = err.token
        # What the line shows: a token may run over lines (a group left open), the message does not.
        found = describe([token.type]) if token.type == "$END" else repr(str(token).partition("\n")[0][:40])
        at_end = token.type == "$END" or token.start_pos is None
        offset = end if at_end else int(token.start_pos or 0) + start
        return offset, f"expected {describe(err.expected)}, found {found}"
    if isinstance(err, UnexpectedCharacters):
        offset = start + err.pos_in_stream
        return offset, f"unexpected character {text[offset]!r}, expected {describe(err.allowed or [])}"
    return start, str(err)
