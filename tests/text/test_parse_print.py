"""Parser and printer: shapes, literals, graph references, canonical printing."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.errors import HloParseError
from hloopt.ir import ArrayShape, Computation, Instruction, TupleShape
from hloopt.ir.shape import BufferShape, Layout
from hloopt.text.printer import print_instruction

HANDWRITTEN = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(p, z), dimensions={1}, to_apply=add
}
"""

CANONICAL = """HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[2]{0}}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (p: f32[2,3]) -> f32[2] {
  %p = f32[2,3]{1,0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[2]{0} reduce(%p, %z), dimensions={1}, to_apply=%add
}

"""


def test_handwritten_module_prints_in_canonical_style() -> None:
    assert parse(HANDWRITTEN).to_text() == CANONICAL


def test_canonical_text_round_trips_byte_for_byte() -> None:
    assert parse(CANONICAL).to_text() == CANONICAL


def test_operands_and_callees_are_references() -> None:
    module = parse(HANDWRITTEN)
    entry = module.entry
    reduce = entry.root
    assert reduce is not None and reduce.opcode == "reduce"
    assert [op.name for op in reduce.operands] == ["p", "z"]
    assert reduce.operands[0] is entry.instructions[0]
    callee = reduce.attributes["to_apply"]
    assert isinstance(callee, Computation) and callee is module.computations[0]
    assert reduce in entry.instructions[0].users


@pytest.mark.parametrize(
    "text, expected",
    [
        ("f32[2,3]{1,0}", ArrayShape("f32", (2, 3), (False, False), Layout((1, 0)))),
        ("bf16[<=4,?]", ArrayShape("bf16", (4, -1), (True, True), Layout((1, 0)))),
        ("s4[8]{0:E(4)}", ArrayShape("s4", (8,), (False,), Layout((0,), element_size_in_bits=4))),
        (
            "f32[8,128]{1,0:T(8,128)S(1)}",
            ArrayShape("f32", (8, 128), (False, False), Layout((1, 0), tiles=((8, 128),), memory_space=1)),
        ),
        ("token[]", ArrayShape("token")),
        ("f32[]{:S(1)}", ArrayShape("f32", (), (), Layout((), memory_space=1))),
    ],
)
def test_array_shapes(text: str, expected: ArrayShape) -> None:
    source = hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT p = {text} parameter(0)
        }}
        """
    )
    module = parse(source)
    shape = module.entry.root.shape  # type: ignore[union-attr]
    assert shape == expected
    assert f"= {shape.to_text()} parameter(0)" in module.to_text()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "type_name",
    [
        "pred",
        "s2",
        "s4",
        "s8",
        "s16",
        "s32",
        "s64",
        "u2",
        "u4",
        "u8",
        "u16",
        "u32",
        "u64",
        "f16",
        "f32",
        "bf16",
        "f64",
        "f8e5m2",
        "f8e4m3",
        "f8e4m3fn",
        "f8e4m3b11fnuz",
        "f8e3m4",
        "f8e5m2fnuz",
        "f8e4m3fnuz",
        "f8e8m0fnu",
        "f4e2m1fn",
        "c64",
        "c128",
    ],
)
def test_every_primitive_type_parses(type_name: str) -> None:
    source = hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT p = {type_name}[3] parameter(0)
        }}
        """
    )
    module = parse(source)
    assert module.entry.root.shape == ArrayShape(type_name, (3,), (False,), Layout((0,)))  # type: ignore[union-attr]


def test_nested_tuple_and_buffer_shapes_print_with_index_comments() -> None:
    text = hlo(
        """
        HloModule m
        ENTRY e {
          ROOT p = (f32[1], f32[2], f32[3], f32[4], f32[5], (s32[], token[]), b(f32[2])) parameter(0)
        }
        """
    )
    shape = parse(text).entry.root.shape  # type: ignore[union-attr]
    assert isinstance(shape, TupleShape) and isinstance(shape.elements[6], BufferShape)
    assert shape.to_text() == (
        "(f32[1]{0}, f32[2]{0}, f32[3]{0}, f32[4]{0}, f32[5]{0}, /*index=5*/(s32[], token[]), b(f32[2]{0}))"
    )


