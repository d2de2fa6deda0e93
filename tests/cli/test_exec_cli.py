"""``hloopt exec``/``compare`` through click, and the worker processes that keep XLA crashes out."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from hlo_text import hlo
from processes import children

import hloopt
from hloopt.arrays.npz import load_arrays
from hloopt.cli.execution import compare_command, exec_command
from hloopt.xla import bridge
from hloopt.xla.bridge import XlaCrash, XlaError, canonical_in_subprocess, isolated_call, isolated_map
from hloopt.xla.running import execute

MIXED = """HloModule mixed
ENTRY main {
  p = (bf16[3], s32[2]) parameter(0)
  q = f8e4m3fn[2,2] parameter(1)
  a = bf16[3] get-tuple-element(p), index=0
  i = s32[2] get-tuple-element(p), index=1
  c = bf16[3] constant({1, 2, 3})
  ROOT t = (bf16[3], f8e4m3fn[2,2], s32[2]) tuple(bf16[3] add(a, c), q, i)
}
"""

#: Kills XLA's CPU compiler (SIGSEGV on a complex remainder) in every jaxlib from 0.10 to 0.12.
CRASHES_XLA = """HloModule crashes_xla
ENTRY main {
  a = c64[2] constant({(1, 2), (3, 4)})
  ROOT r = c64[2] remainder(a, a)
}
"""

#: What XLA makes of a less-than of complex constants changed with each jaxlib (see the test).
COMPLEX_LESS_THAN = """HloModule complex_less_than
ENTRY main {
  a = c128[2] constant({(1, 2), (3, 4)})
  b = c128[2] constant({(5, 6), (7, 8)})
  ROOT lt = pred[2] compare(a, b), direction=LT
}
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "a.hlo").write_text(MIXED)
    (tmp_path / "renamed.hlo").write_text(MIXED.replace("c = ", "const.1 = ").replace("(a, c)", "(a, const.1)"))
    (tmp_path / "changed.hlo").write_text(MIXED.replace("{1, 2, 3}", "{1, 2, 3.5}"))
    (tmp_path / "broken.hlo").write_text(
        hlo("""
        HloModule broken
        ENTRY main {
          ROOT p = f32[] parameter(
        }
        """)
    )
    (tmp_path / "gpu.hlo").write_text(
        hlo("""
        HloModule gpu
        ENTRY main {
          p = f32[2] parameter(0)
          ROOT c = f32[2] custom-call(p), custom_call_target="__cublas$gemm"
        }
        """)
    )
    (tmp_path / "crash.hlo").write_text(CRASHES_XLA)
    return tmp_path


def invoke(command: click.Command, *args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_exec_summarises_each_output(files: Path) -> None:
    code, out, err = invoke(exec_command, files / "a.hlo", "--seed", "3")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["output", "0:", "bf16[3]"],
        ["output", "1:", "f8e4m3fn[2,2]"],
        ["output", "2:", "s32[2]"],
    ]
    assert all("min=" in line and "max=" in line and "mean=" in line and line.endswith("nan=0") for line in lines)


@pytest.mark.slow
def test_exec_saves_and_replays_inputs_and_outputs(files: Path) -> None:
    inputs, outputs = files / "in.npz", files / "out.npz"
    code, first, _ = invoke(exec_command, files / "a.hlo", "--seed", "9", "--save-inputs", inputs, "-o", outputs)
    assert code == 0
    saved = load_arrays(str(inputs))
    assert [a.shape for a in saved] == [(3,), (2,), (2, 2)]
    with np.load(outputs) as archive:
        assert archive.files == ["output0", "output1", "output2"]
    code, replay, _ = invoke(exec_command, files / "a.hlo", "--inputs", inputs, "--seed", "1")
    assert code == 0 and replay == first


