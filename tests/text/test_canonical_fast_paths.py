"""The parser's fast paths for canonical lines read exactly what the grammar's terminals read.

`_CANONICAL` (an instruction's head and arguments) and `_CANONICAL_ATTRIBUTE` (one attribute) are
tried before the grammar's HEAD+ARGS and ATTR regexes; wherever they match, the spans, names and
values must be the grammar's: checked on hand-picked lines and on every line of the shared corpus.
A COMPUTATION token (name, signature and body in one) must split where the lexer, reading the
three terminals one by one, would have put them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lark import Token

import hloopt
from hloopt.ir.module import Computation, Instruction
from hloopt.text import parser
from hloopt.text.splitting import attribute

LINES = [
    '%add.1 = f32[2,3]{1,0} add(f32[2,3]{1,0} %a, f32[2,3]{1,0} %b), metadata={op_name="x, y" source_line=3}',
    "ROOT %t = f32[] constant(1.5)",
    "%p = bf16[8]{0} parameter(4), sharding={devices=[2]0,1}",
    '%c = s32[3]{0} constant({1, 2, 3}), frontend_attributes={_xla="a"}, backend_config="{\\"k\\": 1}"',
    "%r = f32[] reduce(f32[4]{0} %x, f32[] %z), dimensions={0}, to_apply=%sum",
]


def _check_everywhere(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Check both fast paths against the grammar's regexes wherever the parser uses them; how often."""
    counts = {"instructions": 0, "attributes": 0}
    real = parser._CANONICAL
    add_attributes = parser._Parse._add_attributes

    class Checked:
        """`_CANONICAL`, each of its matches checked against the splitter's spans."""

        @staticmethod
        def match(text: str, position: int) -> re.Match[str] | None:
            match = real.match(text, position)
            if match is not None:
                spans = parser._splitters().split(text, match.start())
                assert spans == (match.start(1), match.end(1), match.end(1), match.end()), text[position:][:200]
                counts["instructions"] += 1
            return match

    def attributes(self: parser._Parse, owner: Instruction, text: str, position: int, base: int) -> int:
        grammar = parser._splitters().attribute
        at = position
        while (found := parser._CANONICAL_ATTRIBUTE.match(text, at) or grammar.match(text, at)) is not None:
            if found.re is parser._CANONICAL_ATTRIBUTE:
                slow = grammar.match(text, at)
                assert slow is not None and slow.end() == found.end(), text[at:][:200]
                assert attribute(slow.group()) == found.group(1, 2)
                counts["attributes"] += 1
            at = found.end()
        return add_attributes(self, owner, text, position, base)

    monkeypatch.setattr(parser, "_CANONICAL", Checked)
    monkeypatch.setattr(parser._Parse, "_add_attributes", attributes)
    return counts


def test_computation_tokens_split_as_the_lexer_reads_them(monkeypatch: pytest.MonkeyPatch, corpus_dir: Path) -> None:
    """The name and signature come from the terminals' own regexes, each a first match as the
    lexer's; the body is then right only if BODY, matched where it starts, ends with the token."""
    split = parser._Parse.body
    hloopt.parse("HloModule m\n\nENTRY %e {\n  ROOT %p = f32[] parameter(0)\n}\n")
    assert parser._POOL.lark is not None
    body_regex = re.compile(parser._POOL.lark.get_terminal("BODY").pattern.to_regexp())
    seen = {"computations": 0, "signatures": 0}

    def body(self: parser._Parse, text: str, begin: int, base: int, computation: Computation) -> list[Instruction]:
        if begin:  # the body of a COMPUTATION token, after its name and signature
            match = body_regex.match(text, begin)
            assert text[begin] == "{" and match is not None and match.end() == len(text), text[:200]
            seen["computations"] += 1
            seen["signatures"] += "->" in text[:begin]
        return split(self, text, begin, base, computation)

    monkeypatch.setattr(parser._Parse, "body", body)
    for path in sorted(corpus_dir.glob("*/*.hlo")):
        try:
            hloopt.parse(path.read_text(encoding="utf-8", errors="surrogateescape"), str(path))
        except hloopt.HloError:
            continue
    assert seen["computations"] > 10_000 and seen["signatures"] > 1_000, seen


def test_hand_picked_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _check_everywhere(monkeypatch)
    body = "\n".join(f"  {line}" for line in LINES)
    text = f"HloModule m\n\n%sum {{\n  ROOT %s = f32[] parameter(0)\n}}\n\nENTRY %e {{\n  %a = f32[2,3]{{1,0}} parameter(0)\n  %b = f32[2,3]{{1,0}} parameter(1)\n  %x = f32[4]{{0}} parameter(2)\n  %z = f32[] parameter(3)\n{body}\n}}\n"
    text = text.replace("ROOT %t", "%t")
    hloopt.parse(text)
    assert counts == {"instructions": 10, "attributes": 6}  # every line, every attribute


def test_every_corpus_line(monkeypatch: pytest.MonkeyPatch, corpus_dir: Path) -> None:
    counts = _check_everywhere(monkeypatch)
    for path in sorted(corpus_dir.glob("*/*.hlo")):
        try:
            hloopt.parse(path.read_text(encoding="utf-8", errors="surrogateescape"), str(path))
        except hloopt.HloError:
            continue  # the invalid ones: refused either way, which the error tests check
    assert counts["instructions"] > 100_000 and counts["attributes"] > 50_000


_SUM = "%x = f32[] parameter(0){sep}%y = f32[] parameter(1){sep}ROOT %sum = f32[] add(f32[] %x, f32[] %y)"