@pytest.mark.parametrize(
    "type_name, literal, expected",
    [
        ("f32[3]", "{1, -inf, nan}", np.array([1, -np.inf, np.nan], np.float32)),
        ("bf16[2]", "{0.1001, 6.554e+04}", np.array([0.1, 65536], ml_dtypes.bfloat16)),
        ("f8e4m3fn[2]", "{448, -0.102}", np.array([448, -0.1], ml_dtypes.float8_e4m3fn)),
        ("pred[2,2]", "{ { 1, 0 }, { 0, 1 } }", np.array([[True, False], [False, True]])),
        ("s32[2,1]", "{ {1}, {-2} }", np.array([[1], [-2]], np.int32)),
        ("u64[1]", "{18446744073709551615}", np.array([2**64 - 1], np.uint64)),
        ("c64[2]", "{(1, 2), (3, -4)}", np.array([1 + 2j, 3 - 4j], np.complex64)),
    ],
)
def test_literals_decode_to_numpy(type_name: str, literal: str, expected: np.ndarray) -> None:
    source = hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT c = {type_name} constant({literal})
        }}
        """
    )
    module = parse(source)
    value = module.entry.root.literal.value  # type: ignore[union-attr]
    assert isinstance(value, np.ndarray)
    assert value.dtype == expected.dtype
    np.testing.assert_array_equal(value, expected)


def test_nan_payload_is_kept() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          ROOT c = f32[2] constant({-nan(0x7), nan})
        }
        """
    )
    module = parse(source)
    value = module.entry.root.literal.value  # type: ignore[union-attr]
    bits = value.view(np.uint32)  # type: ignore[union-attr]
    assert int(bits[0]) == 0xFF800007
    assert int(bits[1]) == 0x7FC00000


def test_tuple_literal_decodes_per_element() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          ROOT c = (s32[], f32[2]) constant((1, {2, 3}))
        }
        """
    )
    module = parse(source)
    value = module.entry.root.literal.value  # type: ignore[union-attr]
    assert isinstance(value, tuple) and isinstance(value[0], np.ndarray) and int(value[0]) == 1
    np.testing.assert_array_equal(value[1], np.array([2, 3], np.float32))


def test_large_constant_stays_text_until_asked() -> None:
    values = ", ".join(str(i % 7) for i in range(100_000))
    source = hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT c = s32[100000] constant({{{values}}})
        }}
        """
    )
    module = parse(source)
    literal = module.entry.root.literal  # type: ignore[union-attr]
    assert literal is not None and literal._value is None
    assert int(literal.value.sum()) == sum(i % 7 for i in range(100_000))  # type: ignore[union-attr]
    assert f"constant({{{values}}})" in module.to_text()


def test_elided_constant_is_kept_as_elided() -> None:
    text = hlo(
        """
        HloModule m
        ENTRY e {
          ROOT c = f32[100] constant({...})
        }
        """
    )
    module = parse(text)
    assert module.entry.root.literal.is_elided  # type: ignore[union-attr]
    assert "constant({...})" in module.to_text()


def test_nested_operands_become_anonymous_instructions() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          p = f32[2] parameter(0)
          ROOT a = f32[2] add(f32[2] negate(p), p)
        }
        """
    )
    module = parse(source)
    names = [i.name for i in module.entry.instructions]
    assert names == ["p", "negate.anon", "a"]
    assert module.entry.root.operands[0].opcode == "negate"  # type: ignore[union-attr]


def test_inline_computation_bodies_become_computations() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          p = f32[] parameter(0)
          ROOT c = f32[] call(p), to_apply={
            q = f32[] parameter(0)
            ROOT n = f32[] negate(q)
          }
        }
        """
    )
    module = parse(source)
    assert [c.name for c in module.computations] == ["_", "e"]
    assert module.entry.root.attributes["to_apply"] is module.computations[0]  # type: ignore[union-attr]
    assert "to_apply=%_" in module.to_text()


def test_unmodelled_attributes_keep_their_text() -> None:
    text = hlo(
        """
        HloModule m
        ENTRY e {
          p = f32[2] parameter(0), sharding={devices=[2]0,1}
          ROOT c = f32[2] custom-call(p), custom_call_target="foo", backend_config={"a": {"b": [1, 2]}}, frontend_attributes={k="v"}, metadata={op_type="x" op_name="y/z" source_file="f.py" source_line=3}
        }
        """
    )
    out = parse(text).to_text()
    assert 'backend_config={"a": {"b": [1, 2]}}' in out
    assert 'metadata={op_type="x" op_name="y/z" source_file="f.py" source_line=3}' in out
    assert "sharding={devices=[2]0,1}" in out


