"""Large modules and whole directories: hloopt beside XLA's own C++ parser and printer, in the same run.

    python benchmarks/large_modules.py [--copies 72] [--million 1000000] [--constant 1000000] [--modules 500]

- "jax-100k": the compiled jax training step of `parse_print.py`, copied to ~100k
  instructions: XLA parse+print vs hloopt parse + all three passes + print.
- "chain-1M": a script-generated module of `--million` instructions (bf16
  elementwise chains with dots, converts of constants, tuples), the same measures,
  plus the cost ratio to a 100k module generated the same way.
- "constant-1M": one f32 constant of `--constant` elements, round trip and passes.
- "dir-500": `--modules` small modules (corpus files when ../shared exists, else
  generated), ``hloopt run DIR --passes all -o OUT --jobs 2`` as a subprocess,
  against XLA parsing and printing the same files in one process.

Goals (issue 6): parse+passes+print ≤ 4× XLA parse+print on the 100k module;
≤ 2 KB per instruction held; the 1M module costs ≤ 12× the 100k one.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse_print import best, compiled_jax_step, constant_module, held_bytes, replicate

import hloopt
from hloopt.passes.pipeline import run_pipeline

PASSES = "all"
REPO = Path(__file__).resolve().parent.parent


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


def small_modules(count: int, into: Path) -> None:
    """`count` small modules: corpus files (the first by name that parse) or, without ../shared, generated ones."""
    corpus = Path(os.environ.get("HLOOPT_SHARED", REPO.parent / "shared")) / "hlo-corpus" / "xla"
    sources = sorted(corpus.glob("*.hlo")) if corpus.is_dir() else []
    written = 0
    for path in sources:
        text = path.read_text()
        try:
            hloopt.parse(text)
        except hloopt.HloError:
            continue
        (into / f"d{written % 10}").mkdir(exist_ok=True)
        (into / f"d{written % 10}" / path.name).write_text(text)
        written += 1
        if written == count:
            return
    for i in range(written, count):
        (into / f"gen_{i}.hlo").write_text(generated_chain(40, width=20))


def measure_directory(count: int) -> None:
    import jaxlib._hlo as xla

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in", Path(tmp) / "out"
        src.mkdir()
        small_modules(count, src)
        files = sorted(src.rglob("*.hlo"))
        start = time.perf_counter()
        for path in files:
            xla.hlo_module_from_text(path.read_text()).to_string()
        xla_s = time.perf_counter() - start
        start = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "hloopt",
                "run",
                str(src),
                "--passes",
                PASSES,
                "-o",
                str(out),
                "--jobs",
                "2",
                "--report",
                str(Path(tmp) / "report.json"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        ours_s = time.perf_counter() - start
    summary = result.stderr.strip().splitlines()[0] if result.stderr.strip() else f"exit {result.returncode}"
    print(f"\n== dir-{count}: {len(files)} modules")
    print(f"   XLA parse+print, one process, sequential: {xla_s:7.3f}s")
    print(f"   hloopt run DIR --passes {PASSES} -o OUT --jobs 2 (whole command, start-up included): {ours_s:7.3f}s")
    print(f"   ratio {ours_s / xla_s:.2f}x; {summary}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=72)
    parser.add_argument("--million", type=int, default=1_000_000)
    parser.add_argument("--constant", type=int, default=1_000_000)
    parser.add_argument("--modules", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    measure("jax-100k (compiled jax step, copied)", replicate(compiled_jax_step(), args.copies), args.repeat)
    small = measure(f"chain-{args.million // 10} (generated)", generated_chain(args.million // 10), args.repeat)
    big = measure(f"chain-{args.million} (generated)", generated_chain(args.million), 1)
    print(f"   cost of chain-{args.million} / chain-{args.million // 10}: {big / small:.2f}x (goal ≤ 12x)")
    measure(f"constant-{args.constant}", constant_module(args.constant), args.repeat)
    measure_directory(args.modules)


if __name__ == "__main__":
    main()
