"""The builder: names from the module's uniquer, insertion in creation order before or after an anchor."""

from __future__ import annotations

import itertools
import re

from hloopt.ir.attribute_values import Int
from hloopt.ir.builder import Builder
from hloopt.ir.module import _name_parts
from hloopt.ir.shape import ArrayShape, TupleShape
from hloopt.text.parser import parse

TEXT = """HloModule m

ENTRY main {
  convert = f32[2]{0} parameter(0)
  ROOT r = f32[2]{0} negate(convert)
}
"""
F32 = ArrayShape("f32", (2,))
BF16 = ArrayShape("bf16", (2,))


def test_before_inserts_in_creation_order_with_unique_names() -> None:
    module = parse(TEXT)
    entry = module.entry
    root = entry.root
    assert root is not None
    builder = Builder.before(root)
    narrow = builder.convert(entry.parameters()[0], BF16)
    pair = builder.tuple([narrow, narrow], TupleShape((BF16, BF16)))
    first = builder.get_tuple_element(pair, 0, BF16)
    assert [i.name for i in entry.instructions] == ["convert", "convert.1", "tuple", "get-tuple-element", "r"]
    assert builder.created == [narrow, pair, first] and first.attributes == {"index": Int(0)}


def test_after_inserts_right_after_the_anchor() -> None:
    module = parse(TEXT)
    entry = module.entry
    builder = Builder.after(entry.parameters()[0])
    wide = builder.convert(entry.parameters()[0], BF16)
    builder.add("negate", BF16, [wide])
    assert [i.name for i in entry.instructions] == ["convert", "convert.1", "negate", "r"]


def test_fresh_names_read_a_suffix_as_xla_names_do() -> None:
    """Every name is read as ``^(.*)\\.(\\d+)$`` reads it (``base.N``), without the regex: the next fresh name of
    each base is one past the largest taken, and a prefix given with a suffix names its base."""
    pattern = re.compile(r"^(.*)\.(\d+)$")
    pieces = ["a", ".", "1", "0", "x", "\u0663"]  # U+0663 ARABIC-INDIC DIGIT THREE is a \d
    for length in range(1, 5):
        for parts in itertools.product(pieces, repeat=length):
            name = "".join(parts)
            match = pattern.match(name)
            base, number = (match.group(1), int(match.group(2))) if match else (name, 0)
            module = parse("HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n", "m.hlo")
            module.entry.instructions[0].name = name
            assert module.unique_name(name) == f"{base}.{number + 1}", name


def test_each_base_reads_the_names_taken_when_the_first_fresh_name_was_made() -> None:
    """For every set of up to three short names taken and every base asked for, the next N is one past the
    largest N of the names `_name_parts` reads as that base (the table, built per base on demand, is what one
    built from every name at once would be); names made later come from the counter, not from the names."""
    pieces = ["a", "a.1", "a.1.2", "a.0", "a.07", ".3", "a.", "1", "a.\u0663", "a.1.x", "a.1.2.3"]
    for count in (1, 2, 3):
        for names in itertools.combinations(pieces, count):
            module = parse(
                "HloModule m\n\nENTRY e {\n"
                + "".join(f"  p{k} = f32[] parameter({k})\n" for k in range(count))
                + "  ROOT t = (f32[]) tuple(p0)\n}\n",
                "m.hlo",
            )
            for instruction, name in zip(module.entry.instructions, names):
                instruction.name = name
            table: dict[str, int] = {}
            for name in [*names, "t"]:
                base, number = _name_parts(name)
                table[base] = max(table.get(base, 0), number + 1)
            for prefix in [*pieces, "b"]:
                base = _name_parts(prefix)[0]
                counter = table.get(base, 0)
                assert module.unique_name(prefix) == (f"{base}.{counter}" if counter else base), (names, prefix)
                table[base] = counter + 1


def test_unique_names_share_the_numbering_of_unique_name() -> None:
    """Names drawn from `unique_names` and from `unique_name` interleave as one sequence per base, whichever
    comes first, and an iterator not yet drawn from takes no name."""
    for prefix, first in (("convert", "convert.1"), ("convert.7", "convert.1"), ("fresh", "fresh")):
        module = parse(TEXT, "m.hlo")
        names = module.unique_names(prefix)
        module.unique_names("unused")
        base = _name_parts(prefix)[0]
        drawn = [next(names), module.unique_name(prefix), next(names), next(names), module.unique_name(base)]
        number = 0 if first == base else 1
        assert drawn == [first, *(f"{base}.{number + k}" for k in range(1, 5))], prefix
        assert module.unique_name("unused") == "unused"


def test_replace_operands_is_replace_operand_for_each_pair() -> None:
    """Every use of each replaced operand changes (repeated uses too) to what the mapping gives it, the users
    follow, and one edit counts."""
    module = parse(
        "HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] parameter(2)\n"
        "  ROOT t = (f32[], f32[], f32[]) tuple(a, b, a)\n}\n",
        "m.hlo",
    )
    a, b, c, t = module.entry.instructions
    before = module.entry.edits
    t.replace_operands({b: a, a: c})  # at once: a's use from b is not then replaced by c
    assert t.operands == [c, a, c]
    assert t in a.users and t not in b.users and t in c.users
    assert module.entry.edits == before + 1