def test_control_predecessors_are_references_in_place() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          a = f32[] parameter(0)
          b = f32[] negate(a)
          ROOT c = f32[] abs(a), control-predecessors={b}, metadata={op_name="x"}
        }
        """
    )
    module = parse(source)
    root = module.entry.root
    assert root is not None and root.control_predecessors() == (module.entry.instructions[1],)
    assert print_instruction(root, True).endswith('abs(%a), control-predecessors={%b}, metadata={op_name="x"}')


def test_headerless_module_gets_xla_name() -> None:
    source = hlo(
        """
        ENTRY main {
          ROOT p = f32[] parameter(0)
        }
        """
    )
    module = parse(source)
    assert module.name == "module_main"


def test_comments_are_ignored() -> None:
    source = hlo(
        """
        HloModule m // trailing
        /* block */ ENTRY e {
          ROOT p = f32[] /* x */ parameter(0)
        }
        """
    )
    module = parse(source)
    assert module.entry.root.opcode == "parameter"  # type: ignore[union-attr]


def test_graph_edits_keep_text_valid() -> None:
    module = parse(HANDWRITTEN)
    entry = module.entry
    p = entry.instructions[0]
    name = module.unique_name("convert")
    convert = Instruction(name, "convert", ArrayShape("bf16", (2, 3), (False, False), Layout((1, 0))), [p])
    entry.insert_before(entry.instructions[1], convert)
    back = Instruction(module.unique_name("convert"), "convert", p.shape, [convert])
    entry.insert_before(entry.instructions[2], back)
    entry.replace_all_uses(p, back)
    back.replace_operand(back, back)  # no-op on a non-operand
    convert.replace_operand(back, p)  # the cycle created by replace_all_uses is undone
    text = module.to_text()
    assert "%convert = bf16[2,3]{1,0} convert(%p)" in text
    assert "%convert.1 = f32[2,3]{1,0} convert(%convert)" in text
    assert "reduce(%convert.1, %z)" in text
    assert entry.remove_dead_code() == 0
    entry.replace_all_uses(back, p)
    assert entry.remove_dead_code([back]) == 2
    assert module.to_text() == CANONICAL


def test_unique_names_avoid_every_existing_name() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          convert = f32[] parameter(0)
          ROOT convert.7 = f32[] negate(convert)
        }
        """
    )
    module = parse(source)
    assert module.unique_name("convert") == "convert.8"
    assert module.unique_name("convert") == "convert.9"
    assert module.unique_name("tuple") == "tuple"


def test_post_order_is_iterative_on_long_chains() -> None:
    lines = ["HloModule m", "ENTRY e {", "  v0 = f32[] parameter(0)"]
    lines += [f"  v{i} = f32[] negate(v{i - 1})" for i in range(1, 20_000)]
    lines.append("}")
    module = parse("\n".join(lines))
    order = module.entry.post_order()
    assert [i.name for i in order[:3]] == ["v0", "v1", "v2"] and len(order) == 20_000


def _depth_first(computation: Computation) -> list[str]:
    """The definition of `post_order`, spelled out: depth first from each instruction, root last."""
    order: list[str] = []
    seen: set[Instruction] = set()

    def visit(instruction: Instruction) -> None:
        if instruction in seen:
            return
        seen.add(instruction)
        for dependency in [*instruction.operands, *instruction.control_predecessors()]:
            visit(dependency)
        order.append(instruction.name)

    for instruction in [i for i in computation.instructions if i is not computation.root] + [computation.root]:
        visit(instruction)  # type: ignore[arg-type]
    return order


def test_post_order_when_text_order_is_not_an_order() -> None:
    """Passes append and insert instructions anywhere; the one-scan shortcut must give way to the search."""
    source = hlo(
        """
        HloModule m
        ENTRY e {
          a = f32[] parameter(0)
          ROOT r = f32[] add(a, a)
          b = f32[] negate(r)
          c = f32[] exponential(a), control-predecessors={b}
        }
        """
    )
    module = parse(source)
    computation = module.entry
    late = Instruction("late", "negate", ArrayShape("f32"))
    late.append_operand(computation.instructions[0])
    computation.instructions.insert(0, late)  # used before its operand is defined in the list
    late.parent = computation
    root = computation.root
    assert root is not None and root.name == "r"
    root.replace_operand(root.operands[0], late)  # r = add(late, late)
    expected = _depth_first(computation)
    assert expected == ["a", "late", "r", "b", "c"]
    assert [i.name for i in computation.post_order()] == expected


