"""Async-wrapped ops are seen by the passes in both spellings, and sugar nobody touched prints as it was."""

from __future__ import annotations

import pytest
from hlo_text import hlo
from pass_testing import run_passes, still_matching

from hloopt.passes.registry import lookup
from hloopt.text.parser import parse

SUGAR_DOT = hlo("""
    HloModule m

    ENTRY main {
      a = s8[4,8]{1,0} parameter(0)
      b = s8[8,2]{1,0} parameter(1)
      ds = ((s8[4,8]{1,0}, s8[8,2]{1,0}), s32[4,2]{1,0}, s32[]) dot-start(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="f/dot"}
      du = ((s8[4,8]{1,0}, s8[8,2]{1,0}), s32[4,2]{1,0}, s32[]) dot-update(ds)
      ROOT dd = s32[4,2]{1,0} dot-done(du)
    }
""")

UNTOUCHED = hlo("""
    HloModule m

    ENTRY main {
      p = f32[10]{0} parameter(0)
      st = ((f32[10]{0}), f32[10]{0}, s32[]) custom-call-start(p), custom_call_target="foo", metadata={op_name="x"}, async_execution_thread="t"
      ROOT d = f32[10]{0} custom-call-done(st), async_execution_thread="t"
    }
""")


def test_matches_sees_the_wrapped_dot_and_leaves_the_module_alone() -> None:
    module = parse(SUGAR_DOT, "t")
    before = module.to_text()
    assert len(still_matching(lookup("neuron-int-matmul-downcast").create(), module)) == 1
    assert module.to_text() == before


def test_sugar_with_update_becomes_call_start_chain() -> None:
    module = parse(SUGAR_DOT, "t")
    report = run_passes(module, "neuron-int-matmul-downcast")
    assert report.changed
    text = module.to_text()
    assert "call-start(%a, %b), to_apply=" in text and "call-update(%ds)" in text and "call-done(%du)" in text
    # the wrapped dot had the start's metadata, so the new instructions extend it
    assert 'op_name="f/dot Downcast for int support "' in text
    assert not still_matching(lookup("neuron-int-matmul-downcast").create(), parse(text, "t"))


@pytest.mark.parametrize("passes", ["all", "upcast-all-to-fp32", "neuron-int-matmul-downcast"])
def test_untouched_sugar_prints_byte_identical(passes: str) -> None:
    module = parse(UNTOUCHED, "t")
    before = module.to_text()
    run_passes(module, passes)
    assert module.to_text() == before


def test_upcast_keeps_a_custom_call_start_abi() -> None:
    module = parse(UNTOUCHED.replace("f32[10]", "f16[10]"), "t")
    run_passes(module, "upcast-all-to-fp32")
    text = module.to_text()
    assert "f16[10]{0} custom-call(" in text  # the kernel still gets and gives F16
    assert "call-start(%p)" in text and "f16" not in text.split("ENTRY")[1]


def test_a_computation_around_untouched_sugar_prints_as_read() -> None:
    """Taking sugar apart and putting it back is a respelling, not an edit: the entry, not in post order
    (`q` before the chain), keeps its order after a pass that changed nothing."""
    text = hlo("""
        HloModule m

        ENTRY main {
          p = f32[10]{0} parameter(0)
          q = f32[10]{0} parameter(1)
          st = ((f32[10]{0}), f32[10]{0}, s32[]) custom-call-start(p), custom_call_target="foo"
          d = f32[10]{0} custom-call-done(st)
          ROOT r = f32[10]{0} add(d, q)
        }
    """)
    module = parse(text, "t")
    before = module.to_text()
    report = run_passes(module, "neuron-int-matmul-downcast")
    assert not report.changed and module.entry.edits == 0
    assert module.to_text() == before


def test_provenance_names_sugar_as_written() -> None:
    module = parse(SUGAR_DOT, "t")
    result = lookup("neuron-int-matmul-downcast").create().run(module)
    names = {i.name for i in module.instructions()}
    assert result.provenance and all(old == "ds" for _, old in result.provenance)
    assert all(new in names for new, _ in result.provenance)


