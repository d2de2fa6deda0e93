"""``hloopt trace`` on the command line: exit codes, the text report, ``--json``, ``--nan``, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from looping import counted_loop

from hloopt.cli.trace import trace_command

A = """HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  k = f32[4] constant({1, 2, 3, 4})
  m = f32[4] multiply(x, k)
  ROOT t = f32[4] tanh(m)
}
"""


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(trace_command, [str(a) for a in args])
    return result.exit_code, result.output


def test_a_planted_constant_is_named_and_the_exit_is_1(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(A)
    (tmp_path / "b.hlo").write_text(A.replace("{1, 2, 3, 4}", "{1, -2, 3, 4}"))
    code, out = invoke(tmp_path / "a.hlo", tmp_path / "b.hlo")
    assert code == 1 and "first local error over tolerance: %k" in out
    assert "output 0: %t <- %m <- %k" in out
    code, out = invoke(tmp_path / "a.hlo", tmp_path / "b.hlo", "--json")
    report = json.loads(out)
    assert code == 1 and report["first"] == "k" and report["matched_by"] == "names"
    assert report["schema"] == "hloopt-trace/1" and report["outputs"][0]["path"] == ["t", "m", "k"]


def test_a_module_against_itself_is_clean(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(A)
    code, out = invoke(tmp_path / "a.hlo", "--reference", "f64")
    assert code == 0 and "no instruction's local error is over tolerance" in out
    assert "verdict against f64: precision" in out


def test_nan_origin(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(A.replace("tanh(m)", "log(m)"))
    np.savez(tmp_path / "in.npz", input0=np.array([1, -1, 1, 1], np.float32))
    code, out = invoke(tmp_path / "a.hlo", "--nan", "--inputs", tmp_path / "in.npz")
    assert code == 1 and "%t (log) at [1] = nan" in out and "operand %m = -2.0" in out


def test_b_and_passes_together_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(A)
    code, out = invoke(tmp_path / "a.hlo", tmp_path / "a.hlo", "--passes", "all")
    assert code == 2 and "not both" in out


def test_an_invalid_module_is_an_error_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(A.replace("multiply(x, k)", "multiply(x, nowhere)"))
    code, out = invoke(tmp_path / "a.hlo")
    assert code == 2 and "a.hlo:" in out and "Traceback" not in out


def test_bisect_needs_a_pipeline_with_an_expander_pass(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(A)
    code, out = invoke(tmp_path / "a.hlo", "--bisect")
    assert code == 2 and "--bisect needs --passes or --neuron-cc-flags" in out
    code, out = invoke(tmp_path / "a.hlo", "--bisect", "--passes", "upcast-all-to-fp32")
    assert code == 2 and "rewrites instruction by instruction" in out


def test_bisect_of_a_pass_that_keeps_the_numbers(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(
        A.replace("multiply(x, k)", "multiply(x, kc)").replace(
            "k = f32[4] constant({1, 2, 3, 4})", "k = bf16[4] constant({1, 2, 3, 4})\n  kc = f32[4] convert(k)"
        )
    )
    code, out = invoke(tmp_path / "a.hlo", "--bisect", "--passes", "fold-constant-converts", "--json")
    report = json.loads(out)
    assert report["schema"] == "hloopt-bisect/2" and report["culprits"] == [] and report["executions"] == 2
    assert code == 0 and report["sites"] == [{"pass": "fold-constant-converts", "instruction": "kc"}]


MATMUL = """HloModule mm
ENTRY main {
  x = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  d = f32[8,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[8,4] tanh(d)
}
"""


def test_the_compile_flags_make_b_and_a_bf16_matmult_names_the_dot(tmp_path: Path) -> None:
    """B is A under neuronx-cc's flags: the auto-cast rounds the dot's operands to bf16, so the dot is where
    the error enters (a local source) and tanh only passes it on."""
    (tmp_path / "a.hlo").write_text(MATMUL)
    flags = "--auto-cast matmult --auto-cast-type bf16"
    code, out = invoke(tmp_path / "a.hlo", "--neuron-cc-flags", flags, "--json")
    report = json.loads(out)
    assert code == 1 and report["first"] == "d" and report["matched_by"] == "provenance", out
    over = {row["a"]: row["local_over_tolerance"] for row in report["instructions"]}
    assert over["d"] and not over["t"]
    assert report["outputs"][0]["path"] == ["t", "d"]
    code, out = invoke(tmp_path / "a.hlo", tmp_path / "a.hlo", "--neuron-cc-flags", flags)
    assert code == 2 and "not both" in out


def test_bisect_of_a_pipeline_runs_its_whole_passes_in_every_test(tmp_path: Path) -> None:
    """upcast-all-to-fp32 has no sites: it runs in each test, once first with no site rewritten."""
    (tmp_path / "a.hlo").write_text(A.replace("f32", "bf16"))
    passes = "upcast-all-to-fp32,neuron-int-matmul-downcast"
    code, out = invoke(tmp_path / "a.hlo", "--bisect", "--passes", passes, "--json")
    assert code == 0 and json.loads(out)["sites"] == [] and json.loads(out)["executions"] == 2, out
    flags = "--auto-cast matmult --auto-cast-type bf16"
    code, out = invoke(tmp_path / "a.hlo", "--bisect", "--neuron-cc-flags", flags)
    assert code == 2 and "neuron-auto-cast rewrites the module as a whole" in out


@pytest.mark.slow
def test_a_snapshot_is_traced_on_its_recorded_arguments(jax_snapshots: dict[str, Path]) -> None:
    path = jax_snapshots["bf16_matmul"]
    code, out = invoke(path, "--passes", "all", "--json")
    report = json.loads(out)
    assert code in (0, 1) and report["matched_by"] == "provenance" and report["instructions"], out
    # The snapshot's arguments, not random inputs: another --seed traces the same values.
    _, again = invoke(path, "--passes", "all", "--json", "--seed", "7")
    assert json.loads(again)["instructions"] == report["instructions"]


CALLING = """HloModule m
inner {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  s = f32[4] multiply(a, b)
  ROOT e = f32[4] exponential(s)
}
ENTRY main {
  x = f32[4] parameter(0)
  k = f32[4] constant({1, 2, 3, 4})
  c = f32[4] call(x, k), to_apply=inner
  ROOT t = f32[4] tanh(c)
}
"""


def test_instructions_inside_a_call_are_traced(tmp_path: Path) -> None:
    """The call is inlined for capture: a wrong instruction inside it is named, not the call."""
    (tmp_path / "a.hlo").write_text(CALLING)
    (tmp_path / "b.hlo").write_text(CALLING.replace("multiply(a, b)", "subtract(a, b)"))
    code, out = invoke(tmp_path / "a.hlo", tmp_path / "b.hlo", "--json")
    report = json.loads(out)
    assert code == 1 and report["first"] == "s", out
    over = {row["a"]: row["local_over_tolerance"] for row in report["instructions"]}
    assert over == {"x": False, "k": False, "s": True, "e": False, "t": False}
    assert report["outputs"][0]["path"] == ["t", "e", "s"]


LOOP = counted_loop(
    4,
    """
    step = f32[4] constant({1, 1, 1, 1})
    acc = f32[4] subtract(bv, step)
    l = f32[4] log(acc)
    """,
    "ROOT out = f32[4] copy(wv)",
)


@pytest.mark.slow
def test_a_loop_body_is_traced_per_iteration_up_to_the_cap(tmp_path: Path) -> None:
    """--loop-iterations 2: the first iteration and the last are traced; the JSON says how the loop ran."""
    (tmp_path / "a.hlo").write_text(LOOP)
    (tmp_path / "b.hlo").write_text(LOOP.replace("subtract(bv, step)", "add(bv, step)"))
    np.savez(tmp_path / "in.npz", np.array([10, 20, 30, 40], np.float32))
    code, out = invoke(
        tmp_path / "a.hlo", tmp_path / "b.hlo", "--inputs", tmp_path / "in.npz", "--loop-iterations", "2"
    )
    assert code == 1 and "first local error over tolerance: %acc@w#0" in out, out
    assert "loop %w: 4 iterations in A, 4 in B; traced: 0, 3 (cap 2)" in out
    code, out = invoke(tmp_path / "a.hlo", tmp_path / "b.hlo", "--inputs", tmp_path / "in.npz", "--json")
    report = json.loads(out)
    assert report["loops"] == [{"site": "w", "iterations_a": 4, "iterations_b": 4, "traced": [0, 1, 2, 3], "cap": 16}]
    rows = [row for row in report["instructions"] if row["instruction"] == "acc@w"]
    assert [row["iteration"] for row in rows] == [0, 1, 2, 3] and {row["site"] for row in rows} == {"w"}
    (acc,) = [row for row in report["iterated"] if row["instruction"] == "acc@w"]
    assert acc["iterations"] == 4 and acc["moved"]


@pytest.mark.slow
def test_nan_origin_inside_a_loop_body_names_its_iteration(tmp_path: Path) -> None:
    (tmp_path / "a.hlo").write_text(LOOP)
    np.savez(tmp_path / "in.npz", np.array([10, 20, 2.5, 40], np.float32))
    code, out = invoke(tmp_path / "a.hlo", "--nan", "--inputs", tmp_path / "in.npz", "--json")
    origin = json.loads(out)["nan_origin"]
    assert code == 1 and origin["instruction"] == "l@w#2" and origin["index"] == [2], out
