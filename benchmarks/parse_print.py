"""hloopt's parse and print beside XLA's own C++ parser and printer, in the same run.

    python benchmarks/parse_print.py [--copies 72] [--constant 1000000] [--repeat 3]

Modules:
- "jax-100k": the compiled text of a jax training step (an 8-layer MLP with
  value_and_grad: fusions, metadata, backend_config, stack frames, a schedule),
  its computations copied `--copies` times under fresh names and called from
  one entry, to about 100k instructions. (Compiling one 100k-instruction jax
  program takes XLA's CPU backend many minutes; the copies are real compiled text.)
- "constant-1M": one f32 constant of `--constant` elements.
- "mask-1M": the same size, a third of the elements -inf (no goal; big masks are common).

Prints seconds (best of `--repeat`), MB/s, the ratio to XLA, and the memory
the parsed module holds per instruction. Goals (issue 14): parse+print ≤ 2× XLA
on the 100k module, ≤ 1 KB per instruction; ≤ 1.5× on the big constant (issue 2).
"""

from __future__ import annotations

import argparse
import gc
import re
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import hloopt
from hloopt.support.gcpause import paused_gc

_NAME = re.compile(r"%([A-Za-z_][A-Za-z0-9_.\-]*)")


def compiled_jax_step() -> str:
    """Compiled HLO text of a small jax training step."""
    import jax
    import jax.numpy as jnp

    def loss(params: list[tuple[Any, Any]], x: Any, y: Any) -> Any:
        h = x
        for w, b in params:
            h = jax.nn.gelu(h @ w + b)
            h = h / (jnp.linalg.norm(h, axis=-1, keepdims=True) + 1e-6)
        return jnp.mean((h - y) ** 2)

    def step(params: list[tuple[Any, Any]], x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]

    params = [(jnp.ones((64, 64)), jnp.zeros((64,))) for _ in range(8)]
    x = jnp.ones((16, 64))
    text = jax.jit(step).lower(params, x, x).compile().as_text()
    assert text is not None
    return text


def replicate(text: str, copies: int) -> str:
    """`copies` renamed copies of a module's computations, all called from one new entry."""
    module = hloopt.parse(text)
    entry = module.entry
    header_end = text.index("\n\n")
    body_start = text.index("\n\n%") + 2 if module.stack_frames else header_end + 2
    frames = text[header_end:body_start].strip("\n")
    body = text[body_start:]
    params = [p.shape for p in entry.parameters()]
    assert entry.root is not None and entry.root.shape is not None and all(params), (
        "the benchmark's module is written out"
    )
    result = entry.root.shape.to_text()
    chunks = []
    for k in range(copies):
        chunk = _NAME.sub(lambda m, k=k: f"%{m.group(1)}.c{k}", body).replace("ENTRY %", "%")
        chunks.append(chunk.strip("\n"))
    lines = [f"ENTRY %bench ({', '.join(f'p{i}: {p.to_text(False)}' for i, p in enumerate(params) if p)}) -> f32[] {{"]
    lines += [f"  %p{i} = {p.to_text()} parameter({i})" for i, p in enumerate(params) if p]
    args = ", ".join(f"%p{i}" for i in range(len(params)))
    for k in range(copies):
        lines.append(f"  %call.{k} = {result} call({args}), to_apply=%{entry.name}.c{k}")
        lines.append(f"  %loss.{k} = f32[] get-tuple-element(%call.{k}), index=0")
    total = "%loss.0"
    for k in range(1, copies):
        lines.append(f"  %sum.{k} = f32[] add({total}, %loss.{k})")
        total = f"%sum.{k}"
    lines.append(f"  ROOT %result = f32[] copy({total})")
    lines.append("}")
    parts = ["HloModule bench, is_scheduled=true"]
    if frames:
        parts.append(frames)
    parts.append("\n\n".join(chunks))
    parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def constant_module(elements: int) -> str:
    values = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    literal = ", ".join(f"{v:.6g}" for v in values)
    return f"HloModule big_constant\n\nENTRY %e () -> f32[{elements}] {{\n  ROOT %c = f32[{elements}]{{0}} constant({{{literal}}})\n}}\n"


def mask_module(elements: int) -> str:
    """An attention-mask constant: a third of its elements -inf (the literal check reads inf without converting)."""
    literal = ", ".join("-inf" if i % 3 == 0 else "0" for i in range(elements))
    return f"HloModule big_mask\n\nENTRY %e () -> f32[{elements}] {{\n  ROOT %c = f32[{elements}]{{0}} constant({{{literal}}})\n}}\n"


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Fastest of `repeat` calls; the previous call's result is freed before the clock starts, not inside it."""
    times, result = [], None
    for _ in range(repeat):
        result = None
        gc.collect()
        start = time.perf_counter()
        with paused_gc():  # as `hloopt run` runs a file; library calls leave the collector alone
            result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def held_bytes(text: str) -> int:
    """Bytes still allocated by a parsed module (tracemalloc), excluding the input text."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    module = hloopt.parse(text)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del module
    return after - before


def measure(name: str, text: str, repeat: int) -> None:
    import jaxlib._hlo as xla

    megabytes = len(text.encode()) / 1e6
    xla_parse, xla_module = best(lambda: xla.hlo_module_from_text(text), repeat)
    xla_print, _ = best(xla_module.to_string, repeat)
    ours_parse, module = best(lambda: hloopt.parse(text), repeat)
    ours_print, _ = best(module.to_text, repeat)
    count = sum(len(c.instructions) for c in module.computations)
    memory = held_bytes(text)
    xla_total, ours_total = xla_parse + xla_print, ours_parse + ours_print
    print(f"\n== {name}: {count} instructions, {megabytes:.1f} MB of text")
    print(
        f"   XLA    parse {xla_parse:7.3f}s  print {xla_print:7.3f}s  total {xla_total:7.3f}s  ({megabytes / xla_total:6.1f} MB/s)"
    )
    print(
        f"   hloopt parse {ours_parse:7.3f}s  print {ours_print:7.3f}s  total {ours_total:7.3f}s  ({megabytes / ours_total:6.1f} MB/s)"
    )
    print(
        f"   ratio hloopt/XLA: parse {ours_parse / xla_parse:.2f}x  print {ours_print / xla_print:.2f}x  parse+print {ours_total / xla_total:.2f}x"
    )
    print(
        f"   memory held by the parsed module: {memory / 1e6:.1f} MB = {memory / max(count, 1):.0f} bytes per instruction"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=72)
    parser.add_argument("--constant", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    measure("jax-100k (compiled jax step, copied)", replicate(compiled_jax_step(), args.copies), args.repeat)
    measure(f"constant-{args.constant}", constant_module(args.constant), args.repeat)
    measure(f"mask-{args.constant} (a third -inf)", mask_module(args.constant), args.repeat)


if __name__ == "__main__":
    main()
