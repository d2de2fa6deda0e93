"""The pass framework's promises: the "add a pass" recipe of docs/architecture.md works as written, a
pass's name is written once (its registry row) and every row holds to its class, ``expand`` may skip,
a pass that fails on a bug is named with the passes before it and the instruction, and every rewrite
records its provenance."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from cli_invoke import invoke
from hlo_text import hlo
from pass_testing import Case, golden_inputs, run_passes

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.cast_engine import Numerics
from hloopt.errors import HloError
from hloopt.ir.async_form import printed_as_sugar, written_as
from hloopt.ir.builder import Builder
from hloopt.ir.module import Instruction, Module
from hloopt.passes.base import HloPass, Matching, OpExpanderPass, PassError, PassResult, known_shape, provenance_of
from hloopt.passes.cpu_runnable import CpuRunnable
from hloopt.passes.pipeline import run_pipeline
from hloopt.passes.registry import REGISTRY, PassInfo, lookup, row_of
from hloopt.passes.simplify_converts import SimplifyConverts
from hloopt.text.parser import parse

SUBTRACTS = hlo("""
    HloModule subtracts

    ENTRY main {
      a = f32[2]{0} parameter(0)
      b = f32[2]{0} parameter(1)
      k = f32[2]{0} constant({1, 2})
      d = f32[2]{0} subtract(a, b), metadata={op_name="d"}
      ROOT e = f32[2]{0} subtract(d, k), metadata={op_name="e"}
    }
""")


# --- the recipe, step by step --------------------------------------------------------------------


@dataclass(frozen=True)
class SubtractAsAdd(OpExpanderPass):
    """Step 1 and 2: one frozen dataclass, its option a field; a per-instruction rewrite."""

    name = "subtract-as-add"
    numerics: Numerics = "xla"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == "subtract"

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        a, b = instruction.operands
        if b.opcode == "constant":  # left as it is: None, before anything is made
            return None
        shape = shapes(instruction)
        assert shape is not None
        return builder.add("add", shape, [a, builder.add("negate", shape, [b])])


@dataclass(frozen=True)
class StripMetadata(HloPass):
    """Step 3: anything else is an `HloPass` with only `run_on_module`."""

    name = "strip-metadata"

    def run_on_module(self, module: Module) -> PassResult:
        stripped = [i for i in module.instructions() if "metadata" in i.attributes]
        for instruction in stripped:
            instruction.set_attributes({k: v for k, v in instruction.attributes.items() if k != "metadata"})
        provenance = tuple(pair for i in stripped for pair in provenance_of(i, [i]))
        return PassResult(bool(stripped), len(stripped), provenance=provenance)


def test_the_recipe_runs_as_written(tmp_path: Path) -> None:
    """Step 6: pass objects beside a spec, with the verifier, the strict changed-flag check and dumps."""
    module = parse(SUBTRACTS)
    report = run_pipeline(module, [SubtractAsAdd(), StripMetadata(), "all"], dump_dir=tmp_path, check_changed="both")
    assert [(p.name, p.changed, p.rewritten) for p in report.passes[:2]] == [
        ("subtract-as-add", True, 1),
        ("strip-metadata", True, 2),
    ]
    assert module.to_text() == hlo("""
        HloModule subtracts, entry_computation_layout={(f32[2]{0}, f32[2]{0})->f32[2]{0}}

        ENTRY %main (a: f32[2], b: f32[2]) -> f32[2] {
          %a = f32[2]{0} parameter(0)
          %b = f32[2]{0} parameter(1)
          %negate = f32[2]{0} negate(%b)
          %add = f32[2]{0} add(%a, %negate)
          %k = f32[2]{0} constant({1, 2})
          ROOT %e = f32[2]{0} subtract(%add, %k)
        }

    """)
    assert (tmp_path / "01-after-subtract-as-add.hlo").exists()


def test_an_expander_records_what_it_made_from_what() -> None:
    """Every instruction `expand` made and its replacement point back at the instruction replaced;
    the subtract it skipped is left unchanged and is in no pair."""
    result = SubtractAsAdd().run(parse(SUBTRACTS))
    assert result == PassResult(True, 1, (), (("negate", "d"), ("add", "d")))


def test_a_module_pass_needs_only_run_on_module() -> None:
    result = StripMetadata().run(parse(SUBTRACTS))
    assert result.provenance == (("d", "d"), ("e", "e"))
    assert not isinstance(StripMetadata(), Matching)  # `matches` is for passes that want the gate tested


def test_an_expander_that_skips_everything_changes_nothing() -> None:
    text = SUBTRACTS.replace("subtract(a, b)", "subtract(a, k)")
    module = parse(text)
    before = module.to_text()
    report = run_pipeline(module, [SubtractAsAdd()], check_changed="both")
    assert [(p.changed, p.rewritten) for p in report.passes] == [(False, 0)]
    assert module.to_text() == before


@dataclass(frozen=True)
class _MakesThenSkips(OpExpanderPass):
    name = "makes-then-skips"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return instruction.opcode == "subtract"

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        (a, _) = instruction.operands
        builder.add("negate", known_shape(shapes, a), [a])
        return None


def test_skipping_after_making_instructions_is_an_error() -> None:
    with pytest.raises(PassError, match=r"in pass makes-then-skips: %d \(subtract\) in %main: ValueError: expand made"):
        run_pipeline(parse(SUBTRACTS), [_MakesThenSkips()])


# --- a pass that fails on a bug ------------------------------------------------------------------


@dataclass(frozen=True)
class _Broken(OpExpanderPass):
    name = "broken"
    #: Where it fails: "gate" (instruction_matches) or "expand".
    at: str = "expand"

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        if self.at == "gate" and instruction.opcode == "constant":
            raise KeyError("layout")
        return instruction.opcode == "subtract"

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction | None:
        raise KeyError("missing")


@dataclass(frozen=True)
class _BrokenModulePass(HloPass):
    name = "broken-module-pass"

    def run_on_module(self, module: Module) -> PassResult:
        return PassResult(bool(module.attributes["no-such-attribute"]))


@pytest.mark.parametrize(
    ("failing", "message"),
    [
        (_Broken(), "in pass broken (after batchnorm-training-upcast, simplify-converts): %d (subtract) in %main: "
         "KeyError: 'missing'"),
        (_Broken(at="gate"), "in pass broken (after batchnorm-training-upcast, simplify-converts): %k (constant) in "
         "%main: KeyError: 'layout'"),
        (_BrokenModulePass(), "in pass broken-module-pass (after batchnorm-training-upcast, simplify-converts): "
         "KeyError: 'no-such-attribute'"),
    ],
)  # fmt: skip
def test_a_failing_pass_is_named_with_the_passes_before_it(failing: HloPass, message: str) -> None:
    with pytest.raises(PassError) as caught:
        run_pipeline(parse(SUBTRACTS), ["batchnorm-training-upcast", "simplify-converts", failing])
    assert str(caught.value) == message
    assert isinstance(caught.value, HloError) and isinstance(caught.value.__cause__, KeyError)
    assert str(pickle.loads(pickle.dumps(caught.value))) == message  # crosses from a worker as itself


def test_a_pass_run_alone_is_named_without_a_list() -> None:
    with pytest.raises(PassError, match=r"^in pass broken: %d \(subtract\) in %main: KeyError: 'missing'$"):
        _Broken().run(parse(SUBTRACTS))


def test_a_pass_s_own_error_about_its_input_is_not_wrapped() -> None:
    """`HloError`s are the pass's words about the input: they reach the user as they are."""
    module = parse(
        hlo("""
        HloModule m

        ENTRY main {
          p = f32[4]{0} parameter(0)
          ROOT custom = f32[4]{0} custom-call(p), custom_call_target="__cublas$gemm"
        }
    """)
    )
    with pytest.raises(HloError) as caught:
        run_pipeline(module, [CpuRunnable()])
    assert str(caught.value).startswith("%custom (custom-call) in %main calls __cublas$gemm, which only a GPU")
    assert not isinstance(caught.value, PassError)


