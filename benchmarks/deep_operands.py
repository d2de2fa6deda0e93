"""Anonymous operands nested deep around a large literal (issue 28, hostile input): parse time per depth.

    python benchmarks/deep_operands.py [--elements 250000]

Each module is `negate(f32[N] negate(… f32[N] constant({…})))`, the literal about 1 MB (`--elements`
values), at depths 128 to 1,024 (`MAX_OPERAND_NESTING`, XLA's reach). Printed: CPU seconds of `parse`,
and each depth's ratio to the shallowest one measured in the same run. Goal: linear in the text's length
whatever the depth, so the ratios stay near 1 (the text grows by a few characters per level); a reading
that re-lexes the text below each level (the old one) grows with the depth: minutes at 1,024 on 5 MB.
"""

from __future__ import annotations

import argparse
import time

from hloopt.text.parser import parse
from hloopt.text.splitting import MAX_OPERAND_NESTING


def module(elements: int, depth: int) -> str:
    literal = ", ".join(["1.5"] * elements)
    operand = f"f32[{elements}] constant({{{literal}}})"
    for _ in range(depth - 1):
        operand = f"f32[{elements}] negate({operand})"
    return f"HloModule m\n\nENTRY e {{\n  ROOT r = f32[{elements}] negate({operand})\n}}\n"


def seconds(text: str) -> float:
    """The best of three CPU times of one parse."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        parse(text)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    arguments = argparse.ArgumentParser(description="parse time of anonymous operands nested deep")
    arguments.add_argument("--elements", type=int, default=250_000)
    elements = arguments.parse_args().elements
    reference: float | None = None
    for depth in (128, 256, 512, MAX_OPERAND_NESTING):
        text = module(elements, depth)
        took = seconds(text)
        reference = reference or took
        print(
            f"depth {depth:5d}  {len(text) / 1e6:5.2f} MB  parse {took:7.3f} s  ×{took / reference:5.2f} of depth 128"
        )


if __name__ == "__main__":
    main()
