"""The printer decides the layout from the IR's facts: what was read prints as written, what a pass
made or edited prints as XLA prints it."""

from __future__ import annotations

from itertools import permutations

from hlo_text import hlo

from hloopt.ir.builder import Builder
from hloopt.ir.module import AsyncSugar, AttributeValue, Instruction
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


# --- async sugar: read once into the explicit form, printed back as read -----------------------------

CHAINS = hlo("""
    HloModule m, entry_computation_layout={(s8[4,8]{1,0}, s8[8,2]{1,0}, f32[10]{0})->(s32[4,2]{1,0}, f32[10]{0})}

    ENTRY %main (a: s8[4,8], b: s8[8,2], p: f32[10]) -> (s32[4,2], f32[10]) {
      %a = s8[4,8]{1,0} parameter(0)
      %b = s8[8,2]{1,0} parameter(1)
      %p = f32[10]{0} parameter(2)
      %st = ((f32[10]{0}), f32[10]{0}, s32[]) custom-call-start(%p), metadata={op_name="x"}, custom_call_target="foo", async_execution_thread="t"
      %ds = ((s8[4,8]{1,0}, s8[8,2]{1,0}), s32[4,2]{1,0}, s32[]) dot-start(%a, %b), rhs_contracting_dims={0}, lhs_contracting_dims={1}, metadata={op_name="f/dot"}
      %du = ((s8[4,8]{1,0}, s8[8,2]{1,0}), s32[4,2]{1,0}, s32[]) dot-update(%ds)
      %dd = s32[4,2]{1,0} dot-done(%du)
      %d = f32[10]{0} custom-call-done(%st), async_execution_thread="t"
      ROOT %t = (s32[4,2]{1,0}, f32[10]{0}) tuple(%dd, %d)
    }

""")


def test_sugar_is_held_explicit_and_printed_as_read() -> None:
    module = parse(CHAINS)
    opcodes = [i.opcode for i in module.entry.instructions]
    assert opcodes[3:8] == ["async-start", "async-start", "async-update", "async-done", "async-done"]
    wrapped = {c.name: c for c in module.computations if c.sugar is not None}
    assert set(wrapped) == {"st.wrapped", "ds.wrapped"}
    root = wrapped["ds.wrapped"].root
    assert root is not None and root.opcode == "dot" and [p.name for p in root.operands] == ["ds.param", "ds.param.1"]
    assert root.attributes["metadata"] == module.entry.instructions[4].attributes["metadata"]  # XLA's inheritance
    assert wrapped["ds.wrapped"].sugar == AsyncSugar(
        "dot", ("rhs_contracting_dims", "lhs_contracting_dims", "metadata")
    )
    assert module.to_text() == CHAINS
    assert module.clone().to_text() == CHAINS


def test_an_explicit_start_prints_explicit() -> None:
    text = hlo("""
        HloModule m, entry_computation_layout={(f32[10]{0})->f32[10]{0}}

        %w (x: f32[10]) -> f32[10] {
          %x = f32[10]{0} parameter(0)
          ROOT %n = f32[10]{0} negate(%x)
        }

        ENTRY %main (p: f32[10]) -> f32[10] {
          %p = f32[10]{0} parameter(0)
          %s = ((f32[10]{0}), f32[10]{0}) async-start(%p), calls=%w
          ROOT %d = f32[10]{0} async-done(%s)
        }

    """)
    module = parse(text)
    assert all(c.sugar is None for c in module.computations)
    assert module.to_text() == text


def _start_line(module_text: str, name: str) -> str:
    return next(line.strip() for line in module_text.splitlines() if line.strip().startswith(f"%{name} = "))


def test_a_wrapped_op_replaced_by_the_same_op_keeps_the_order_read() -> None:
    module = parse(CHAINS)
    wrapped = next(c for c in module.computations if c.name == "st.wrapped")
    old = wrapped.root
    assert old is not None
    new = Instruction("other", "custom-call", old.shape, old.operands, {"custom_call_target": '"bar"'})
    wrapped.replace_instruction(old, new)
    text = module.to_text()
    line = 'custom-call-start(%p), metadata={op_name="x"}, custom_call_target="bar", async_execution_thread="t"'
    assert _start_line(text, "st").endswith(line)
    assert "st.wrapped" not in text and "other" not in text


def test_a_wrapped_op_replaced_by_another_prints_as_its_sugar_in_xlas_order() -> None:
    module = parse(CHAINS)
    wrapped = next(c for c in module.computations if c.name == "st.wrapped")
    old = wrapped.root
    assert old is not None
    wrapped.replace_instruction(old, Instruction("n", "negate", old.shape, old.operands))
    text = module.to_text()
    assert _start_line(text, "st").endswith('negate-start(%p), async_execution_thread="t", metadata={op_name="x"}')
    assert _start_line(text, "d").endswith('negate-done(%st), async_execution_thread="t"')
    assert "st.wrapped" not in text
