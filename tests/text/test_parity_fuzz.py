"""Parser parity with XLA as a property: mutants of corpus modules, hloopt's accept/refuse beside jaxlib's.

A fixed seed and budget (`tests/parity_fuzz.py` has the mutations and the classes); the long run with
counts is ``benchmarks/fuzz_parity.py``. Every disagreement found must be fixed or be one of
`parity_fuzz.ALLOWED`, each with its reason; every hloopt refusal must be located.
"""

from __future__ import annotations

import os
from pathlib import Path

import parity_fuzz
import pytest
from test_error_cases import ERRORS, error_cases

import hloopt
from hloopt.errors import HloError, HloParseError
from hloopt.xla.bridge import IsolatedPool, canonical_in_subprocess, jaxlib_version

pytestmark = pytest.mark.corpus
#: Mutants per run: about a minute on two shared cores (XLA's half runs in two workers).
BUDGET = 3_000
SEED = 28


def test_hloopt_accepts_and_refuses_what_xla_does(corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = parity_fuzz.seeds(corpus_dir)
    assert len(texts) > 7_000
    tests = str(Path(parity_fuzz.__file__).parent)  # the workers unpickle `parity_fuzz.xla_verdicts` by name
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    with IsolatedPool(2) as pool:
        report = parity_fuzz.run(texts, BUDGET, SEED, pool, parity_fuzz.allowed)
    assert report.tried == BUDGET
    # The mutants do reach both sides of the question: many refused by both, some accepted by both.
    assert report.counts[parity_fuzz.AGREE_REFUSE] > BUDGET // 2
    assert report.counts[parity_fuzz.AGREE_ACCEPT] > BUDGET // 50
    shown = {
        name: [f"[{kind}] hloopt: {ours} | xla: {theirs}\n{mutant}" for kind, ours, theirs, mutant in found[:3]]
        for name, found in report.found.items()
    }
    assert not report.found, shown


def test_mutants_are_the_same_for_the_same_seed() -> None:
    texts = ["HloModule m\n\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0), sharding={replicated}\n}\n"]
    first = list(parity_fuzz.mutants(texts, 200, 7))
    assert first == list(parity_fuzz.mutants(texts, 200, 7))
    assert first != list(parity_fuzz.mutants(texts, 200, 8))
    assert all(mutant != texts[0] for _, mutant in first)
    kinds = {kind for pair in first for kind in pair[0].split("+")}
    assert kinds == {name for name, _ in parity_fuzz.MUTATIONS}


def test_a_disagreement_is_found_and_classed() -> None:
    """The classes themselves: each verdict pair lands where it should, unlocated refusals apart."""
    report = parity_fuzz.Report()
    report.add("token", "a", None, None)
    report.add("token", "b", "refused", "refused too")
    report.add("token", "c", None, "3:4: expects integer")
    report.add("token", "d", "refused", None)
    report.add("token", "e", None, f"{parity_fuzz.XLA_CRASH}: worker died")
    report.add("token", "f", f"{parity_fuzz.UNLOCATED}: RecursionError", None)
    assert report.counts == {name: 1 for name in parity_fuzz.CLASSES}
    assert [found[0][3] for found in report.found.values()] == ["c", "d", "f"]
    assert parity_fuzz.hloopt_verdict("HloModule m\n\nENTRY e {\n  ROOT p = f32[\u0663] parameter(0)\n}\n") == (
        "4:16: unexpected character U+0663 (outside strings and comments XLA reads ASCII only)"
    )


def test_the_documented_disagreements_are_told_from_others() -> None:
    """`ALLOWED` names a colon XLA reads as part of a name, and a shape XLA infers that hloopt does not; the same
    verdicts over other texts are still found."""
    colon = _entry("a = f32[] parameter(0)", "ROOT n: = f32[] negate(a)")
    refused = parity_fuzz.hloopt_verdict(colon)
    assert refused is not None and parity_fuzz.allowed(colon, refused, None)
    plain = _entry("ROOT n = f32[] negate(a)")
    assert not parity_fuzz.allowed(plain, parity_fuzz.hloopt_verdict(plain), None)
    inferred = "5:1: failed to infer shape for opcode: while, error: The parameter of condition and body …"
    assert parity_fuzz.allowed(plain, None, inferred)
    assert not parity_fuzz.allowed(plain, None, "5:1: expects integer")
    unpaired = _entry('ROOT c = f32[] custom-call(), custom_call_target="x", backend_config={a:[{b:1}, c:2}')
    assert parity_fuzz.allowed(unpaired, parity_fuzz.hloopt_verdict(unpaired), None)
    paired = _entry('ROOT c = f32[] custom-call(), custom_call_target="x", backend_config={a:[{b:1}], c:"]"}')
    assert not parity_fuzz.allowed(paired, "4:3: some refusal", None)


#: What a golden case's label ends with when only jaxlib 0.12's parser refuses it (0.10's reads it, and
#: hloopt keeps the newer, stricter answer: docs/decisions.md).
NEWER_ONLY = "(jaxlib 0.12)"
#: … and when only jaxlib 0.10's refuses it: 0.12's parser no longer checks it, XLA's verifier still does, and
#: hloopt keeps the check (docs/decisions.md).
OLDER_ONLY = "(jaxlib 0.10)"


def test_xla_refuses_every_parity_case() -> None:
    """The golden cases of what hloopt refuses to match XLA (tests/errors/lexer_parity.hlo and xla_parity.hlo)
    are refused by XLA too (or abort it: a refusal, from a worker)."""
    cases = error_cases(ERRORS / "lexer_parity.hlo") + error_cases(ERRORS / "xla_parity.hlo")
    assert len(cases) >= 50
    judged_elsewhere = NEWER_ONLY if jaxlib_version() < (0, 12) else OLDER_ONLY
    cases = [case for case in cases if not case.label.endswith(judged_elsewhere)]
    verdicts = canonical_in_subprocess([case.text for case in cases])
    accepted = [case.label for case, verdict in zip(cases, verdicts) if not isinstance(verdict, HloError)]
    assert not accepted


def _entry(*lines: str) -> str:
    return "\n".join(["HloModule m", "", "ENTRY e {", *(f"  {line}" for line in lines), "}", ""])


#: Texts hloopt once refused that XLA reads: the refusals the fuzzer found the other way round.
ACCEPTED_BY_XLA = {
    "an empty operand": _entry("a = f32[] parameter(0)", "ROOT s = f32[] add(a,,a)"),
    "an empty operand list with a comma": _entry("ROOT t = () tuple(,)"),
    "a trailing comma among operands": _entry("a = f32[] parameter(0)", "ROOT s = f32[] add(a, a,)"),
    "any character in a JSON backend_config": _entry(
        'ROOT c = f32[] custom-call(), custom_call_target="x", backend_config={"k":{"v":"\u00e9"} \u00e9}'
    ),
    "any character in a frontend attribute's braces": _entry(
        "ROOT p = f32[] parameter(0), frontend_attributes={x={n = 1 : \u0131}}"
    ),
    "a signature parameter without its colon": (
        "HloModule m\n\nENTRY %e (p f32[2]) -> f32[2] {\n  ROOT p = f32[2] parameter(0)\n}\n"
    ),
    "-0 as a dimension and a parameter number": _entry("ROOT p = f32[-0] parameter(-0)"),
    "ROOT against a %name (XLA's lexer ends the keyword at the %)": _entry(
        "a = f32[] parameter(0)", "ROOT%n = f32[] negate(a)"
    ),
    "ROOT, a comment, a %name": _entry("a = f32[] parameter(0)", "ROOT/*c*/%n = f32[] negate(a)"),
    "an instruction after a line comment ended by a CR": _entry("// a comment\r  ROOT p = f32[] parameter(0)"),
    "an add without its shape over floats of two precisions": _entry(
        "a = f32[2] parameter(0)", "b = bf16[2] parameter(1)", "ROOT r = add(a, b)"
    ),
    "a stack frame's fields with a comma, a negative one": (
        'HloModule m\nFileNames\n1 "a.py"\nFunctionNames\n1 "f"\nFileLocations\n'
        "1 {file_name_id=1 function_name_id=1 line=2 end_line=2 column=1 end_column=5}\n"
        "StackFrames\n1 {parent_frame_id=0, file_location_id=-1}\n"
        "ENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"
    ),
    "a domain with empty shardings": _entry(
        "a = f32[2] parameter(0)", 'ROOT d = f32[2] domain(a), domain={kind="sharding", entry={}, exit={}}'
    ),
    "sharding-propagation flags as a braced list": (
        "HloModule m, allow_spmd_sharding_propagation_to_output={ true , false }\n\n"
        "ENTRY e {\n  ROOT a = (f32[2], f32[2]) parameter(0)\n}\n"
    ),
    # XLA's lexer needs no line break between instructions, computations or the header and what follows:
    # a value ends at its string or group, and the next instruction starts there.
    "ROOT run into a braced value": _entry(
        "p = f32[2] parameter(0)", "b = f32[2,3] broadcast(p), dimensions={0}ROOT r = f32[2,3] negate(b)"
    ),
    "a %name run into a braced value": _entry(
        "p = f32[2] parameter(0)",
        "b = f32[2,3] broadcast(p), dimensions={0}%r = f32[2,3] negate(b)",
        "ROOT t = f32[2,3] copy(r)",
    ),
    "a bare name run into a braced value": _entry(
        "p = f32[2] parameter(0)", "s = f32[2] slice(p), slice={[0:2]}r = f32[2] add(p, s)", "ROOT t = f32[2] copy(r)"
    ),
    "a name run into a number": (
        "HloModule m\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
        "ENTRY e {\n  p = f32[8] parameter(0)\n  ar = f32[8] all-reduce(p), to_apply=sum, channel_id=1zero = f32[] constant(0)\n"
        "  ROOT t = f32[8] copy(ar)\n}\n"
    ),
    "an opcode run into a nested instruction's shape": _entry(
        "p = f32[] parameter(0)", "ROOT r = f32[2] add(f32[2]broadcast(p), f32[2]{0}broadcast(p))"
    ),
    "ROOT run into a metadata value": _entry(
        'p = f32[2] parameter(0), metadata={op_name="x"}ROOT r = f32[2] negate(p)'
    ),
    "ROOT run into a sharding": _entry("p = f32[2] parameter(0), sharding={replicated}ROOT r = f32[2] negate(p)"),
    "a %name run into a string value": _entry(
        'p = f32[2] custom-call(), custom_call_target="x"%r = f32[2] negate(p)', "ROOT t = f32[2] copy(r)"
    ),
    "ENTRY run into the header's attribute": (
        "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}ENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"
    ),
    "a computation run into the header's attribute": (
        "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}c {\n  ROOT p = f32[2] parameter(0)\n}\n\n"
        "ENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"
    ),
    "an add without its shape over a scalar and an array": _entry(
        "a = f32[] parameter(0)", "b = f32[5,4] parameter(1)", "ROOT r = add(b, a)"
    ),
    "an add without its shape broadcasting a dimension of size 1": _entry(
        "a = f32[1,4] parameter(0)", "b = f32[5,4] parameter(1)", "ROOT r = add(a, b)"
    ),
    "an entry_computation_layout parameter whose layout is no permutation (no tuple to XLA)": (
        "HloModule m, entry_computation_layout={(f32[2,2,2]{2,1,7})->f32[2,2,2]{2,1,0}}\n\n"
        "ENTRY e {\n  ROOT a = f32[2,2,2] parameter(0)\n}\n"
    ),
    "operand precisions in any case": _entry(
        "a = f32[2,2] parameter(0)",
        "ROOT d = f32[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        "operand_precision={HIGHEST,Default}",
    ),
    "escapes XLA unescapes, and any in a JSON backend_config": _entry(
        'ROOT c = u64[] custom-call(), custom_call_target="a\\\\S\\n\\"\\x41\\101\\u00e9", '
        'backend_config={"a":"\\/\\S"}'
    ),
    "a window stride of -0 (a single number may be negative; a DxD list may not)": _entry(
        "a = f32[1,16,2] parameter(0)",
        "k = f32[16,2,2] parameter(1)",
        "ROOT c = f32[1,1,2] convolution(a, k), window={size=16 stride=-0}, dim_labels=b0f_0io->b0f",
    ),
    "an input_output_alias parameter number -0": (
        "HloModule m, input_output_alias={ {}: (-0, {}) }\n\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\n"
    ),
    "a comma after entry_computation_layout's last parameter": (
        "HloModule m, entry_computation_layout={(f32[], f32[],)->(f32[], f32[])}\n\n"
        "ENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT t = (f32[], f32[]) tuple(a, b)\n}\n"
    ),
    "a comma after input_output_alias's last entry": (
        "HloModule m, input_output_alias={ {0}: (0, {}, must-alias), {1}: (1, {}, must-alias),}\n\n"
        "ENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] parameter(1)\n  ROOT t = (f32[2], f32[2]) tuple(a, b)\n}\n"
    ),
    "a dynamic-update-slice-start (async sugar) with one index per dimension": _entry(
        "p = f32[10] parameter(0)",
        "u = f32[1] parameter(1)",
        "i = s32[] parameter(2)",
        "s = ((f32[10], f32[1], s32[]), f32[10], u32[]) dynamic-update-slice-start(p, u, i)",
        "ROOT d = f32[10] dynamic-update-slice-done(s)",
    ),
    "ENTRY run into a computation attribute": (
        'HloModule m\n\nc {\n  ROOT p = f32[2] parameter(0)\n}, execution_thread="main"ENTRY e {\n'
        "  p = f32[2] parameter(0)\n  ROOT r = f32[2] call(p), to_apply=c\n}\n"
    ),
}


@pytest.mark.parametrize("text", ACCEPTED_BY_XLA.values(), ids=ACCEPTED_BY_XLA.keys())
def test_hloopt_reads_what_xla_reads(text: str) -> None:
    hloopt.parse(text)


def test_a_line_comment_ends_at_a_carriage_return() -> None:
    """XLA's lexer ends a `//` comment at a CR too: what follows the CR is read (and here refused, as XLA does)."""
    text = _entry("// DUS update is at index 4, on shard 1 (\rindex 4..7)", "ROOT p = f32[] parameter(0)")
    with pytest.raises(HloParseError) as caught:
        hloopt.parse(text)
    assert caught.value.location.line == 4


def test_xla_reads_every_text_hloopt_now_reads() -> None:
    verdicts = canonical_in_subprocess(list(ACCEPTED_BY_XLA.values()))
    refused = [name for name, verdict in zip(ACCEPTED_BY_XLA, verdicts) if isinstance(verdict, HloError)]
    assert not refused
