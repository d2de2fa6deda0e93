"""The printer decides the layout from the IR's facts: what was read prints as written, what a pass
made or edited prints as XLA prints it."""

from __future__ import annotations

from itertools import permutations

from hlo_text import hlo

from hloopt.ir.builder import Builder
from hloopt.ir.module import AttributeValue, Instruction
from hloopt.text.parser import parse
from hloopt.text.printer import print_instruction, xla_attribute_order

GENERIC = ("sharding", "frontend_attributes", "control-predecessors", "metadata", "origin", "backend_config")

WRITTEN = hlo("""
    HloModule m

    ENTRY %main (a: s32[2,3], b: s32[3,4]) -> s32[2,4] {
      %a = s32[2,3]{1,0} parameter(0)
      %b = s32[3,4]{1,0} parameter(1)
      ROOT %d = s32[2,4]{1,0} dot(%a, %b), metadata={op_name="d"}, rhs_contracting_dims={0}, sharding={replicated}, lhs_contracting_dims={1}
    }
""")


def _line(instruction: Instruction) -> str:
    return print_instruction(instruction).split(")", 1)[1]


def test_a_parsed_instruction_prints_its_attributes_as_written() -> None:
    dot = parse(WRITTEN).entry.root
    assert dot is not None and dot.written_order
    assert _line(dot) == (
        ', metadata={op_name="d"}, rhs_contracting_dims={0}, sharding={replicated}, lhs_contracting_dims={1}'
    )


def test_a_made_instruction_prints_in_xlas_order() -> None:
    module = parse(WRITTEN)
    dot = module.entry.root
    assert dot is not None and dot.shape is not None
    made = Builder.before(dot).add("dot", dot.shape, dot.operands, dict(dot.attributes))
    assert not made.written_order
    assert _line(made) == (
        ', lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}, metadata={op_name="d"}'
    )


def test_a_replacement_prints_in_xlas_order_even_when_parsed() -> None:
    module = parse(WRITTEN)
    entry = module.entry
    dot = entry.root
    assert dot is not None and dot.shape is not None
    twin = Builder.before(dot).add("dot", dot.shape, dot.operands, dict(dot.attributes))
    twin.written_order = True  # as if it had been read: replacing with it makes its attributes XLA's
    entry.replace_instruction(dot, twin)
    assert not twin.written_order
    assert _line(twin).startswith(", lhs_contracting_dims={1}, rhs_contracting_dims={0}")


def test_xlas_order_for_every_order_of_the_generic_attributes() -> None:
    """Exhaustive over the generic attributes' orders, with an opcode's own attribute among them."""
    for order in permutations((*GENERIC, "dimensions")):
        attributes: dict[str, AttributeValue] = dict.fromkeys(order, "x")
        assert xla_attribute_order("broadcast", attributes) == ["dimensions", *GENERIC]


def test_xlas_order_of_a_dots_own_attributes() -> None:
    own = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims", "sparsity")
    for order in permutations((*own, "operand_precision", "algorithm")):
        attributes: dict[str, AttributeValue] = dict.fromkeys(order, "x")
        assert xla_attribute_order("dot", attributes) == [*own, "operand_precision", "algorithm"]


SCRAMBLED = """HloModule m{scheduled}

ENTRY %main (p: f32[2], q: f32[2]) -> f32[2] {{
  %c = f32[2]{{0}} constant({{1, 2}})
  %q = f32[2]{{0}} parameter(1)
  %p = f32[2]{{0}} parameter(0)
  %a = f32[2]{{0}} add(%p, %c)
  ROOT %r = f32[2]{{0}} multiply(%a, %q)
}}
"""


def _names(text: str) -> list[str]:
    return [line.removeprefix("  ROOT").split()[0].lstrip("%") for line in text.splitlines() if line.startswith("  ")]


def test_a_parsed_computation_prints_as_written_and_its_copy_too() -> None:
    module = parse(SCRAMBLED.format(scheduled=""))
    assert _names(module.to_text()) == ["c", "q", "p", "a", "r"]
    assert _names(module.clone().to_text()) == ["c", "q", "p", "a", "r"]


def test_an_edited_computation_prints_in_xlas_post_order() -> None:
    module = parse(SCRAMBLED.format(scheduled=""))
    root = module.entry.root
    assert root is not None and root.shape is not None
    Builder.before(root).add("negate", root.shape, [root.operands[0]])  # dead, but an edit
    assert [i.name for i in module.entry.instructions][:3] == ["c", "q", "p"]  # the IR does not sort
    assert _names(module.to_text()) == ["p", "c", "a", "negate", "q", "r"]
    assert _names(module.clone().to_text()) == ["p", "c", "a", "negate", "q", "r"]


def test_an_edited_scheduled_computation_keeps_its_schedule() -> None:
    module = parse(SCRAMBLED.format(scheduled=", is_scheduled=true"))
    root = module.entry.root
    assert root is not None and root.shape is not None
    Builder.before(root).add("negate", root.shape, [root.operands[0]])
    assert _names(module.to_text()) == ["c", "q", "p", "a", "negate", "r"]
