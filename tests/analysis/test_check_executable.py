"""`check_executable`: what XLA's parser takes but will not run is refused before XLA sees it, located.

Each case is also run for real (`hloopt.xla.running.run`, the installed jaxlib): each refused one
must fail there too, so the check refuses nothing that runs, and each near miss must run.
"""

from __future__ import annotations

import re

import pytest

from hloopt import parse
from hloopt.analysis.verifier import check_executable
from hloopt.errors import HloError, HloParseError
from hloopt.ir import ArrayShape
from hloopt.xla.bridge import isolated_map
from hloopt.xla.running import run


def _text(body: str) -> str:
    return "HloModule m\n\nENTRY %e {\n" + "".join(f"  {line.strip()}\n" for line in body.strip().splitlines()) + "}\n"


#: (body, what the error says); the last line of each body is the one refused.
REFUSED = {
    "add of different dimensions": (
        "p = f32[4] parameter(0)\nq = f32[8] parameter(1)\nROOT r = f32[4] add(p, q)",
        "operand 1 (%q) is f32[8], but add takes operands of its result's dimensions, f32[4]",
    ),
    "add into other dimensions": (
        "p = f32[4] parameter(0)\nROOT r = f32[8] add(p, p)",
        "operand 0 (%p) is f32[4], but add takes operands of its result's dimensions, f32[8]",
    ),
    "degenerate broadcast": (
        "p = f32[1,4] parameter(0)\nq = f32[3,4] parameter(1)\nROOT r = f32[3,4] multiply(p, q)",
        "operand 0 (%p) is f32[1,4]",
    ),
    "scalar operand of a binary op": (
        "p = f32[] parameter(0)\nq = f32[4] parameter(1)\nROOT r = f32[4] subtract(p, q)",
        "operand 0 (%p) is f32[]",
    ),
    "another rank": (
        "p = f32[4] parameter(0)\nq = f32[1,4] parameter(1)\nROOT r = f32[1,4] maximum(p, q)",
        "operand 0 (%p) is f32[4]",
    ),
    "mixed element types": (
        "p = f32[4] parameter(0)\nq = bf16[4] parameter(1)\nROOT r = f32[4] add(p, q)",
        "add operands have different element types: f32, bf16",
    ),
    "result element type": (
        "p = f32[4] parameter(0)\nROOT r = s32[4] negate(p)",
        "shape s32[4] does not follow from the operands (f32[4])",
    ),
    "unary into other dimensions": (
        "p = f32[4] parameter(0)\nROOT r = f32[2] exponential(p)",
        "operand 0 (%p) is f32[4]",
    ),
    "convert into other dimensions": (
        "p = f32[4] parameter(0)\nROOT r = s32[8] convert(p)",
        "operand 0 (%p) is f32[4]",
    ),
    "compare of different dimensions": (
        "p = f32[4] parameter(0)\nq = f32[8] parameter(1)\nROOT r = pred[4] compare(p, q), direction=LT",
        "operand 1 (%q) is f32[8], but compare takes",
    ),
    "compare of different types": (
        "p = f32[4] parameter(0)\nq = s32[4] parameter(1)\nROOT r = pred[4] compare(p, q), direction=LT",
        "compare operands have different element types: f32, s32",
    ),
    "compare into a float": (
        "p = f32[4] parameter(0)\nROOT r = f32[4] compare(p, p), direction=LT",
        "shape f32[4] does not follow from the operands (pred[4])",
    ),
    "select of different dimensions": (
        "c = pred[4] parameter(0)\np = f32[4] parameter(1)\nq = f32[8] parameter(2)\nROOT r = f32[4] select(c, p, q)",
        "operand 2 (%q) is f32[8], but select takes",
    ),
    "select's predicate of other dimensions": (
        "c = pred[8] parameter(0)\np = f32[4] parameter(1)\nROOT r = f32[4] select(c, p, p)",
        "operand 0 (%c) is pred[8]",
    ),
    "select on a float predicate": (
        "c = f32[4] parameter(0)\np = f32[4] parameter(1)\nROOT r = f32[4] select(c, p, p)",
        "select's predicate is f32, not pred",
    ),
    "select of two types": (
        "c = pred[4] parameter(0)\np = f32[4] parameter(1)\nq = s32[4] parameter(2)\nROOT r = f32[4] select(c, p, q)",
        "select operands have different element types: f32, s32",
    ),
    "clamp bounds of other dimensions": (
        "a = f32[8] parameter(0)\np = f32[4] parameter(1)\nROOT r = f32[4] clamp(a, p, a)",
        "operand 0 (%a) is f32[8], but clamp takes",
    ),
    "clamp of two types": (
        "a = s32[4] parameter(0)\np = f32[4] parameter(1)\nROOT r = f32[4] clamp(a, p, a)",
        "clamp operands have different element types: s32, f32, s32",
    ),
    "complex of different dimensions": (
        "p = f32[4] parameter(0)\nq = f32[8] parameter(1)\nROOT r = c64[4] complex(p, q)",
        "operand 1 (%q) is f32[8]",
    ),
    "dot contracting sizes": (
        "p = f32[2,3] parameter(0)\nq = f32[4,5] parameter(1)\n"
        "ROOT r = f32[2,5] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "dot contracting dimensions differ in size: lhs 1 of f32[2,3] is 3, rhs 0 of f32[4,5] is 4",
    ),
    "dot result": (
        "p = f32[2,3] parameter(0)\nq = f32[3,5] parameter(1)\n"
        "ROOT r = f32[2,6] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "shape f32[2,6] does not follow from the operands (f32[2,5])",
    ),
    "transpose result": (
        "p = f32[2,3] parameter(0)\nROOT r = f32[2,3] transpose(p), dimensions={1,0}",
        "shape f32[2,3] does not follow from the operands (f32[3,2])",
    ),
    "broadcast sizes": (
        "p = f32[4] parameter(0)\nROOT r = f32[3,5] broadcast(p), dimensions={1}",
        "broadcast operand dimension 0 (4) is not result dimension 1 (5)",
    ),
    "broadcast without dimensions": (
        "p = f32[4] parameter(0)\nROOT r = f32[4,3] broadcast(p), dimensions={}",
        "broadcast dimensions={} do not map f32[4] into f32[4,3]",
    ),
    "get-tuple-element shape": (
        "p = (f32[4], s32[2]) parameter(0)\nROOT r = f32[8] get-tuple-element(p), index=0",
        "shape f32[8] does not follow from the operands (f32[4])",
    ),
    "bitcast changing the byte size": (
        "p = f32[4] parameter(0)\nROOT r = bf16[4] bitcast(p)",
        "bitcast f32[4] → bf16[4] changes the byte size (16 → 8)",
    ),
    "in a called computation": (
        "p = f32[4] parameter(0)\nROOT r = f32[4] call(p), to_apply=%callee",
        "%s in %callee: operand 1 (%q) is f32[8]",
    ),
}

