"""`analysis.tracing`: what stands for what, matching, and the modules that capture and recompute values."""

from __future__ import annotations

import pytest

from hloopt.analysis import tracing as graph
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
    assert found == {"x": "x", "k": "k", "m": "m", "w": "m", "n": "n"}  # the tuple is not traced


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


def test_inlined_takes_in_calls_called_once_nested_too_and_nothing_else() -> None:
    """Calls whose computation only they call come into the entry (and calls inside those); a
    computation called twice, a while's body and condition, and a reduce's computation stay."""
    module = parse(NESTED, "n")
    flat = graph.inlined(module)
    names = [i.name for i in flat.entry.post_order()]
    assert names[:5] == ["x", "k", "s", "dn", "t1"] and "c" not in names and "e" not in names
    assert {c.name for c in flat.computations} == {"add", "twice", "cond", "body", "main"}
    assert [i.opcode for i in flat.entry.instructions if i.opcode in ("call", "while")] == ["call", "call", "while"]
    assert module.to_text() == parse(NESTED, "n").to_text()  # the input is left as it was
    parse(flat.to_text(), "n")  # and the copy reads back