def test_post_order_follows_text_order_when_it_can() -> None:
    source = hlo(
        """
        HloModule m
        ENTRY e {
          a = f32[] parameter(0)
          b = f32[] negate(a)
          ROOT r = f32[] add(a, b), control-predecessors={b}
          d = f32[] negate(a)
        }
        """
    )
    module = parse(source)
    assert [i.name for i in module.entry.post_order()] == _depth_first(module.entry) == ["a", "b", "d", "r"]


def test_a_body_the_body_token_misreads_is_read_one_instruction_at_a_time() -> None:
    """`//` in a bare attribute value looks like a line comment to the BODY token, which then
    closes the body at the brace on the next line; the exact reading keeps the value whole."""
    text = hlo(
        """
        HloModule m
        ENTRY e {
          a = f32[] parameter(0), backend_config=a//b, metadata={op_name="x"
        }
          ROOT b = f32[] negate(a)
        }
        """
    )
    module = parse(text)
    a, b = module.entry.instructions
    assert a.attributes["backend_config"] == "a//b" and a.attributes["metadata"].to_text() == '{op_name="x"\n}'  # type: ignore[union-attr]
    assert b.operands == [a]


def _nested_parameter(depth: int) -> str:
    return hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT p = {"(" * depth}f32[]{")" * depth} parameter(0)
        }}
        """
    )


@pytest.mark.parametrize("depth", [15, 16])
def test_brackets_nested_past_the_body_token_are_read_one_instruction_at_a_time(depth: int) -> None:
    """The BODY token's own brace costs one of the 16 levels the grammar's regexes allow
    (15 parentheses and the brackets of `f32[]` are 16); one more is read from the masked copy
    (`splitting.masked`, tests/text/test_deep_nesting.py)."""
    module = parse(_nested_parameter(depth))
    assert module.entry.root.shape.to_text().count("(") == depth  # type: ignore[union-attr]


def _long_constant(literal: str, shape: str) -> str:
    return hlo(
        f"""
        HloModule m
        ENTRY e {{
          ROOT c = {shape} constant({literal})
        }}
        """
    )


def test_long_literal_lines_split_like_short_ones() -> None:
    """Lines over 64 KB take the str-method split of their argument list; it must agree with the regex."""
    rows = ", ".join("{" + ", ".join(["1.5"] * 100) + "}" for _ in range(200))
    module = parse(_long_constant("{" + rows + "}", "f32[200,100]"))
    assert module.entry.root.literal.value.shape == (200, 100)  # type: ignore[union-attr]
    flat = "{" + ", ".join(["-2.25"] * 20_000) + "}"
    assert parse(_long_constant(flat, "f32[20000]")).to_text().count("-2.25") == 20_000


def test_long_literal_lines_that_do_not_nest_are_refused_where_the_regex_refuses_them() -> None:
    body = ", ".join(["1"] * 20_000)
    with pytest.raises(HloParseError) as refused:
        parse(_long_constant("}" + body + "{", "s32[20000]"))
    with pytest.raises(HloParseError) as short:
        parse(_long_constant("}1{", "s32[1]"))
    assert refused.value.location.line == short.value.location.line == 3
    assert refused.value.message.split(",")[0] == short.value.message.split(",")[0]


def test_a_big_mask_with_infinities_is_checked_without_conversion() -> None:
    """An attention mask: 30k elements, a third of them -inf; a misspelt infinity is still refused."""
    values = ", ".join("-inf" if i % 3 == 0 else "0.5" for i in range(30_000))
    module = parse(_long_constant("{" + values + "}", "f32[30000]"))
    decoded = module.entry.root.literal.value  # type: ignore[union-attr]
    assert isinstance(decoded, np.ndarray)
    assert np.isneginf(decoded[::3]).all() and (decoded[1::3] == 0.5).all()
    with pytest.raises(HloParseError, match="but sees '-infinity'"):
        parse(_long_constant("{" + values.replace("-inf", "-infinity", 1) + "}", "f32[30000]"))
    with pytest.raises(HloParseError, match="expects integer literal values"):
        parse(_long_constant("{" + values.replace("0.5", "1") + "}", "s32[30000]"))
