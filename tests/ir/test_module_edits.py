"""Graph edits in the IR: XLA's ReplaceInstruction, insertion, the two named orders, the edit count."""

from __future__ import annotations

import itertools

from hlo_text import hlo

from hloopt.ir.attribute_values import Metadata
from hloopt.ir.builder import Builder
from hloopt.ir.module import InstructionList
from hloopt.text.parser import parse

TEXT = """HloModule m

ENTRY main {
  p = f32[2]{0} parameter(0)
  q = f32[2]{0} parameter(1)
  c = f32[2]{0} constant({1, 2})
  a = f32[2]{0} add(p, c), sharding={replicated}, metadata={op_name="a"}
  n = f32[2]{0} negate(a), control-predecessors={q}
  ROOT r = f32[2]{0} multiply(n, q)
}
"""


def test_replace_instruction_carries_what_xla_carries() -> None:
    module = parse(TEXT)
    entry = module.entry
    a = next(i for i in entry.instructions if i.name == "a")
    n = next(i for i in entry.instructions if i.name == "n")
    new = Builder.before(n).add("subtract", n.shape, a.operands)  # type: ignore[arg-type]
    entry.replace_instruction(a, new)
    assert set(new.attributes) == {"sharding", "metadata"} and not new.written_order  # the printer orders them
    assert n.operands == [new] and "c" in [i.name for i in entry.instructions]
    copy = Builder.before(n).add("copy", n.shape, [new], {"metadata": '{op_name="mine"}'})  # type: ignore[arg-type]
    entry.replace_instruction(n, copy)
    assert copy.attributes["metadata"] == '{op_name="mine"}'  # its own metadata wins
    preds = copy.attributes["control-predecessors"]
    assert isinstance(preds, InstructionList) and [i.name for i in preds.instructions] == ["q"]


def test_replace_instruction_removes_operands_left_unused() -> None:
    module = parse(TEXT)
    entry = module.entry
    a = next(i for i in entry.instructions if i.name == "a")
    p = entry.parameters()[0]
    entry.replace_instruction(a, p)
    assert "c" not in [i.name for i in entry.instructions]  # the constant only fed `a`
    assert p.attributes["metadata"] == Metadata((("op_name", '"a"'),))


def test_edits_are_counted_and_print_order_is_xlas() -> None:
    module = parse(TEXT)
    entry = module.entry
    before = entry.edits
    root = entry.root
    assert root is not None
    Builder.after(entry.parameters()[0]).convert(entry.parameters()[0], root.shape)  # type: ignore[arg-type]
    assert entry.edits > before
    order = [i.name for i in entry.print_order()]
    assert order.index("q") < order.index("n")  # control predecessors first
    assert [i.name for i in entry.post_order()][-1] == "r"


CLONED = hlo("""
    HloModule m, input_output_alias={ {}: (0, {}, may-alias) }

    %cond (a: f32[]) -> pred[] {
      %a = f32[] parameter(0)
      %z = f32[] constant(0)
      ROOT %lt = pred[] compare(%a, %z), direction=LT
    }

    %body (b: f32[]) -> f32[] {
      %b = f32[] parameter(0)
      ROOT %n = f32[] negate(%b)
    }

    %one (c: f32[]) -> f32[] {
      ROOT %c = f32[] parameter(0)
    }

    ENTRY %e (x: f32[], i: s32[]) -> f32[] {
      %x = f32[] parameter(0)
      %i = s32[] parameter(1)
      %w = f32[] while(%x), condition=%cond, body=%body
      %s = f32[] sine(%x)
      ROOT %k = f32[] conditional(%i, %w, %s), branch_computations={%one, %body}, control-predecessors={%s}
    }
""")


def test_clone_copies_every_computation_edge_and_attribute() -> None:
    module = parse(CLONED, "t")
    copy = module.clone()
    assert copy.to_text() == module.to_text()
    originals = set(module.instructions()) | set(module.computations)
    for instruction in copy.instructions():
        assert instruction not in originals
        assert instruction.parent in copy.computations
        assert not set(instruction.operands) & originals
        assert not set(instruction.called_computations()) & originals
        assert not set(instruction.control_predecessors()) & originals


def test_control_edges_given_after_a_rewrite_are_still_redirected() -> None:
    """The computation remembers it has no control edges (so rewrites skip scanning for them) only until
    an instruction gets some."""
    module = parse(TEXT.replace(", control-predecessors={q}", ""))
    entry = module.entry
    p, c, n, r = (next(i for i in entry.instructions if i.name == name) for name in ("p", "c", "n", "r"))
    a = n.operands[0]
    entry.replace_instruction(c, Builder.before(c).add("negate", c.shape, [p]))  # type: ignore[arg-type]
    assert not entry.has_control_edges()
    r.set_attributes({**r.attributes, "control-predecessors": InstructionList((a,))})
    replacement = Builder.before(a).add("subtract", a.shape, a.operands)  # type: ignore[arg-type]
    entry.replace_instruction(a, replacement)
    assert entry.has_control_edges() and r.control_predecessors() == (replacement,)


def test_pending_insertions_land_where_list_insertions_would() -> None:
    """Insertions are spliced in when the list is next read; every sequence of inserts before and after, on
    written and on inserted anchors, with removals, gives the order `list.insert` gives (the reference)."""
    steps = [(side, anchor) for side in ("before", "after") for anchor in (0, 1, "new")]
    for sequence in itertools.product(steps, repeat=3):
        module = parse(TEXT)
        entry = module.entry
        reference = list(entry.instructions)
        anchors = [reference[3], reference[4]]  # a, n
        for number, (side, anchor) in enumerate(sequence):
            target = anchors[-1] if anchor == "new" else anchors[anchor]  # type: ignore[index]
            made = Builder.before(target).add("copy", target.shape, [reference[0]])  # type: ignore[arg-type]
            entry.remove(made)  # made before the anchor: move it where this step puts it
            made.name = f"x{number}"
            index = reference.index(target) + (side == "after")
            reference.insert(index, made)
            (entry.insert_after if side == "after" else entry.insert_before)(target, made)
            made.append_operand(reference[0])
            anchors.append(made)
        assert [i.name for i in entry.instructions] == [i.name for i in reference], sequence
        entry.remove(anchors[-1])  # the last one made has no users
        assert anchors[-1] not in entry.instructions


def test_a_removed_instruction_can_be_put_back() -> None:
    module = parse(TEXT)
    entry = module.entry
    c = next(i for i in entry.instructions if i.name == "c")
    made = Builder.after(c).add("negate", c.shape, [c])  # type: ignore[arg-type]
    entry.remove(made)
    entry.append(made)
    assert [i.name for i in entry.instructions][-1] == made.name
    assert [i.name for i in entry.instructions].count(made.name) == 1