def test_the_cli_reports_a_failing_pass_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug injected into a registered pass: exit 2, naming it, at the statement it failed on, never a traceback."""

    def gate(self: SimplifyConverts, instruction: Instruction, shapes: ShapeResolver) -> bool:
        raise RuntimeError("injected")

    monkeypatch.setattr(SimplifyConverts, "instruction_matches", gate)
    source = tmp_path / "m.hlo"
    source.write_text(SUBTRACTS)
    result = invoke("run", source, "--passes", "all,simplify-converts")
    assert result.exit_code == 2
    assert result.stderr == (
        f"hloopt: error: {source}:4:3: in pass simplify-converts (after batchnorm-training-upcast, "
        "upcast-all-to-fp32, neuron-int-matmul-downcast): %a (parameter) in %main: RuntimeError: injected\n"
        "    a = f32[2]{0} parameter(0)\n"
        "    ^\n"
    )


# --- the changed-flag check is an argument; the CLI reads the environment ------------------------


@dataclass(frozen=True)
class _HidesItsChange(HloPass):
    name = "hides-its-change"

    def run_on_module(self, module: Module) -> PassResult:
        StripMetadata().run_on_module(module)
        return PassResult(False)


def test_the_library_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HLOOPT_CHECK_PASS_CHANGED", "both")
    run_pipeline(parse(SUBTRACTS), [_HidesItsChange()])  # off unless asked for
    with pytest.raises(HloError, match="hides-its-change reported no change but changed the module"):
        run_pipeline(parse(SUBTRACTS), [_HidesItsChange()], check_changed="silent")


@pytest.mark.parametrize(("value", "exit_code"), [("", 0), ("0", 0), ("1", 2), ("silent", 2), ("both", 2)])
def test_the_cli_reads_the_changed_check_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, exit_code: int
) -> None:
    """A registered pass made to hide its change: caught exactly when $HLOOPT_CHECK_PASS_CHANGED asks."""
    honest = SimplifyConverts.run_on_module
    monkeypatch.setattr(SimplifyConverts, "run_on_module", lambda self, m: replace(honest(self, m), changed=False))
    monkeypatch.setenv("HLOOPT_CHECK_PASS_CHANGED", value)
    source = tmp_path / "m.hlo"
    source.write_text(
        hlo("""
        HloModule m

        ENTRY main {
          p = f32[2]{0} parameter(0)
          ROOT c = f32[2]{0} convert(p)
        }
    """)
    )
    result = invoke("run", source, "--passes", "simplify-converts")
    assert result.exit_code == exit_code, result.output
    if exit_code:
        assert "pass simplify-converts reported no change but changed the module" in result.stderr


# --- the registry: a name written once, every row held to its class ------------------------------


@pytest.mark.parametrize("row", REGISTRY, ids=lambda row: row.name)
def test_every_row_holds_to_its_class(row: PassInfo) -> None:
    cls = row.pass_class()
    assert cls.__name__ == row.class_name and cls.__module__ == f"hloopt.passes.{row.module}"
    assert cls.name == row.name
    assert row_of(cls()) is row and lookup(row.name) is row and lookup(row.class_name) is row
    assert isinstance(cls(), Matching)  # every registered pass lets the tests check its gate is clear after it


def test_a_registered_pass_cannot_name_itself_otherwise() -> None:
    with pytest.raises(TypeError, match="SimplifyConverts is registered as 'simplify-converts'"):
        type("SimplifyConverts", (SimplifyConverts,), {"__module__": "hloopt.passes.simplify_converts", "name": "x"})


# --- provenance, for every pass on every golden case ---------------------------------------------


def _names(module: Module) -> set[str]:
    """The names the printed text holds (not those inside a computation printed as async sugar)."""
    return {i.name for c in module.computations if not printed_as_sugar(c) for i in c.instructions}


@pytest.mark.parametrize("case", golden_inputs(), ids=lambda case: f"{case.path.stem}: {case.rule[:50]}")
def test_every_rewrite_records_its_provenance(case: Case) -> None:
    """Each pair is (an instruction of the output, an instruction of the input); every instruction the pass
    added is in a pair; every instruction the gate matched is the source of one."""
    module = parse(case.text, str(case.path))
    hlo_pass = lookup(case.path.stem).create()
    before = _names(module)
    if isinstance(hlo_pass, OpExpanderPass):
        gate = hlo_pass.matches(module, ShapeResolver(module))
    else:  # upcast-all-to-fp32's gate also names the users of what it narrows, which it does not rewrite
        gate = hlo_pass.matches(module) if isinstance(hlo_pass, CpuRunnable) else []
    sugar = written_as(module)  # the gate in the input's names
    matched = {sugar.get(i.name, i.name) for i in gate}
    result = hlo_pass.run(module)
    after = _names(module)
    made = {new for new, _ in result.provenance}
    sources = {old for _, old in result.provenance}
    assert made <= after and sources <= before
    assert after - before <= made
    assert matched <= sources
    assert bool(result.provenance) <= result.changed
    run_passes(parse(case.text, str(case.path)), case.path.stem)  # and the same run through the pipeline is valid


def test_fold_constant_converts_keeps_every_round_s_provenance() -> None:
    module = parse(
        hlo("""
        HloModule m

        ENTRY main {
          c = f32[2]{0} constant({1000, 0.5})
          h = f16[2]{0} convert(c)
          ROOT b = bf16[2]{0} convert(h)
        }
    """)
    )
    result = lookup("fold-constant-converts").create().run(module)
    assert result.rewritten == 2
    assert [old for _, old in result.provenance] == ["h", "b"]


def test_upcast_records_retyped_widened_and_narrowed_instructions() -> None:
    module = parse(
        hlo("""
        HloModule m

        ENTRY main {
          p = bf16[2]{0} parameter(0)
          q = s16[2]{0} parameter(1)
          n = bf16[2]{0} negate(p)
          b = s16[2]{0} bitcast-convert(n)
          w = bf16[2]{0} bitcast-convert(q)
          a = bf16[2]{0} add(n, w)
          ROOT t = (s16[2]{0}, bf16[2]{0}) tuple(b, a)
        }
    """)
    )
    result = lookup("upcast-all-to-fp32").create().run(module)
    by_name = {i.name: i for i in module.instructions()}
    narrowed, widened = by_name["b"].operands[0], by_name["a"].operands[1]
    assert narrowed.opcode == widened.opcode == "convert"
    assert sorted(result.provenance) == sorted(
        [("p", "p"), ("n", "n"), ("a", "a"), ("t", "t"), (narrowed.name, "n"), (widened.name, "w")]
    )
