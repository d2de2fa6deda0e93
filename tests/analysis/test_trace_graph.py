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
