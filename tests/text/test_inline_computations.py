"""Inline computations (``to_apply={...}``) inside inline computations, deep and wide, judged by XLA.

XLA's parser reads an inline body recursively: it names the bodies innermost first (``_``, ``_.1``, …),
counts anonymous instructions in text order across them, keeps each body's names apart, and reports the
first error in the text. hloopt reads them from an explicit stack in the same order. Each module here is
sent to jaxlib's parser: the two must accept and refuse alike, refuse at the same place, and XLA's
canonical print of hloopt's print must be XLA's canonical print of the text. hloopt's own print is XLA's
canonical print where the names are unique across the module and no instruction calls two inline bodies
(XLA renames a name used in two computations, and prints a while's body before its condition; hloopt keeps
names as written and prints inline bodies in the order they are read: docs/decisions.md).
"""

from __future__ import annotations

import re

import pytest

from hloopt.errors import HloError, HloParseError
from hloopt.text import parser
from hloopt.text.parser import parse
from hloopt.text.splitting import MAX_INLINE_NESTING
from hloopt.xla.bridge import XlaCrash, canonical_in_subprocess


def _entry(*lines: str) -> str:
    return "\n".join(["HloModule m", "", "ENTRY e {", *(f"  {line}" for line in lines), "}", ""])


def _chain(depth: int) -> str:
    """A call whose inline body is a call with an inline body, `depth` bodies in all; every name unique."""
    body = f"q{depth} = f32[] parameter(0)\nROOT n = f32[] negate(f32[] negate(q{depth}))"
    for level in range(depth - 1, 0, -1):
        body = f"q{level} = f32[] parameter(0)\nROOT call{level} = f32[] call(q{level}), to_apply={{\n{body}\n}}"
    return _entry("p = f32[] parameter(0)", f"ROOT r = f32[] call(p), to_apply={{\n{body}\n}}")


def _tree(width: int, depth: int) -> str:
    """`width` inline bodies in each body, `depth` levels: width**depth leaves; every name unique, every
    instruction used, in the order XLA's post order prints them."""
    counter = iter(range(1 << 20))

    def body(level: int) -> str:
        q = f"q{next(counter)}"
        if level == 0:
            return f"{q} = f32[] parameter(0)\nROOT n{next(counter)} = f32[] negate(f32[] negate({q}))"
        lines, total = [f"{q} = f32[] parameter(0)"], ""
        for i in range(width):
            call = f"call{next(counter)}"
            lines.append(f"{call} = f32[] call({q}), to_apply={{\n{body(level - 1)}\n}}")
            if i:
                root = "ROOT " if i == width - 1 else ""
                lines.append(f"{root}sum{next(counter)} = f32[] add({total}, {call})")
            total = lines[-1].split(" = ")[0].removeprefix("ROOT ")
        return "\n".join(lines)

    return _entry("p = f32[] parameter(0)", f"ROOT r = f32[] call(p), to_apply={{\n{body(depth)}\n}}")


_BODY = "q = f32[] parameter(0)\n ROOT n = f32[] negate(q)"

#: Modules XLA reads, and whether hloopt's print is XLA's canonical print itself.
ACCEPTED = {
    "one body": (_chain(1), True),
    "two deep": (_chain(2), True),
    "past the regexes' 16 levels": (_chain(17), True),
    "a hundred deep": (_chain(100), True),
    "wide: 3 per body, 4 deep": (_tree(3, 4), True),
    "wide: 40 in one body": (_tree(40, 1), True),
    "anonymous instructions around and inside bodies, counted in text order": (
        _entry(
            "p = f32[] parameter(0)",
            "c = f32[] call(f32[] negate(p)), to_apply={ q = f32[] parameter(0)\n"
            " d = f32[] call(f32[] negate(q)), to_apply={ r = f32[] parameter(0)\n ROOT n = f32[] negate(f32[] negate(r)) }\n"
            " ROOT m = f32[] add(f32[] negate(d), d) }",
            "ROOT s = f32[] add(f32[] negate(c), f32[] negate(p))",
        ),
        True,
    ),
    "a reduce's body inside a call's": (
        _entry(
            "p = f32[4] parameter(0)",
            "ROOT c = f32[] call(p), to_apply={ q = f32[4] parameter(0)\n z = f32[] constant(0)\n"
            " ROOT r = f32[] reduce(q, z), dimensions={0}, to_apply={ a = f32[] parameter(0)\n"
            " b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) } }",
        ),
        True,
    ),
    "a while's condition and body inline": (
        _entry(
            "p = s32[] parameter(0)",
            "ROOT w = s32[] while(p), condition={ c = s32[] parameter(0)\n k = s32[] constant(10)\n"
            " ROOT lt = pred[] compare(c, k), direction=LT }, body={ b = s32[] parameter(0)\n"
            " one = s32[] constant(1)\n ROOT s = s32[] add(b, one) }",
        ),
        False,
    ),
    "each body's names apart": (
        _entry(
            "q = f32[] parameter(0)",
            "ROOT c = f32[] call(q), to_apply={ q = f32[] parameter(0)\n"
            " ROOT c = f32[] call(q), to_apply={ q = f32[] parameter(0)\n ROOT c = f32[] negate(q) } }",
        ),
        False,
    ),
}

