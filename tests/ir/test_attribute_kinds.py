"""The attribute-kind table (hloopt/ir/attribute_kinds.py) against the opcode table."""

from __future__ import annotations

from hloopt.ir.attribute_kinds import BY_OPCODE, KINDS, MODULE_KINDS, Kind, kind_of
from hloopt.ir.opcodes import BY_NAME, CALLEE_ATTRIBUTES, COMPUTATION_LIST_ATTRIBUTES, GENERIC_ATTRIBUTES


def test_every_attribute_an_opcode_takes_has_a_kind() -> None:
    allowed = set(GENERIC_ATTRIBUTES).union(*(row.attributes for row in BY_NAME.values()))
    assert allowed - set(KINDS) == set()
    assert set(KINDS) - allowed == set(), "a kind for an attribute no opcode takes"


def test_callees_are_computations_as_the_opcode_table_says() -> None:
    for name in CALLEE_ATTRIBUTES:
        expected = Kind.COMPUTATION_LIST if name in COMPUTATION_LIST_ATTRIBUTES else Kind.COMPUTATION
        assert KINDS[name] is expected, name


def test_per_opcode_kinds_name_an_opcode_that_takes_the_attribute() -> None:
    for opcode, name in BY_OPCODE:
        assert name in BY_NAME[opcode].attributes
    assert kind_of("gather", "slice_sizes") is Kind.INT_LIST
    assert kind_of("collective-permute", "slice_sizes") is Kind.INT_LIST_LIST
    assert kind_of("custom-call", "no_such_attribute") is Kind.OTHER


def test_every_header_attribute_has_a_kind() -> None:
    """The header's kinds name exactly the attributes XLA's module parser allows (the entry layout is modelled
    apart, as a program layout)."""
    from hloopt.text.validation import MODULE_ATTRIBUTES

    assert set(MODULE_KINDS) == MODULE_ATTRIBUTES - {"entry_computation_layout"}
    assert {MODULE_KINDS[name] for name in ("is_scheduled", "num_partitions")} == {Kind.BOOL, Kind.INT}