CALLEE = "%callee (x: f32[4]) -> f32[4] {\n  x = f32[4] parameter(0)\n  q = f32[8] broadcast(f32[] constant(1)), dimensions={}\n  ROOT s = f32[4] add(x, q)\n}\n\n"

#: What looks close but runs: no error.
RUNS = {
    "scalar predicate of select": "c = pred[] parameter(0)\np = f32[4] parameter(1)\nROOT r = f32[4] select(c, p, p)",
    "scalar bounds of clamp": "a = f32[] parameter(0)\np = f32[4] parameter(1)\nROOT r = f32[4] clamp(a, p, a)",
    "size-1 dimension broadcast": "p = f32[1] parameter(0)\nROOT r = f32[3,5] broadcast(p), dimensions={1}",
    "a real abs of a complex": "p = c64[4] parameter(0)\nROOT r = f32[4] abs(p)",
    "a batched dot": "p = f32[2,3,4] parameter(0)\nq = f32[2,4,5] parameter(1)\n"
    "ROOT r = f32[2,3,5] dot(p, q), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
    "rhs_contracting_dims={1}",
}


def _source(case: str) -> str:
    text = _text(REFUSED[case][0])
    return text.replace("HloModule m\n\n", "HloModule m\n\n" + CALLEE) if "callee" in text else text


@pytest.mark.parametrize("case", REFUSED)
def test_a_module_xla_would_not_run_is_refused_at_its_instruction(case: str) -> None:
    source = _source(case)
    module = parse(source, "m.hlo")  # XLA's parser takes it, and so does hloopt's
    with pytest.raises(HloParseError) as caught:
        check_executable(module, source, "m.hlo")
    err = caught.value
    lines = source.splitlines()
    refused = "ROOT s =" if "callee" in source else "ROOT r ="
    line = next(index for index, written in enumerate(lines) if written.lstrip().startswith(refused))
    assert (err.location.filename, err.location.line) == ("m.hlo", line + 1)
    assert err.location.column == lines[line].index("ROOT") + 1
    assert REFUSED[case][1] in err.message and err.message.endswith("XLA would refuse to run the module")
    assert "\n" not in err.message and "MLIR" not in err.message


def test_without_its_source_the_error_is_one_line_naming_the_file() -> None:
    module = parse(_source("add of different dimensions"), "m.pb")
    with pytest.raises(
        HloError, match=r"^m\.pb: %r in %e: operand 1 \(%q\) is f32\[8\], but add takes .*run the module$"
    ):
        check_executable(module, None, "m.pb")


def test_a_source_that_does_not_define_the_instruction_names_the_file_not_line_one() -> None:
    """Text other than the module's own (a caller's mistake) holds no line to point at: named only, as
    without a source, never put at 1:1."""
    module = parse(_source("add of different dimensions"), "m.hlo")
    with pytest.raises(HloError) as caught:
        check_executable(module, "HloModule other\n", "m.hlo")
    assert not isinstance(caught.value, HloParseError)
    assert re.fullmatch(
        r"m\.hlo: %r in %e: operand 1 \(%q\) is f32\[8\], but add takes .*run the module", str(caught.value)
    )


@pytest.mark.parametrize("case", RUNS)
def test_what_xla_runs_is_not_refused(case: str) -> None:
    check_executable(parse(_text(RUNS[case])))


def test_xla_refuses_every_refused_case_and_runs_every_near_miss() -> None:
    """The differential half: what the check refuses does not run, and what it accepts does."""
    refused = [_source(case) for case in REFUSED]
    runs = [_text(RUNS[case]) for case in RUNS]
    results = isolated_map(run, [(text,) for text in refused + runs], workers=2)
    for case, result in zip(REFUSED, results):
        assert isinstance(result, HloError), f"{case}: XLA ran it"
    for case, result in zip(RUNS, results[len(refused) :]):
        assert not isinstance(result, Exception), f"{case}: {result}"


def test_a_reshape_changing_the_element_count_is_refused() -> None:
    """XLA's parser dies on one (a CHECK failure) and hloopt's refuses it; a module built in Python can
    still hold one, so the check refuses it before XLA sees it."""
    module = parse(_text("p = f32[4] parameter(0)\nROOT r = f32[2,2] reshape(p)"))
    check_executable(module)
    module.entry.instructions[-1].set_shape(ArrayShape("f32", (3,), (False,)))
    with pytest.raises(HloError, match=r"%r in %e: reshape of f32\[4\] \(4 elements\) to f32\[3\] \(3\)"):
        check_executable(module)
