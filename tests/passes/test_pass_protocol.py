"""The pass protocol: results are returned, options come from specs, pass objects run in the pipeline,
the changed-flag check catches a pass that lies, and a bad attribute map is a clear error."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hlo_text import hlo
from pass_testing import run_passes

from hloopt.cli.main import main
from hloopt.errors import HloError
from hloopt.ir.module import Instruction, Module
from hloopt.passes.base import HloPass, PassResult
from hloopt.passes.fold_constant_converts import FoldConstantConverts
from hloopt.passes.pipeline import ChangedCheck, run_pipeline
from hloopt.passes.registry import lookup, select
from hloopt.text.parser import parse

INT_DOT = hlo("""
    HloModule int_dot

    ENTRY main {
      a = s8[2,2]{1,0} parameter(0)
      ROOT d = s32[2,2]{1,0} dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }
""")
CHAIN = hlo("""
    HloModule chain

    ENTRY main {
      c = f32[2]{0} constant({1000, 0.5})
      ROOT h = f8e4m3fn[2]{0} convert(c)
    }
""")


def test_run_returns_the_result_and_keeps_no_state() -> None:
    hlo_pass = lookup("neuron-int-matmul-downcast").create()
    result = hlo_pass.run(parse(INT_DOT))
    assert (result.changed, result.rewritten, result.warnings) == (True, 1, ())
    assert hlo_pass.run(parse(INT_DOT)) == result
    assert not hasattr(hlo_pass, "last")


def test_options_in_the_spec() -> None:
    (selected,), _ = select("fold-constant-converts{numerics=neuron}")
    assert selected.create() == FoldConstantConverts(numerics="neuron")
    assert selected.create(numerics="xla") == FoldConstantConverts(numerics="neuron")  # the spec wins
    assert select("fold-constant-converts")[0][0].create(numerics="neuron") == FoldConstantConverts("neuron")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fold-constant-converts{numeric=neuron}", "has no option 'numeric'; its options: numerics"),
        ("fold-constant-converts{numerics=fast}", "must be one of xla, neuron, not 'fast'"),
        ("upcast-all-to-fp32{x=1}", "has no option 'x'; its options: none"),
        ("fold-constant-converts{numerics=neuron", "unclosed '{'"),
        ("fold-constant-converts{numerics}", "expected option=value"),
        ("all{x=1}", "'all' takes no options"),
        ("fold-constant-converts,fold-constant-converts{numerics=neuron}", "twice with different options"),
    ],
)
def test_bad_options_are_clear_errors(spec: str, message: str) -> None:
    with pytest.raises(HloError, match=message.replace("{", r"\{").replace("(", r"\(")):
        select(spec)


def test_numerics_reaches_the_spec_and_the_argument_alike() -> None:
    by_spec, by_argument = parse(CHAIN), parse(CHAIN)
    run_passes(by_spec, "fold-constant-converts{numerics=neuron}")
    run_passes(by_argument, "fold-constant-converts", numerics="neuron")
    assert by_spec.to_text() == by_argument.to_text()
    assert "constant({448, 0.5})" in by_spec.to_text()


@dataclass(frozen=True)
class _NegateRoot(HloPass):
    """A notebook pass: wraps the entry root in a negate."""

    name = "negate-root"
    report_change: bool = True

    def run_on_module(self, module: Module) -> PassResult:
        from hloopt.ir.builder import Builder

        root = module.entry.root
        assert root is not None and root.shape is not None
        negate = Builder.after(root).add("negate", root.shape, [root])
        module.entry.set_root(negate)
        return PassResult(self.report_change, 1)

    def matches(self, module: Module) -> list[Instruction]:
        return []


def test_pass_objects_run_in_the_pipeline_after_what_was_named_before_them(tmp_path: Path) -> None:
    module = parse(CHAIN)
    report = run_pipeline(module, ["fold-constant-converts", _NegateRoot()], dump_dir=tmp_path)
    assert [p.name for p in report.passes] == ["fold-constant-converts", "negate-root"]
    assert "ROOT %negate = f8e4m3fn[2]{0} negate(%constant)" in module.to_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00-input.hlo",
        "01-after-fold-constant-converts.hlo",
        "02-after-negate-root.hlo",
    ]
    first = run_pipeline(parse(CHAIN), [_NegateRoot(), "fold-constant-converts"], check_changed="both")
    assert [p.name for p in first.passes] == ["negate-root", "fold-constant-converts"]


@pytest.mark.parametrize("check_changed", ["off", "silent"])
def test_after_pass_sees_each_changing_pass_as_its_dump_does(tmp_path: Path, check_changed: ChangedCheck) -> None:
    """`after_pass` gets each changing pass's module text, the dump's bytes when dumping, and nothing for a
    pass that changed nothing (neuron-int-matmul-downcast finds no integer dot here)."""
    seen: list[tuple[str, str]] = []
    module = parse(CHAIN)
    passes = ["fold-constant-converts", "neuron-int-matmul-downcast", _NegateRoot()]
    report = run_pipeline(module, passes, check_changed=check_changed, after_pass=lambda *stage: seen.append(stage))
    assert [p.name for p in report.passes if not p.changed] == ["neuron-int-matmul-downcast"]
    assert [name for name, _ in seen] == [p.name for p in report.passes if p.changed] and len(seen) == 2
    assert seen[-1][1] == module.to_text() and seen[0][1] != seen[1][1]
    dumped: list[tuple[str, str]] = []
    run_pipeline(parse(CHAIN), passes, dump_dir=tmp_path, after_pass=lambda *stage: dumped.append(stage))
    assert dumped == seen
    assert [text for _, text in dumped] == [
        (tmp_path / f"{step:02d}-after-{name}.hlo").read_text() for step, (name, _) in enumerate(dumped, 1)
    ]


def test_the_changed_flag_check_fails_a_pass_that_hides_a_change() -> None:
    with pytest.raises(HloError, match="negate-root reported no change but changed the module"):
        run_passes(parse(CHAIN), [_NegateRoot(report_change=False)])
    # Off, as by default (the library reads no environment): nothing is printed to compare.
    run_pipeline(parse(CHAIN), [_NegateRoot(report_change=False)], check_changed="off")


def test_the_changed_flag_check_is_on_when_dumping(tmp_path: Path) -> None:
    with pytest.raises(HloError, match="reported no change"):
        run_pipeline(parse(CHAIN), [_NegateRoot(report_change=False)], dump_dir=tmp_path)


def test_unreadable_metadata_is_refused_at_parse_with_its_location(tmp_path: Path) -> None:
    """``metadata={oops}`` is XLA's parse error, so the passes never see it (it used to crash them)."""
    source = tmp_path / "oops.hlo"
    source.write_text(INT_DOT.replace("rhs_contracting_dims={0}", "rhs_contracting_dims={0}, metadata={oops}"))
    result = CliRunner().invoke(main, ["run", str(source), "--passes", "all"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"hloopt: error: {source}:5:" in result.output
    assert "error parsing attribute metadata: expects attribute name" in result.output


def test_unreadable_metadata_built_in_the_ir_is_a_clear_error() -> None:
    """The backstop: a map no parser checked (built in Python) is an HloError naming the dot, not a ValueError."""
    module = parse(INT_DOT)
    dot = module.entry.instructions[-1]
    dot.set_attributes({**dot.attributes, "metadata": "{oops}"})
    expected = "%d: cannot read its metadata or frontend attributes: expects '{key=value …}', got '{oops}'"
    with pytest.raises(HloError, match=re.escape(expected)):
        run_pipeline(module, "all", check_changed="both")
