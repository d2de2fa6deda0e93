"""Large modules: hloopt beside XLA's own C++ parser and printer, in the same run.

    python benchmarks/large_modules.py [--copies 72] [--million 1000000] [--constant 1000000]

- "jax-100k": the compiled jax training step of `parse_print.py`, copied to ~100k
  instructions: XLA parse+print vs hloopt parse + all three passes + print.
- "chain-1M": a script-generated module of `--million` instructions (bf16
  elementwise chains with dots, converts of constants, tuples), the same measures,
  plus the cost ratio to a 100k module generated the same way.
- "constant-1M": one f32 constant of `--constant` elements, round trip and passes.

Goals (issue 14): parse+passes+print ≤ 3× XLA parse+print on the 100k module;
≤ 1 KB per instruction held; the 1M module costs ≤ 11× the 100k one. A directory of
modules as one command is `batch.py` (`--passes all --limit 500` for issue 6's
figure).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse_print import best, compiled_jax_step, constant_module, held_bytes, replicate

import hloopt
from hloopt.passes.pipeline import run_pipeline
from hloopt.support.gcpause import paused_gc

PASSES = "all"


def generated_chain(instructions: int, width: int = 1000) -> str:
    """A scheduled-looking module of `instructions` instructions: `width`-long bf16 chains called from the entry.

    Each chain computation mixes what the passes rewrite (bf16 arithmetic, int8 dots,
    convert of a constant) with what they leave alone (s32 arithmetic, tuples).
    """
    chains = max(1, instructions // width)
    parts = [f"HloModule chain_{instructions}"]
    for c in range(chains):
        body = [
            f"%chain.{c} (p.{c}: bf16[8,8], q.{c}: s8[8,8]) -> (bf16[8,8], s32[8,8]) {{",
            f"  %p.{c} = bf16[8,8]{{1,0}} parameter(0)",
            f"  %q.{c} = s8[8,8]{{1,0}} parameter(1)",
            f"  %k.{c} = f16[8,8]{{1,0}} constant({{...}})",
            f"  %kc.{c} = bf16[8,8]{{1,0}} convert(%k.{c})",
            f"  %d.{c} = s32[8,8]{{1,0}} dot(%q.{c}, %q.{c}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
        ]
        previous = f"%p.{c}"
        for i in range(width - 7):
            op = ("add", "multiply", "subtract", "maximum")[i % 4]
            body.append(f"  %x.{c}.{i} = bf16[8,8]{{1,0}} {op}({previous}, %kc.{c})")
            previous = f"%x.{c}.{i}"
        body.append(f"  ROOT %r.{c} = (bf16[8,8]{{1,0}}, s32[8,8]{{1,0}}) tuple({previous}, %d.{c})")
        body.append("}")
        parts.append("\n".join(body))
    entry = [
        "ENTRY %main (a: bf16[8,8], b: s8[8,8]) -> bf16[8,8] {",
        "  %a = bf16[8,8]{1,0} parameter(0)",
        "  %b = s8[8,8]{1,0} parameter(1)",
    ]
    total = "%a"
    for c in range(chains):
        entry.append(f"  %call.{c} = (bf16[8,8]{{1,0}}, s32[8,8]{{1,0}}) call(%a, %b), to_apply=%chain.{c}")
        entry.append(f"  %g.{c} = bf16[8,8]{{1,0}} get-tuple-element(%call.{c}), index=0")
        entry.append(f"  %s.{c} = bf16[8,8]{{1,0}} add({total}, %g.{c})")
        total = f"%s.{c}"
    entry += [f"  ROOT %out = bf16[8,8]{{1,0}} copy({total})", "}"]
    parts.append("\n".join(entry))
    return "\n\n".join(parts) + "\n"


def ours(text: str) -> tuple[float, float, float, int]:
    """hloopt: seconds to parse, to run the passes, to print; instruction count."""
    gc.collect()
    with paused_gc():  # as `hloopt run` runs a file; library calls leave the collector alone
        start = time.perf_counter()
        module = hloopt.parse(text)
        parsed = time.perf_counter()
        run_pipeline(module, PASSES)
        passed = time.perf_counter()
        module.to_text()
        printed = time.perf_counter()
    count = sum(len(c.instructions) for c in module.computations)
    return parsed - start, passed - parsed, printed - passed, count


def xla_parse_print(text: str, repeat: int) -> float:
    import jaxlib._hlo as xla

    parse_time, module = best(lambda: xla.hlo_module_from_text(text), repeat)
    print_time, _ = best(module.to_string, repeat)
    return parse_time + print_time


def measure(name: str, text: str, repeat: int) -> float:
    """Print hloopt vs XLA for one module; return hloopt's total (parse + passes + print), best of `repeat`."""
    xla_total = xla_parse_print(text, repeat)
    runs = [ours(text) for _ in range(repeat)]
    parse_s, passes_s, print_s, count = min(runs, key=lambda r: sum(r[:3]))
    total = parse_s + passes_s + print_s
    memory = held_bytes(text)
    print(f"\n== {name}: {count} instructions, {len(text) / 1e6:.1f} MB of text")
    print(f"   XLA    parse+print {xla_total:7.3f}s")
    print(f"   hloopt parse {parse_s:7.3f}s  passes {passes_s:7.3f}s  print {print_s:7.3f}s  total {total:7.3f}s")
    print(
        f"   ratio hloopt (parse+passes+print) / XLA (parse+print): {total / xla_total:.2f}x   "
        f"(round trip only: {(parse_s + print_s) / xla_total:.2f}x)"
    )
    print(
        f"   memory held by the parsed module: {memory / 1e6:.1f} MB = {memory / max(count, 1):.0f} bytes per instruction"
    )
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=72)
    parser.add_argument("--million", type=int, default=1_000_000)
    parser.add_argument("--constant", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    measure("jax-100k (compiled jax step, copied)", replicate(compiled_jax_step(), args.copies), args.repeat)
    small = measure(f"chain-{args.million // 10} (generated)", generated_chain(args.million // 10), args.repeat)
    big = measure(f"chain-{args.million} (generated)", generated_chain(args.million), args.repeat)
    print(f"   cost of chain-{args.million} / chain-{args.million // 10}: {big / small:.2f}x (goal ≤ 11x)")
    measure(f"constant-{args.constant}", constant_module(args.constant), args.repeat)


if __name__ == "__main__":
    main()
