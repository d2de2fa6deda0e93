"""The pipeline composes provenance across passes: each instruction any pass made names the instruction of
the pipeline's input it comes from, however many passes rewrote it on the way."""

from __future__ import annotations

from dataclasses import dataclass

from hloopt.ir.module import Module
from hloopt.passes.base import HloPass, PassResult, provenance_of
from hloopt.passes.pipeline import compose, run_pipeline
from hloopt.text.parser import parse

TEXT = """HloModule m
ENTRY main {
  x = bf16[4] parameter(0)
  y = bf16[4] parameter(1)
  a = bf16[4] add(x, y)
  ROOT n = bf16[4] negate(a)
}
"""


@dataclass(frozen=True)
class Renamed(HloPass):
    """Replaces each add with a copy of itself (a new name), as a rewrite does."""

    name = "test-renamed"

    def run_on_module(self, module: Module) -> PassResult:
        from hloopt.ir.builder import Builder

        provenance = []
        for instruction in list(module.entry.instructions):
            if instruction.opcode == "add":
                assert instruction.shape is not None
                made = Builder.before(instruction).add("add", instruction.shape, instruction.operands)
                module.entry.replace_instruction(instruction, made)
                provenance += provenance_of(instruction, [made])
        return PassResult(bool(provenance), len(provenance), provenance=tuple(provenance))


def test_compose_takes_each_source_back_to_the_input() -> None:
    assert compose({"add.1": "a"}, (("add.2", "add.1"), ("c", "c"))) == {"add.2": "a", "c": "c"}


def test_two_rewrites_of_one_instruction_name_the_input() -> None:
    module = parse(TEXT, "m")
    report = run_pipeline(module, [Renamed(), Renamed()])
    (add,) = [i for i in module.entry.instructions if i.opcode == "add"]
    assert add.name != "a" and report.provenance[add.name] == "a"


def test_a_registered_pass_records_its_provenance_in_the_report() -> None:
    module = parse(TEXT, "m")
    report = run_pipeline(module, "upcast-all-to-fp32")
    assert report.changed and report.provenance
    names = {i.name for i in module.entry.instructions}
    assert set(report.provenance) <= names
    assert set(report.provenance.values()) <= {"x", "y", "a", "n"}
