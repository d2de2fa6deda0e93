"""`Converts`: the converts a retyping makes without a `Builder` go where a builder would put them, with the
names it would give them, and each is paired with the instruction it was made for."""

from __future__ import annotations

from hloopt.ir.builder import Builder
from hloopt.ir.shape import ArrayShape, TupleShape
from hloopt.passes.retyping import Converts, convert_chain
from hloopt.text.parser import parse

TEXT = """HloModule m

ENTRY e {
  p = f32[2]{0} parameter(0)
  convert.4 = f32[2]{0} negate(p)
  t = (f32[2]{0}, f32[2]{0}) tuple(p, convert.4)
  ROOT r = f32[2]{0} add(p, convert.4)
}
"""
F32 = ArrayShape("f32", (2,))
BF16 = ArrayShape("bf16", (2,))


def _made(with_builder: bool) -> tuple[list[str], list[str]]:
    """Names in text order after the same edits, through builders or through `Converts`; and the new names."""
    module = parse(TEXT, "m.hlo")
    p, negate, t, r = module.entry.instructions
    pair = TupleShape((F32, F32))
    narrow = TupleShape((BF16, BF16))
    if with_builder:
        made = [
            convert_chain(Builder.after(p), p, F32, BF16),
            convert_chain(Builder.before(r), negate, F32, BF16),
            convert_chain(Builder.after(p), p, F32, BF16),
            convert_chain(Builder.after(t), t, pair, narrow),
        ]
    else:
        converts = Converts(module)
        made = [
            converts.chain(p, F32, BF16, r)[-1],
            converts.chain(negate, F32, BF16, r, before=r)[-1],
            converts.after(p, BF16, negate),
            converts.chain(t, pair, narrow, t)[-1],
        ]
        assert converts.provenance == [
            ("convert.5", "r"),
            ("convert.6", "r"),
            ("convert.7", "convert.4"),
            ("get-tuple-element", "t"),
            ("convert.8", "t"),
            ("get-tuple-element.1", "t"),
            ("convert.9", "t"),
            ("tuple", "t"),
        ]
    return [i.name for i in module.entry.instructions], [i.name for i in made]


def test_converts_go_where_a_builder_puts_them_with_its_names() -> None:
    assert _made(with_builder=False) == _made(with_builder=True)
    order, made = _made(with_builder=False)
    assert made == ["convert.5", "convert.6", "convert.7", "tuple"]
    assert order.index("convert.7") < order.index("convert.5") < order.index("convert.4")  # latest right after p
    assert order.index("convert.6") == order.index("r") - 1
