"""`analysis.tracing`: what stands for what, matching, and the modules that capture and recompute values."""

from __future__ import annotations

import pytest

from hloopt.analysis import tracing as graph
from hloopt.analysis import unrolling
from hloopt.errors import HloError
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse

TEXT = """HloModule m
ENTRY main {
  x = bf16[4] parameter(0)
  k = bf16[4] constant({1, 2, 3, 4})
  m = bf16[4] multiply(x, k)
  w = f32[4] convert(m)
  n = bf16[4] convert(w)
  ROOT t = (bf16[4], f32[4]) tuple(n, w)
}
"""


def test_the_member_no_other_uses_stands_for_the_group() -> None:
    module = parse(TEXT, "m")
    origin = {"m": "m", "w": "m", "n": "m", "x": "x"}
    chosen = graph.representatives(module, origin)
    assert chosen["m"].name == "n" and chosen["x"].name == "x"


def test_origins_keep_input_names_and_drop_what_came_from_nothing() -> None:
    module = parse(TEXT, "m")
    found = graph.origins(module, {"w": "m"}, ["x", "k", "m", "n"])
    assert found == {"x": "x", "k": "k", "m": "m", "w": "m", "n": "n"}  # t was not in the input


def test_matching_after_a_pass_follows_provenance() -> None:
    a = parse(TEXT, "a")
    b = parse(TEXT, "b")
    report = run_pipeline(b, "upcast-all-to-fp32")
    names = [i.name for i in a.entry.instructions]
    pairs = graph.matched(a, graph.origins(a, {}, names), b, graph.origins(b, report.provenance, names))
    assert [pair.a for pair in pairs] == [pair.b for pair in pairs] == ["x", "k", "m", "w", "n"]
    assert graph.outputs_of(a) == ["n", "w"]


def test_capture_outputs_the_named_values() -> None:
    captured = graph.capture(parse(TEXT, "m"), ["m", "x"])
    root = captured.entry.root
    assert root is not None and [o.name for o in root.operands] == ["m", "x"]
    assert captured.entry_layout is None  # the printer writes the new one


def test_recompute_feeds_the_named_operands_and_recomputes_the_rest() -> None:
    module, parameters = graph.recompute(parse(TEXT, "m"), ["n", "m"], {"x", "m", "w"})
    assert parameters == ["w", "x"]  # n reads w, given; m reads x, given, and its constant k is recomputed
    body = {i.name: i for i in module.entry.instructions}
    assert body["n"].operands[0].opcode == "parameter" and body["k"].opcode == "constant"
    assert graph.region_inputs(parse(TEXT, "m"), "m", {"x"}) == ["x"]
    assert graph.region_inputs(parse(TEXT, "m"), "m", set()) is None  # would need x's value


def test_widened_keeps_the_narrowing_converts() -> None:
    wide, back = graph.widened(parse(TEXT, "m"))
    text = wide.to_text()
    assert "bf16[4]{0} parameter" not in text and "f64[4]{0} multiply" in text
    (made, convert) = next(iter(back.items()))
    assert convert == "n"
    body = {i.name: i for i in wide.entry.instructions}
    assert body["n"].shape is not None and body["n"].shape.to_text(with_layout=False) == "bf16[4]"
    assert body[made].operands == [body["n"]] and str(body["w"].shape and body["w"].shape.to_text(False)) == "f64[4]"


def test_a_module_reading_float_bits_has_no_f64_twin() -> None:
    text = TEXT.replace("w = f32[4] convert(m)", "w = f32[4] convert(m)\n  b = s32[4] bitcast-convert(w)")
    with pytest.raises(HloError, match="reads float bits"):
        graph.widened(parse(text, "m"))


