"""Pass and verifier refusals point at the statement of the instruction they are about (``FILE:LINE:COL``, the
line, a caret) when the module came from HLO text; from any other format they name the file and the instruction.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_invoke import invoke
from hlo_text import hlo

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.analysis.verifier import VerificationError
from hloopt.errors import HloError, HloParseError, SourceLocation, about, located
from hloopt.ir.builder import Builder
from hloopt.ir.module import Instruction
from hloopt.passes.base import OpExpanderPass, PassError
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse

#: Two instructions the verifier refuses, one in a called computation that reuses an entry name, and an entry
#: signature out of step with its layout (a problem about no instruction).
TWO_BAD = hlo("""
    HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

    helper {
      x = s8[8] parameter(0)
      y = s16[8] parameter(1)
      ROOT d = s32[8] dot(x, y)
    }

    ENTRY main {
      x = f32[4] parameter(0)
      k = s8[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
      l = s16[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
      c = s32[8] call(k, l), to_apply=helper
      ROOT n = f32[8] negate(x)
    }
""")


def test_an_invalid_input_points_at_its_first_bad_statement_and_lists_the_rest(tmp_path: Path) -> None:
    source = tmp_path / "two.hlo"
    source.write_text(TWO_BAD)
    result = invoke("run", source, "--passes", "all")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"hloopt: error: {source}:6:3: the input, before any pass: invalid module: "
        "%d in %helper: shape s32[8] does not follow from the operands (s32[8,8])"
    )
    assert lines[1:3] == ["    ROOT d = s32[8] dot(x, y)", "    ^"]
    assert lines[3:] == [
        "  %n in %main: shape f32[8] does not follow from the operands (f32[4])",
        "  entry result is f32[8], entry_computation_layout says f32[4]",
    ]
    assert "Traceback" not in result.output


def test_an_instruction_is_found_in_its_own_computation_when_another_reuses_its_name() -> None:
    err = VerificationError(["%x in %main: wrong"], before_passes=True, subjects=[("x", "main")])
    pointed = located(err, TWO_BAD, "two.hlo")
    assert isinstance(pointed, HloParseError)
    assert (pointed.location.line, pointed.location.column) == (10, 3)
    assert pointed.source_line == "  x = f32[4] parameter(0)"


def test_a_problem_about_no_instruction_leaves_the_error_unlocated() -> None:
    err = VerificationError(["entry has 2 parameters, entry_computation_layout lists 1"])
    assert err.subject is None and located(err, TWO_BAD, "two.hlo") is err


@dataclass(frozen=True)
class _Refuses(OpExpanderPass):
    """A pass that refuses its input on the negate (its words about it, not a bug)."""

    name = "refuses"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == "negate"

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        raise HloError("this pass cannot take a negate")


NEGATE = hlo("""
    HloModule m

    ENTRY main {
      p = f32[4] parameter(0)
      ROOT n = f32[4] negate(p)
    }
""")


def test_a_pass_s_refusal_records_the_instruction_it_refused() -> None:
    with pytest.raises(HloError) as caught:
        run_pipeline(parse(NEGATE), [_Refuses()])
    assert caught.value.subject == ("n", "main")
    pointed = located(caught.value, NEGATE, "neg.hlo")
    assert str(pointed).splitlines() == [
        "neg.hlo:5:3: this pass cannot take a negate",
        "    ROOT n = f32[4] negate(p)",
        "    ^",
    ]


def test_a_refusal_in_a_batch_is_located_in_its_report(tmp_path: Path) -> None:
    """The batch's workers locate it too: the report keeps the line and column."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "two.hlo").write_text(TWO_BAD)
    report = tmp_path / "report.json"
    result = invoke("run", tmp_path / "in", "--check", "--passes", "all", "--report", report)
    assert result.exit_code == 1  # a batch: this module failed, the batch ran
    [module] = json.loads(report.read_text())["modules"]
    assert (module["error"]["line"], module["error"]["column"]) == (6, 3)
    assert "invalid module: %d in %helper" in module["error"]["message"]


def test_a_refusal_in_the_second_module_of_a_split_file_is_at_the_file_s_line(tmp_path: Path) -> None:
    source = tmp_path / "split.hlo"
    source.write_text(NEGATE + "// -----\n" + TWO_BAD)
    result = invoke("run", source, "--split-input-file", "--passes", "all")
    assert result.exit_code == 2
    first = NEGATE.count("\n") + 1
    assert f"{source}:{first + 6}:3: the input, before any pass: invalid module: %d in %helper" in result.stderr


def test_a_module_read_from_a_proto_names_the_file_and_the_instruction(tmp_path: Path) -> None:
    """XLA prints a proto's text, which the user never sees: no LINE:COL in it, but the file and the instruction."""
    text, proto = tmp_path / "two.hlo", tmp_path / "two.pb"
    text.write_text(TWO_BAD.replace(", entry_computation_layout={(f32[4]{0})->f32[4]{0}}", ""))
    assert invoke("run", text, "-o", proto).exit_code == 0
    result = invoke("run", proto, "--passes", "all")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"hloopt: error: {proto}: the input, before any pass: invalid module:\n")
    assert "%d in %helper: shape s32[8] does not follow from the operands" in result.stderr
    assert f"{proto}:" + "1" not in result.stderr.replace(f"{proto}: ", "")


@pytest.mark.parametrize(
    "err",
    [
        VerificationError(["%d in %helper: bad", "%n in %main: worse"], "p", subjects=[("d", "helper"), None]),
        PassError("KeyError: 'k'", "p", "%n (negate) in %main", ("a", "b"), ("n", "main")),
        about(HloError("refused"), "n", "main"),
        HloParseError("bad", SourceLocation("f.hlo", 2, 3), "  line", "  more"),
    ],
    ids=["verification", "pass", "refusal", "located"],
)
def test_errors_cross_from_a_worker_with_what_they_are_about(err: HloError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err) and back.subject == err.subject