@pytest.mark.slow
def test_compare_exit_codes_and_json(files: Path) -> None:
    code, out, _ = invoke(compare_command, files / "a.hlo", files / "renamed.hlo")
    assert code == 0 and out.splitlines()[-1].startswith("all outputs within tolerance")
    code, out, _ = invoke(compare_command, files / "a.hlo", files / "changed.hlo", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and [o["bit_identical"] for o in report["outputs"]] == [False, True, True]
    assert report["outputs"][0]["over_tolerance"] >= 1 and report["outputs"][0]["ulp_type"] == "bf16"
    code, out, _ = invoke(compare_command, files / "a.hlo", files / "changed.hlo", "--atol", "1", "--json")
    assert code == 0 and json.loads(out)["ok"] is True


@pytest.mark.slow
def test_compare_with_given_inputs(files: Path) -> None:
    inputs = files / "in.npz"
    assert invoke(exec_command, files / "a.hlo", "--save-inputs", inputs)[0] == 0
    code, out, _ = invoke(compare_command, files / "a.hlo", files / "a.hlo", "--inputs", inputs, "--json")
    assert code == 0 and json.loads(out)["seed"] is None and json.loads(out)["bit_identical"] is True


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("broken.hlo", "broken.hlo:4:1: expected `)`, `,`, an integer or an operand name"),
        ("gpu.hlo", "gpu.hlo: %c (custom-call) in %main calls __cublas$gemm, which only a GPU or TPU implements"),
        ("crash.hlo", "XLA compile failed: worker"),
        ("missing.hlo", "missing.hlo: no such file"),
    ],
)
def test_errors_exit_2_with_the_failing_stage(files: Path, name: str, expected: str) -> None:
    for command, args in ((exec_command, [files / name]), (compare_command, [files / "a.hlo", files / name])):
        code, out, err = invoke(command, *args)
        assert code == 2 and out == ""
        assert err.startswith("hloopt: error: ") and expected in err, err
        assert "Traceback" not in err


#: An optimised dump's shape: nested fusions and a bitcast, which abort XLA's CPU compiler as they are.
OPTIMISED = """HloModule optimised
inner_fusion {
  p0 = f32[4] parameter(0)
  update = f32[2] parameter(1)
  c0 = s32[] constant(0)
  ROOT dus = f32[4] dynamic-update-slice(p0, update, c0)
}
outer_fusion {
  p0 = f32[4] parameter(0)
  update = f32[2] parameter(1)
  nested = f32[4] fusion(p0, update), kind=kLoop, calls=inner_fusion
  ROOT bitcast = f32[2,2] bitcast(nested)
}
ENTRY test {
  p0 = f32[4] parameter(0)
  update = f32[2] parameter(1)
  ROOT fusion = f32[2,2] fusion(p0, update), kind=kLoop, calls=outer_fusion
}
"""