NESTED = """HloModule n
add {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT sum = f32[] add(l, r)
}
deep {
  d = f32[4] parameter(0)
  ROOT dn = f32[4] negate(d)
}
inner {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  s = f32[4] multiply(a, b)
  ROOT e = f32[4] call(s), to_apply=deep
}
twice {
  p = f32[4] parameter(0)
  ROOT q = f32[4] abs(p)
}
cond {
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(ci, ten), direction=LT
}
body {
  bp = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  bn = s32[] add(bi, one)
  bw = f32[4] exponential(bv)
  ROOT bt = (s32[], f32[4]) tuple(bn, bw)
}
ENTRY main {
  x = f32[4] parameter(0)
  k = f32[4] constant({1, 2, 3, 4})
  c = f32[4] call(x, k), to_apply=inner
  t1 = f32[4] call(c), to_apply=twice
  t2 = f32[4] call(t1), to_apply=twice
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, t2)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  wv = f32[4] get-tuple-element(w), index=1
  r = f32[] constant(0)
  ROOT red = f32[] reduce(wv, r), dimensions={0}, to_apply=add
}
"""


def test_inlined_takes_in_every_call_a_shared_one_per_call_site() -> None:
    """Calls whose computation only they call come in under their own names (nested calls too); a
    computation called twice comes in once per call site, its copies instances of that site; a while's body
    and condition and a reduce's computation stay."""
    module = parse(NESTED, "n")
    flat, instances = unrolling.inlined(module)
    names = [i.name for i in flat.entry.post_order()]
    assert names[:6] == ["x", "k", "s", "dn", "q.t1", "q.t2"] and not {"c", "e", "t1", "t2"} & set(names)
    assert {c.name for c in flat.computations} == {"add", "cond", "body", "main"}
    assert [i.opcode for i in flat.entry.instructions if i.opcode in ("call", "while")] == ["while"]
    assert sorted((i.template, i.site) for i in instances.values()) == [("q", "t1"), ("q", "t2")]
    origin = unrolling.entry_origins(flat, {n: n for n in ("q", "t1", "t2", "x")}, instances)
    assert sorted(o for o in origin.values() if "@" in o) == ["q@t1", "q@t2"]
    assert module.to_text() == parse(NESTED, "n").to_text()  # the input is left as it was
    parse(flat.to_text(), "n")  # and the copy reads back


@pytest.mark.parametrize(("runs", "cap"), [(0, 4), (3, 4), (4, 4), (10, 4), (5, 1)])
def test_a_loop_is_unrolled_as_it_ran_up_to_the_cap_then_the_last(runs: int, cap: int) -> None:
    """A loop that ran at most `cap` times becomes that many copies of its condition and body; beyond, the
    first cap - 1 and the last, the iterations between kept as a counted loop."""
    flat, _ = unrolling.inlined(parse(NESTED, "n"))
    assert unrolling.control_flow(flat) == (["w"], {})
    probe, counters = unrolling.counted(flat, ["w"])
    assert list(counters) == ["w"] and parse(probe.to_text(), "n")
    out, instances, loops, branches, kept = unrolling.unrolled(flat, {"w": runs}, {}, cap)
    traced = tuple(range(runs)) if runs <= cap else (*range(cap - 1), runs - 1)
    assert loops == [unrolling.Loop("w", runs, traced)] and not branches
    assert sorted({i.iteration or 0 for i in instances.values() if i.template == "bw"}) == list(traced)
    assert len(kept) == (runs > cap) and unrolling.control_flow(out, kept) == ([], {})
    parse(out.to_text(), "n")


def test_a_conditional_becomes_its_branch_taken() -> None:
    text = """HloModule c
left {
  a = f32[4] parameter(0)
  ROOT l = f32[4] negate(a)
}
right {
  b = f32[4] parameter(0)
  ROOT r = f32[4] exponential(b)
}
ENTRY main {
  p = pred[] parameter(0)
  x = f32[4] parameter(1)
  ROOT c = f32[4] conditional(p, x, x), true_computation=left, false_computation=right
}
"""
    flat = parse(text, "c")
    assert unrolling.control_flow(flat) == ([], {"c": "p"})
    assert unrolling.branch_taken(True, 2) == 0 and unrolling.branch_taken(False, 2) == 1
    assert [unrolling.branch_taken(i, 3) for i in (-1, 0, 2, 7)] == [2, 0, 2, 2]
    out, instances, _, branches, _ = unrolling.unrolled(flat, {}, {"c": 1}, 4)
    assert branches == [unrolling.Branch("c", 1, 2)]
    assert [i.template for i in instances.values()] == ["r"]
    assert {c.name for c in out.computations} == {"main"} and "p" in [i.name for i in out.entry.instructions]