def test_names_in_an_expanded_computation_do_not_depend_on_the_passes_before() -> None:
    """The sugar is taken apart once, when the text is read: a pass run earlier does not rename what a
    later one expands (`ds.param`, not `ds.param.1`)."""
    alone, after_others = parse(SUGAR_DOT, "t"), parse(SUGAR_DOT, "t")
    run_passes(alone, "neuron-int-matmul-downcast")
    run_passes(after_others, "simplify-converts,upcast-all-to-fp32,neuron-int-matmul-downcast")
    assert alone.to_text() == after_others.to_text()
    assert "%ds.param = s8[4,8]{1,0} parameter(0)" in alone.to_text()


SEVERAL = hlo("""
    HloModule m

    ENTRY main {
      a = s8[4,8]{1,0} parameter(0)
      b = s8[8,2]{1,0} parameter(1)
      p = f32[10]{0} parameter(2)
      st = ((f32[10]{0}), f32[10]{0}, s32[]) custom-call-start(p), metadata={op_name="x"}, custom_call_target="foo"
      ds = ((s8[4,8]{1,0}, s8[8,2]{1,0}), s32[4,2]{1,0}, s32[]) dot-start(a, b), rhs_contracting_dims={0}, lhs_contracting_dims={1}
      dd = s32[4,2]{1,0} dot-done(ds)
      d = f32[10]{0} custom-call-done(st)
      ROOT t = (s32[4,2]{1,0}, f32[10]{0}) tuple(dd, d)
    }
""")


def test_several_chains_one_expanded_one_untouched() -> None:
    module = parse(SEVERAL, "t")
    before = module.to_text()
    result = lookup("neuron-int-matmul-downcast").create().run(module)
    text = module.to_text()
    untouched = next(line for line in before.splitlines() if "custom-call-start" in line)
    assert untouched in text and "custom-call-done(%st)" in text  # as read, attribute order included
    assert "call-start(%a, %b), to_apply=%ds.wrapped" in text and "call-done(%ds)" in text
    assert "st.wrapped" not in text and "ds.wrapped.async" not in text  # the call's own computation is sugar
    assert result.provenance and {old for _, old in result.provenance} == {"ds"}
    # each new instruction printed inside the expanded computation stands for the sugared start
    assert {new for new, _ in result.provenance} >= {"ds.param", "ds.param.1", "convert", "dot"}
    assert module.to_text() == parse(text, "t").to_text()  # and what it printed reads back the same


@pytest.mark.parametrize(
    "sugar",
    [
        "s = ((f32[3,2]{1,0}, f32[3,2]{1,0}), f32[3,2]{1,0}, u32[]) parameter-start(p0, p1)\n"
        "  ROOT d = f32[3,2]{1,0} parameter-done(s)",
        "s = ((f32[3,2]{1,0}, f32[3,2]{1,0}), f32[3,2]{1,0}, u32[]) constant-start(p0, p1)\n"
        "  ROOT d = f32[3,2]{1,0} constant-done(s)",
    ],
    ids=["parameter", "constant"],
)
def test_sugar_of_an_op_the_ir_holds_by_a_field_stays_as_written(sugar: str) -> None:
    """XLA prints a wrapped parameter (a verifier test's module) as ``parameter-start`` over the start's
    operands; no IR instruction stands for that, so the chain is kept as read, through the passes too."""
    text = hlo(f"""
        HloModule m

        ENTRY e {{
          p0 = f32[3,2]{{1,0}} parameter(0)
          p1 = f32[3,2]{{1,0}} parameter(1)
          {sugar}
        }}
    """)
    module = parse(text, "t")
    printed = module.to_text()
    assert [c.name for c in module.computations] == ["e"] and "-start(%p0, %p1)" in printed
    run_passes(module, "all")
    assert module.to_text() == printed == parse(printed, "t").to_text()
