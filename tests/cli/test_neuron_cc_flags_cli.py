"""``--neuron-cc-flags`` and ``--neuron-compiler`` on run, exec, compare and dtypes: bad values exit 2 without a
traceback, unmodelled flags are named once, ``env`` is read only when asked, and the auto-cast runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hloopt.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DOT = """HloModule m, entry_computation_layout={(f32[2,3]{1,0}, f32[3,2]{1,0})->f32[2,2]{1,0}}

ENTRY %e (x: f32[2,3], y: f32[3,2]) -> f32[2,2] {
  %x = f32[2,3]{1,0} parameter(0)
  %y = f32[3,2]{1,0} parameter(1)
  ROOT %d = f32[2,2]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/layer_0/dot_general"}
}
"""


def invoke(*args: object, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    assert "Traceback" not in result.stderr
    return result


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "m.hlo"
    path.write_text(DOT)
    return path


@pytest.mark.parametrize("command", ["run", "exec", "dtypes"])
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ("--auto-cast=fast", "--auto-cast must be one of none, matmult, all, not 'fast'"),
        ("--auto-cast", "--auto-cast needs a value: one of none, matmult, all"),
        ("--auto-cast-type fp4", "--auto-cast-type must be one of bf16, fp16, tf32, fp8_e4m3, not 'fp4'"),
    ],
)
def test_a_malformed_value_is_exit_2_naming_the_flag_and_its_choices(
    module: Path, command: str, flags: str, message: str
) -> None:
    result = invoke(command, module, f"--neuron-cc-flags={flags}")
    assert result.exit_code == 2
    assert result.stderr == f"hloopt: error: --neuron-cc-flags: {message}\n"
    assert result.stdout == ""


def test_compare_refuses_a_malformed_value_too(module: Path) -> None:
    result = invoke("compare", module, module, "--neuron-cc-flags", "--auto-cast=fast")
    assert result.exit_code == 2 and "--auto-cast must be one of none, matmult, all" in result.stderr


def test_an_unknown_release_is_a_usage_error(module: Path) -> None:
    result = invoke("run", module, "--neuron-compiler", "2.25")
    assert result.exit_code == 2 and "'2.25' is not one of '2.26', '2.27'" in result.stderr


def test_unmodelled_flags_are_named_once_and_ignored(module: Path) -> None:
    result = invoke("run", module, "--neuron-cc-flags", "-O2 --target trn1 --auto-cast none -O2 --target=trn2")
    assert result.exit_code == 0
    assert result.stderr.count("not modelled, ignored: -O2, --target\n") == 1


def test_saturate_infinity_is_explained(module: Path) -> None:
    result = invoke("run", module, "--neuron-cc-flags", "--enable-saturate-infinity")
    assert result.exit_code == 0 and "hloopt: note: --neuron-cc-flags: --enable-saturate-infinity" in result.stderr


def _dot_types(text: str) -> str:
    """The element types the dot's operands were rounded to, from their definitions in `text`: each operand's
    own type or, for an f32 `convert` (the auto-cast widens its bf16 operands back for XLA's CPU), its source's."""
    operands = re.search(r" dot\(([^)]*)\)", text)
    assert operands is not None
    types = []
    for name in (name.strip() for name in operands.group(1).split(",")):
        found = re.search(rf"{re.escape(name)} = (\w+)\[[^\n]*? (\w+)\((%[\w.\-]+)", text)
        assert found is not None
        if found.group(2) == "convert" and found.group(1) == "f32":
            source = re.search(rf"{re.escape(found.group(3))} = (\w+)\[", text)
            assert source is not None
            types.append(source.group(1))
        else:
            types.append(found.group(1))
    return ",".join(types)


def test_run_applies_the_auto_cast(module: Path) -> None:
    plain = invoke("run", module)
    assert plain.exit_code == 0 and "bf16" not in plain.stdout
    cast = invoke("run", module, "--neuron-cc-flags", "--auto-cast matmult --auto-cast-type bf16")
    assert cast.exit_code == 0 and "bf16" in _dot_types(cast.stdout)
    assert "neuron-auto-cast: " in cast.stderr


@pytest.mark.parametrize(("compiler", "cast"), [("2.26", True), ("2.27", False)])
def test_the_release_alone_picks_its_defaults(module: Path, compiler: str, cast: bool) -> None:
    result = invoke("run", module, "--neuron-compiler", compiler)
    assert result.exit_code == 0 and ("bf16" in result.stdout) is cast


def test_a_flag_given_overrides_the_release_default(module: Path) -> None:
    result = invoke("run", module, "--neuron-compiler", "2.26", "--neuron-cc-flags", "--auto-cast=none")
    assert result.exit_code == 0 and "bf16" not in result.stdout


def test_env_reads_the_variable_only_when_asked(module: Path) -> None:
    env = {"NEURON_CC_FLAGS": "--auto-cast all --auto-cast-type fp16"}
    plain = invoke("run", module, env=env)
    assert plain.exit_code == 0 and plain.stdout == invoke("run", module).stdout  # a round trip, as ever
    asked = invoke("run", module, "--neuron-cc-flags", "env", env=env)
    assert asked.exit_code == 0 and _dot_types(asked.stdout) == "f16,f16"


def test_the_pre_commit_hooks_ignore_a_neuron_environment(tmp_path: Path) -> None:
    """Each hook's entry, run inside a Neuron environment, behaves exactly as outside it."""
    entries = re.findall(r"^  entry: hloopt (.+)$", (ROOT / ".pre-commit-hooks.yaml").read_text(), re.M)
    assert entries
    env = {"NEURON_CC_FLAGS": "--auto-cast all --auto-cast-type bf16 --enable-mixed-precision-accumulation"}
    for entry in entries:
        outcomes = []
        for environment in (None, env):
            path = tmp_path / "m.hlo"
            path.write_text(DOT.replace("%", ""))  # not canonical: the hooks report or rewrite it
            result = invoke(*entry.split(), path, env=environment)
            outcomes.append((result.exit_code, result.stdout, result.stderr, path.read_text()))
        assert outcomes[0] == outcomes[1], entry


def test_batch_report_records_the_flags(module: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "report.json"
    result = invoke("run", module.parent, "-o", out, "--report", report, "--neuron-cc-flags", "--auto-cast matmult")
    assert result.exit_code == 0, result.stderr
    assert json.loads(report.read_text())["options"]["neuron_cc_flags"] == "--auto-cast matmult"
    assert "bf16" in _dot_types((out / "m.hlo").read_text())


def test_exec_runs_the_auto_cast_copy(module: Path) -> None:
    plain = invoke("exec", module)
    cast = invoke("exec", module, "--neuron-cc-flags", "--auto-cast matmult --auto-cast-type fp8_e4m3")
    assert plain.exit_code == cast.exit_code == 0
    assert plain.stdout != cast.stdout  # fp8 operands move the outputs


def test_compare_xla_against_the_default_neuron_compile(module: Path) -> None:
    """The issue's own question: how far the pre-2.27 default compile is from XLA on this module."""
    result = invoke(
        "compare", module, module, "--neuron-cc-flags", "--auto-cast matmult", "--numerics", "xla,neuron", "--json"
    )
    assert result.exit_code in (0, 1), result.stderr
    report = json.loads(result.stdout)
    (output,) = report["outputs"]
    assert 0 < output["max_abs_err"] < 0.1  # bf16 operands: a few parts in 2^-8


def test_dtypes_lists_the_dot_before_and_after(module: Path) -> None:
    result = invoke("dtypes", module, "--neuron-cc-flags", "--auto-cast matmult", "--json")
    assert result.exit_code == 0, result.stderr
    table = json.loads(result.stdout)
    assert table["dots_and_convolutions"] == {"listed": 1, "total": 1}
    (scope,) = table["scopes"]
    assert scope["scope"] == "jit(f)/layer_0"
    (row,) = scope["rows"]
    assert (row["before"], row["after"], row["skipped"]) == ("f32,f32 -> f32", "bf16,bf16 -> f32", None)
    text = invoke("dtypes", module)
    assert text.exit_code == 0 and "skipped: not-covered" in text.stdout  # 2.27: no auto-cast