def test_an_optimised_dump_runs_as_the_calls_and_reshape_it_stands_for(tmp_path: Path) -> None:
    path = tmp_path / "optimised.hlo"
    path.write_text(OPTIMISED)
    p0, update = np.arange(4, dtype=np.float32), np.array([10, 20], np.float32)
    np.savez(tmp_path / "in.npz", p0, update)
    code, _, err = invoke(exec_command, path, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert code == 0, err
    with np.load(tmp_path / "out.npz") as archive:
        np.testing.assert_array_equal(archive["output0"], [[10, 20], [2, 3]])
    assert path.read_text() == OPTIMISED


def test_crash_is_reported_with_xla_reason() -> None:
    """XLA's last words come with the crash: the CPU compiler fails a CHECK on the optimised dump as it is."""
    inputs = [np.arange(4, dtype=np.float32), np.array([10, 20], np.float32)]
    with pytest.raises(XlaCrash) as caught:
        isolated_call(bridge.execute, OPTIMISED, inputs)
    assert caught.value.stage == "compile"
    assert "Check failed: operand_maps.size() == 1" in caught.value.message


def test_a_complex_less_than_by_jaxlib() -> None:
    """0.10's constant folder aborts on it (no complex ordering), 0.11 folds it, 0.12 refuses it at compile."""
    (outcome,) = isolated_map(execute, [(COMPLEX_LESS_THAN,)])
    if bridge.jaxlib_version() < (0, 11):
        assert isinstance(outcome, XlaCrash) and "unhandled direction for conversion to Comparison" in outcome.message
    elif bridge.jaxlib_version() < (0, 12):
        assert [bool(x) for x in outcome[0]] == [True, True]
    else:
        assert type(outcome) is XlaError and (outcome.stage, outcome.message) == (
            "compile",
            "UNKNOWN: Unknown MLIR failure",
        )


def test_isolated_map_keeps_order_and_loses_only_the_crashing_call() -> None:
    good = hlo("""
        HloModule ok
        ENTRY main {
          ROOT c = f32[] constant(1)
        }
        """)
    results = canonical_in_subprocess([good, "HloModule broken", good, CRASHES_XLA, good])
    assert isinstance(results[0], str) and results[0] == results[2] == results[4]
    assert isinstance(results[1], XlaError) and results[1].stage == "parse"
    assert isinstance(results[3], str)  # parsing is fine; only compiling it crashes
    outcomes = isolated_map(execute, [(good,), (CRASHES_XLA,), (good,)])
    assert isinstance(outcomes[1], XlaCrash)
    assert [float(outcomes[0][0]), float(outcomes[2][0])] == [1.0, 1.0]


@pytest.mark.slow
def test_signals_timeouts_and_bugs() -> None:
    (aborted,) = isolated_map(os.abort, [()])
    assert isinstance(aborted, XlaCrash) and "SIGABRT" in aborted.message and aborted.stage == "start"
    started = time.monotonic()
    (slept,) = isolated_map(time.sleep, [(30,)], timeout=1)
    assert isinstance(slept, XlaCrash) and "timed out after 1 s" in slept.message
    assert time.monotonic() - started < 15
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        isolated_map(divmod, [(1, 0)])


def test_an_isolated_pool_keeps_its_worker_across_maps_and_replaces_a_crashed_one() -> None:
    """What a batch worker comparing module after module relies on: one XLA worker for all its modules,
    a crash costing only its own call, and nothing left running once closed."""
    before = children()
    with bridge.IsolatedPool(1) as pool:
        (first,) = pool.map(os.getpid, [()])
        (second,) = pool.map(os.getpid, [()])
        assert first == second  # the same worker process served both maps
        crashed, third = pool.map(os.abort, [()]), pool.map(os.getpid, [()])
        assert isinstance(crashed[0], XlaCrash) and "SIGABRT" in crashed[0].message
        assert third[0] != first  # a fresh worker
        assert len(children() - before) == 2  # the worker and, since a call killed one, a spare; the dead one reaped
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            pool.map(divmod, [(1, 0)])
        assert pool.map(os.getpid, [()]) == third  # a bug in the call is not the worker's end
    assert children() == before
    assert pool.map(int, [("7",)]) == [7]  # a closed pool starts again on its next map
    pool.close()
    assert children() == before


@pytest.mark.slow
def test_a_worker_killed_from_outside_costs_only_its_call() -> None:
    """A worker killed during a map (by the OOM killer, say): its call is a crash, not an error of the whole
    map, and the other calls and the next map run in workers of the same pool."""
    with bridge.IsolatedPool(2) as pool:
        killed, left = pool.map(os.system, [("kill -9 $PPID; sleep 5",), ("true",)], labels=["a.hlo", "b.hlo"])
        assert isinstance(killed, XlaCrash) and str(killed) == "a.hlo: XLA start failed: worker killed"
        assert left == 0
        assert pool.map(os.system, [("true",), ("true",)]) == [0, 0]


#: A jax host callback whose index no process has: refused by name before XLA sees it.
HOST_CALLBACK = """HloModule callback
ENTRY main {
  x = f32[2]{0} parameter(0)
  ROOT cb = f32[2]{0} custom-call(x), custom_call_target="xla_ffi_python_cpu_callback", api_version=API_VERSION_TYPED_FFI, backend_config={index = 123456 : ui64}
}
"""

#: A LAPACK triangular solve whose matrix is 1x1 but whose right-hand side has 4M rows: jaxlib reads the matrix
#: by the right-hand side's size and the worker dies with SIGSEGV while it runs, on every jaxlib line. (A host
#: callback with no index list crashed jaxlib 0.10 but is a plain error in 0.12.)
OUT_OF_BOUNDS_SOLVE = """HloModule trsm
ENTRY main {
  a = f32[1,1]{1,0} parameter(0)
  b = f32[4000000,1]{1,0} parameter(1)
  ROOT cb = f32[4000000,1]{1,0} custom-call(a, b), custom_call_target="lapack_strsm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={diag = 85 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}
}
"""

#: Accepted by XLA's parser, refused by its verifier when converted (an add of f32[4] and f32[8]).
SHAPE_MISMATCH = """HloModule mismatch
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[8] parameter(1)
  ROOT c = f32[4] add(a, b)
}
"""
#: A slice whose result is not the size its bounds give: hloopt's own check lets it through, XLA refuses it.
BAD_SLICE = """HloModule bad_slice
ENTRY main {
  a = f32[4] parameter(0)
  ROOT s = f32[2] slice(a), slice={[0:3]}
}
"""


def test_a_worker_death_names_the_file_the_stage_and_what_ran(files: Path) -> None:
    crash = files / "crash.hlo"
    code, _, err = invoke(exec_command, crash)
    assert code == 2
    assert err == f"hloopt: error: {crash}: XLA compile failed: worker died with SIGSEGV while compiling crashes_xla\n"
    code, _, err = invoke(compare_command, files / "a.hlo", crash)
    assert code == 2 and f"{files / 'a.hlo'} against {crash}: XLA compile failed: worker died with SIGSEGV" in err
    with pytest.raises(XlaCrash) as caught:
        rows = np.ones((4_000_000, 1), np.float32)
        isolated_call(bridge.execute, OUT_OF_BOUNDS_SOLVE, [np.ones((1, 1), np.float32), rows], label="trsm.hlo")
    assert str(caught.value) == (
        "trsm.hlo: XLA execute failed: worker died with SIGSEGV while running trsm, "
        "whose custom calls are: %cb (lapack_strsm_ffi)"
    )


def test_a_host_callback_is_refused_by_name_before_xla_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "callback.hlo"
    path.write_text(HOST_CALLBACK)
    code, _, err = invoke(exec_command, path)
    assert code == 2
    assert err.startswith(
        f"hloopt: error: {path}: %cb (custom-call) in %main calls xla_ffi_python_cpu_callback, a jax host callback"
    )


def test_the_python_api_never_crashes_its_caller_nor_writes_to_its_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    """XLA runs in a worker: its death is an XlaCrash here, and its stderr (glog, stack dumps) stays there."""
    with pytest.raises(XlaCrash, match="module: XLA compile failed: worker died with SIGSEGV"):
        hloopt.execute(CRASHES_XLA)
    with pytest.raises(XlaCrash, match="A against B: XLA compile failed: worker died with SIGSEGV"):
        hloopt.compare(CRASHES_XLA, CRASHES_XLA)
    assert capfd.readouterr() == ("", "")


def test_xla_refusals_are_one_line_on_the_instruction(tmp_path: Path) -> None:
    """XLA's MLIR diagnostic (the operation in generic form, the bytecode version) comes down to its error lines,
    placed on the instruction it names; a module converted from a .pb has no such line, so it is named only."""
    path = tmp_path / "slice.hlo"
    path.write_text(BAD_SLICE)
    head = f"hloopt: error: {path}:4:3: XLA convert failed: %s: 'stablehlo.slice' op "
    for said in (invoke(exec_command, path)[2], invoke(compare_command, path, path)[2]):
        first, line, caret, end = said.split("\n")
        assert first.startswith(head) and "MLIR" not in said and "note:" not in said
        assert (line, caret, end) == ("    ROOT s = f32[2] slice(a), slice={[0:3]}", "    ^", "")
    proto = tmp_path / "slice.pb"
    proto.write_bytes(bridge._parse(BAD_SLICE).as_serialized_hlo_module_proto())
    said = invoke(exec_command, proto)[2]
    assert said.startswith(f"hloopt: error: {proto}: XLA convert failed: %s: 'stablehlo.slice' op ")
    assert said.count("\n") == 1


@pytest.mark.slow
def test_what_hloopt_knows_xla_will_refuse_is_refused_before_xla_on_its_line(tmp_path: Path) -> None:
    """`check_executable` in words of its own, the same through exec and compare; for a .pb, named only,
    A's refusal first."""
    path = tmp_path / "mismatch.hlo"
    path.write_text(SHAPE_MISMATCH)
    message = (
        "%c in %main: operand 1 (%b) is f32[8], but add takes operands of its result's dimensions, f32[4] "
        "(HLO has no implicit broadcast); XLA would refuse to run the module"
    )
    expected = f"hloopt: error: {path}:5:3: {message}\n    ROOT c = f32[4] add(a, b)\n    ^\n"
    assert invoke(exec_command, path)[2] == expected
    assert invoke(compare_command, path, path)[2] == expected
    proto = tmp_path / "mismatch.pb"
    proto.write_bytes(bridge._parse(SHAPE_MISMATCH).as_serialized_hlo_module_proto())
    named = f"hloopt: error: {proto}: {message}\n"
    assert invoke(exec_command, proto)[2] == named
    # A .pb's text is XLA's print, not the file's: no LINE:COL of it, whichever side it is on.
    assert invoke(compare_command, proto, proto)[2] == named
    assert invoke(compare_command, proto, path)[2] == named
    assert invoke(compare_command, path, proto)[2] == expected


def test_max_bytes_says_sizes_in_a_unit_that_shows_them(files: Path) -> None:
    """bf16[3], f8e4m3fn[2,2] and s32[2] in and out: 18 bytes each way."""
    code, _, err = invoke(exec_command, files / "a.hlo", "--max-bytes", "10")
    assert code == 2
    assert err == f"hloopt: error: {files / 'a.hlo'}: inputs and outputs need 36 bytes, over the limit of 10 bytes\n"


def test_help_says_modules_may_be_pb_and_mlir() -> None:
    for command, usage in ((exec_command, "[OPTIONS] MODULE\n"), (compare_command, "[OPTIONS] A [B]\n")):
        out = CliRunner().invoke(command, ["--help"]).stdout
        assert usage in out and ".hlo" not in out
        assert "(.pb)" in out and ".mlir" in out
