"""What neuron-auto-cast ``mode=all`` cannot do without, timed against upcast-all-to-fp32 on the same module.

Issue 25 asks that a pass of neuron-auto-cast cost at most what upcast-all-to-fp32 costs on a 100k-instruction
module. On benchmarks/auto_cast.py's module, ``all`` must change every F32 op, where upcast changes the bf16
detour only. This script times two floors of that work, with no plan, shape inference or provenance, each
made the cheapest way the IR allows, against upcast in the same run (best of `--repeat`):

- ``retype``: every F32 op but the entry parameters retyped to bf16, and every op that computes stamped.
  This is the implicit form (``bf16 add(bf16, bf16)``), which XLA's CPU does not compute exactly for every op.
- ``retype+converts``: the same, plus the converts that any exact form needs whatever it does elsewhere:
  one after each F32 entry parameter (the signature is kept), one after each dot (the matrix engine
  accumulates in F32 and the result is rounded once), and one before and one after each reduce
  (mixed-precision accumulation in F32).

A floor over 1 means no implementation on this IR meets the goal on this module. Usage:

    python benchmarks/auto_cast_floor.py [--instructions 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auto_cast import best_seconds, module_text

from hloopt.ir.attributes import with_frontend_attribute
from hloopt.ir.module import Instruction, Module
from hloopt.ir.shape import ArrayShape
from hloopt.passes.neuron_auto_cast import listed
from hloopt.passes.registry import lookup
from hloopt.passes.retyping import Converts, packed_size_dropped
from hloopt.text.parser import parse

STAMP = with_frontend_attribute(None, "auto_cast", "bf16")


def floor(module: Module, *, converts: bool) -> int:
    """The edits (see the module's docstring), every shape looked up by identity and one stamp shared; the
    instruction count after them (read as a pass's output is: the insertions spliced in)."""
    narrow: dict[int, ArrayShape] = {}
    wide: dict[int, ArrayShape] = {}  # each narrow shape's F32 original
    made = Converts(module)

    def to_bf16(shape: ArrayShape) -> ArrayShape:
        found = narrow.get(id(shape))
        if found is None:
            found = narrow[id(shape)] = packed_size_dropped(shape, "bf16")
            wide[id(found)] = shape
        return found

    def rounded(value: Instruction, shape: ArrayShape) -> None:
        users = list(value.users)
        convert = made.after(value, shape, value)
        for user in users:
            user.replace_operands({value: convert})

    for computation in module.computations:
        for instruction in list(computation.instructions):
            shape = instruction.shape
            if not isinstance(shape, ArrayShape) or shape.element_type != "f32":
                continue
            opcode = instruction.opcode
            if opcode == "parameter":
                if converts and computation.is_entry:
                    rounded(instruction, to_bf16(shape))
                continue
            if opcode in ("dot", "reduce") and converts:
                if opcode == "reduce":
                    source = instruction.operands[0]
                    assert isinstance(source.shape, ArrayShape)
                    widened = made.after(source, wide.get(id(source.shape), source.shape), instruction)
                    instruction.replace_operands({source: widened})
                rounded(instruction, to_bf16(shape))
            elif opcode not in ("dot", "reduce", "constant"):
                instruction.set_shape(to_bf16(shape))
            if listed(instruction):
                instruction.set_attributes(instruction.attributes | {"frontend_attributes": STAMP}, merged=True)
    return sum(len(computation.instructions) for computation in module.computations)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--instructions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    parsed = parse(module_text(args.instructions), "mlp.hlo")
    upcast = lookup("upcast-all-to-fp32").create()
    runs: dict[str, Callable[[Module], object]] = {
        "upcast-all-to-fp32": upcast.run,
        "floor: retype": lambda m: floor(m, converts=False),
        "floor: retype+converts": lambda m: floor(m, converts=True),
        "neuron-auto-cast{mode=all}": lookup("neuron-auto-cast").create({"mode": "all"}).run,
    }
    best = best_seconds(runs, parsed, args.repeat)
    reference = best["upcast-all-to-fp32"]
    print(f"{sum(len(c.instructions) for c in parsed.computations)} instructions; best of {args.repeat}")
    for name, value in best.items():
        print(f"  {name:42} {value * 1000:9.1f} ms  ratio {value / reference:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