#: Modules XLA refuses: hloopt refuses them at XLA's line and column.
REFUSED = {
    "a name of the enclosing computation": _entry(
        "p = f32[] parameter(0)",
        "ROOT c = f32[] call(p), to_apply={ q = f32[] parameter(0)\n ROOT n = f32[] add(q, p) }",
    ),
    "an empty body": _entry("p = f32[] parameter(0)", "ROOT c = f32[] call(p), to_apply={ }"),
    "two ROOTs in a body": _entry(
        "p = f32[] parameter(0)",
        "ROOT c = f32[] call(p), to_apply={ ROOT q = f32[] parameter(0)\n ROOT n = f32[] negate(q) }",
    ),
    "an error in the body before one in the attributes after it": _entry(
        "p = f32[] parameter(0)",
        "ROOT c = f32[] call(p), to_apply={ q = f32[] parameter(0)\n ROOT n = f32[] negate(x) }, to_apply=foo",
    ),
    "the attribute written twice": _entry(
        "p = f32[] parameter(0)", f"ROOT c = f32[] call(p), to_apply={{ {_BODY} }}, to_apply={{ {_BODY} }}"
    ),
    "a stray bracket after a body's instruction": _entry(
        "p = f32[] parameter(0)",
        f"c = f32[] call(p), to_apply={{ {_BODY} }}",
        "ROOT r = f32[] negate(c) )",
    ),
    "an inner body's error before its enclosing body's syntax error": _entry(
        "p = f32[] parameter(0)",
        "c = f32[] call(p), to_apply={ q = f32[] parameter(0)\n c = f32[] call(q), to_apply={ r = f32[] parameter(0)\n"
        " ROOT n = f32[] negate(undefined) }\n ROOT z = f32[] negate(c) ) }",
        "ROOT r = f32[] negate(c)",
    ),
    "an inner body's syntax error before its enclosing body's": _entry(
        "p = f32[] parameter(0)",
        "c = f32[] call(p), to_apply={ q = f32[] parameter(0)\n c = f32[] call(q), to_apply={ r = f32[] parameter(0)\n"
        " ROOT n = f32[] negate(r)) }\n ROOT z = f32[] negate(c) ) }",
        "ROOT r = f32[] negate(c)",
    ),
}


@pytest.fixture(scope="module")
def xla_verdicts() -> dict[str, str | HloError]:
    """jaxlib's verdict on every module, and (under ``print:``) on hloopt's print of each accepted one."""
    texts = {name: text for name, (text, _) in ACCEPTED.items()} | REFUSED
    prints = {f"print:{name}": parse(text).to_text() for name, (text, _) in ACCEPTED.items()}
    everything = texts | prints
    return dict(zip(everything, canonical_in_subprocess(list(everything.values()))))


@pytest.mark.parametrize("name", ACCEPTED)
def test_xla_and_hloopt_read_it_and_print_it_alike(name: str, xla_verdicts: dict[str, str | HloError]) -> None:
    text, printed_as_xla = ACCEPTED[name]
    ours, theirs, theirs_of_ours = parse(text).to_text(), xla_verdicts[name], xla_verdicts[f"print:{name}"]
    assert isinstance(theirs, str), theirs
    assert theirs_of_ours == theirs
    assert (ours == theirs) is printed_as_xla


def _xla_place(refusal: HloError) -> tuple[int, int]:
    found = re.search(r"was parsing (\d+):(\d+): error", str(refusal))
    assert found is not None, refusal
    return int(found.group(1)), int(found.group(2))


@pytest.mark.parametrize("name", REFUSED)
def test_xla_and_hloopt_refuse_it_at_the_same_place(name: str, xla_verdicts: dict[str, str | HloError]) -> None:
    theirs = xla_verdicts[name]
    assert isinstance(theirs, HloError) and not isinstance(theirs, XlaCrash), theirs
    with pytest.raises(HloParseError) as caught:
        parse(REFUSED[name])
    assert (caught.value.location.line, caught.value.location.column) == _xla_place(theirs)


def test_bodies_are_named_innermost_first_and_each_keeps_its_names() -> None:
    module = parse(ACCEPTED["anonymous instructions around and inside bodies, counted in text order"][0])
    assert [c.name for c in module.computations] == ["_", "_.1", "e"]
    inner, outer, entry = module.computations
    assert [i.name for i in inner.instructions] == ["r", "negate.anon.2", "n"]
    assert [i.name for i in outer.instructions] == ["q", "negate.anon.1", "d", "negate.anon.3", "m"]
    assert [i.name for i in entry.instructions] == ["p", "negate.anon", "c", "negate.anon.4", "negate.anon.5", "s"]


def _refused_past(bound: int) -> None:
    text = _chain(bound + 1)
    with pytest.raises(HloParseError, match=f"inline computations nest more than {bound} levels deep") as caught:
        parse(text)
    brace = text.index("to_apply={", text.index(f"ROOT call{bound} = ")) + len("to_apply=")
    line, column = text.count("\n", 0, brace) + 1, brace - text.rfind("\n", 0, brace)
    assert (caught.value.location.line, caught.value.location.column) == (line, column)


def test_past_the_bound_a_located_refusal_at_the_first_body_too_deep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism, with a small bound (a chain past the real one takes seconds: each level is a
    sub-parse of the rest); the real bound is the slow test below."""
    monkeypatch.setattr(parser, "MAX_INLINE_NESTING", 20)
    _refused_past(20)
    parse(_chain(20))


@pytest.mark.slow
def test_past_xla_s_reach_a_located_refusal() -> None:
    _refused_past(MAX_INLINE_NESTING)


@pytest.mark.slow
def test_xla_reads_the_deepest_chain_and_dies_past_its_reach() -> None:
    """The bound's evidence, asked of jaxlib: it reads `MAX_INLINE_NESTING` nested bodies as hloopt does,
    and a hundred levels further its parser overflows its stack (a crash, not a refusal)."""
    deepest = _chain(MAX_INLINE_NESTING)
    verdicts = canonical_in_subprocess([deepest, _chain(MAX_INLINE_NESTING + 200)])
    assert isinstance(verdicts[0], str) and verdicts[0] == parse(deepest).to_text()
    assert isinstance(verdicts[1], XlaCrash)