@pytest.mark.parametrize(
    "inline",
    [
        pytest.param("{\n  " + _SUM.format(sep="\n  ") + "\n}", id="closing-line-inside-an-attribute"),
        pytest.param("{ " + _SUM.format(sep=" ") + " }", id="one-line-inline-body"),
        pytest.param(
            "{\n  " + _SUM.format(sep="\n  ") + ', metadata={op_name="\n}"}\n}', id="closing-line-in-a-string"
        ),
    ],
)
def test_a_body_whose_first_closing_line_is_not_its_end(inline: str) -> None:
    """BODY ends at the first line that starts with `}`; when that `}` closes something inside the body,
    the split does not reach it and the module is read again one instruction at a time, to the same IR."""
    text = (
        "HloModule m\n\nENTRY %e (p: f32[4]) -> f32[] {\n  %p = f32[4]{0} parameter(0)\n  %z = f32[] constant(0)\n"
        f"  ROOT %r = f32[] reduce(f32[4]{{0}} %p, f32[] %z), dimensions={{0}}, to_apply={inline}\n}}\n"
    )
    module = hloopt.parse(text)
    (called,) = [c for c in module.computations if not c.is_entry]
    assert [i.name for i in called.instructions] == ["x", "y", "sum"]
    assert module.entry.root is not None and module.entry.root.attributes["to_apply"] is called


_RUN = """HloModule m

%a (x: f32[]) -> f32[] {
  ROOT %x = f32[] parameter(0)
}

%b (x: f32[]) -> f32[] {
  ROOT %x = f32[] parameter(0)
}, execution_thread="side"

%c {
  ROOT %x = f32[] parameter(0)
}

ENTRY %e (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %r = f32[] call(%p), to_apply=%a
}

%d {
  ROOT %x = f32[] parameter(0)
}
"""


def test_a_run_of_computations_is_one_token_read_one_computation_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Computations with nothing between them lex as one COMPUTATIONS token; attributes and ENTRY
    break the run, go to the computation they follow or precede, and the module is the one the
    exact reading (one INSTRUCTION token at a time) builds."""
    runs: list[int] = []
    split = parser._Parse._computation_run

    def counted(self: parser._Parse, token: Token, is_entry: bool) -> tuple[list[Computation], parser._OpenComputation]:
        closed, last = split(self, token, is_entry)
        runs.append(len(closed) + 1)
        return closed, last

    monkeypatch.setattr(parser._Parse, "_computation_run", counted)
    module = hloopt.parse(_RUN)
    assert runs == [2, 1, 2]  # a b | attributes | c | ENTRY | e d
    assert [(c.name, c.is_entry, c.attributes) for c in module.computations] == [
        ("a", False, {}),
        ("b", False, {"execution_thread": '"side"'}),
        ("c", False, {}),
        ("e", True, {}),
        ("d", False, {}),
    ]
    monkeypatch.setattr(parser._Parse, "_computation_run", _relex)
    assert module.to_text() == hloopt.parse(_RUN).to_text()


def _relex(self: parser._Parse, token: Token, is_entry: bool) -> None:
    raise parser._Relex


def test_an_error_in_a_run_is_located_in_the_whole_text() -> None:
    """The second computation of a run (e d) counts its lines from the file's start."""
    text = _RUN.replace(
        "%d {\n  ROOT %x = f32[] parameter(0)", "%d {\n  %x = f32[] parameter(0)\n  ROOT %x = f32[] parameter(1)"
    )
    with pytest.raises(hloopt.HloParseError, match=r"^<string>:22:3: instruction x already exists in computation d"):
        hloopt.parse(text)


# One attribute run three times: at a line's end (remembered), before a line that continues the run, and
# on a line that holds a second instruction after it (the rest of the line is then not the run).
_REPEATED_RUNS = """HloModule m

ENTRY %e (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  %a = f32[] negate(%p), metadata={op_name="neg" stack_frame_id=1}
  %b = f32[] negate(%a), metadata={op_name="neg" stack_frame_id=1}
    , sharding={replicated}
  %c = f32[] negate(%b), metadata={op_name="neg" stack_frame_id=1}  %d = f32[] negate(%c), metadata={op_name="neg" stack_frame_id=1}
  ROOT %r = f32[] negate(%d), metadata={op_name="neg" stack_frame_id=1}
}
"""


def test_a_remembered_attribute_run_reads_as_the_regexes_read_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attribute run read once is not matched again where it is the rest of its line and the next line
    starts an instruction; elsewhere the regexes read it. Either way the attributes are the same."""
    parses: list[parser._Parse] = []
    init = parser._Parse.__init__

    def kept(self: parser._Parse, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        parses.append(self)

    monkeypatch.setattr(parser._Parse, "__init__", kept)
    module = hloopt.parse(_REPEATED_RUNS)
    run = ', metadata={op_name="neg" stack_frame_id=1}'
    assert parses[0]._runs == {run: {"metadata": run[len(", metadata=") :]}}  # neither b's nor c's line
    monkeypatch.setattr(parser, "_RUN_CACHED", 0)  # nothing remembered: every run matched
    matched = hloopt.parse(_REPEATED_RUNS)
    assert parses[1]._runs == {}
    read = [(i.name, dict(i.attributes)) for i in module.entry.instructions]
    assert read == [(i.name, dict(i.attributes)) for i in matched.entry.instructions]
    assert [len(attributes) for _, attributes in read] == [0, 1, 2, 1, 1, 1]
    assert module.to_text() == matched.to_text()
