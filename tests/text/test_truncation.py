"""A text cut short is reported at its end, naming what it left open, at every byte it can be cut at.

Each shipped example, and a few corpus modules with multi-line instructions, comments and
one-line bodies, is cut at every offset and parsed in-process. Every error must point at or
after the end of the cut text (Lark alone stops earlier, at the token the cut makes unreadable).
A prefix hloopt accepts must be one XLA's parser accepts too.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import sampled

from hloopt import parse
from hloopt.errors import HloParseError, locate
from hloopt.xla.bridge import canonical_in_subprocess

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.hlo"))
#: Corpus modules whose instructions go on over lines, with `//` comments, one-line bodies, iota replica
#: groups, and a JSON backend_config whose `}`s start indented lines.
CORPUS = [
    "all_reduce_splitter_test__4.hlo",
    "copy_insertion_test__53.hlo",
    "reduce_scatter_creator_test__24.hlo",
    "concat_active_scalar_constant__1.hlo",
]


def _early_errors(text: str, name: str) -> tuple[list[str], list[str]]:
    """The cuts of `text` whose error points before their end, and the prefixes hloopt accepts."""
    early: list[str] = []
    accepted: list[str] = []
    for cut in range(len(text)):
        prefix = text[:cut]
        try:
            parse(prefix, name)
        except HloParseError as err:
            end, _ = locate(prefix, len(prefix), name)
            if (err.location.line, err.location.column) != (end.line, end.column):
                early.append(f"cut at {cut} (…{prefix[-30:]!r}), ends at {end.line}:{end.column}: {err.render()}")
            continue
        accepted.append(prefix)
    return early, accepted


def _check(text: str, name: str) -> None:
    early, accepted = _early_errors(text, name)
    assert not early, f"{len(early)} cuts located before their end:\n" + "\n".join(early[:10])
    verdicts = canonical_in_subprocess(sorted(set(accepted)))
    refused = [prefix for prefix, verdict in zip(sorted(set(accepted)), verdicts) if not isinstance(verdict, str)]
    assert not refused, f"hloopt accepts prefixes XLA refuses: {[p[-40:] for p in refused]}"


@pytest.mark.parametrize("path", sampled(EXAMPLES, 4), ids=[p.name for p in EXAMPLES])
def test_every_cut_of_an_example_is_located_at_its_end(path: Path) -> None:
    _check(path.read_text(), path.name)


@pytest.mark.corpus
@pytest.mark.parametrize("name", CORPUS)
def test_every_cut_of_a_corpus_module_is_located_at_its_end(corpus_dir: Path, name: str) -> None:
    _check((corpus_dir / "xla" / name).read_text(), name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), metadata={op_name="a\\',
            "string opened at 3:50, metadata={ opened at 3:41",
        ),
        ("HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}", "entry_computation_layout={ opened at 1:39"),
        ("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0) // a comment", "computation e opened at 2:1 is not"),
        (
            "HloModule m\n%c {\n  ROOT p = f32[] parameter(0)\n}\nENTRY %e () -> f32[] {\n",
            "computation %e opened at 5:1",
        ),
        (
            "HloModule m\nENTRY e {\n  ROOT r = f32[] reduce(p, z), to_apply={ a = f32[] add(",
            "add( opened at 3:56, to_apply={ opened at 3:41",
        ),
    ],
)
def test_the_message_names_what_is_open(text: str, message: str) -> None:
    with pytest.raises(HloParseError) as caught:
        parse(text, "cut.hlo")
    assert caught.value.message.startswith("unexpected end of input: ")
    assert message in caught.value.message
    end, _ = locate(text, len(text), "cut.hlo")
    assert (caught.value.location.line, caught.value.location.column) == (end.line, end.column)


def test_a_long_run_of_blanks_before_a_stray_brace_is_refused_at_once() -> None:
    """Found by the parity fuzzer: the end-of-input check's blanks were `(?:[ \\t]+)*`, which tried 2^n ways
    to split a run of n blanks before it failed (33 blanks: minutes)."""
    text = (
        "HloModule m\nENTRY main {\n  p = f32[33,76,70] parameter(0)\n  i = s32[1806,2] parameter(1)\n"
        "  ROOT r = f32[1806,7,8,4] gather(p, i), offset_dims={1,2,3},\n" + " " * 60 + "collapsed_slice_dims={},\n"
        "  {          index_vector_dim=1, slice_sizes={7,8,4}\n}\n"
    )
    started = time.perf_counter()
    with pytest.raises(HloParseError) as caught:
        parse(text)
    assert time.perf_counter() - started < 2
    assert caught.value.location.line == 6
