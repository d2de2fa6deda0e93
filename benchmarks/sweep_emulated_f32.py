"""Sweep all 2^32 float32 bit patterns through emulate-neuron-converts on XLA (outside CI).

One module converts an f32 block to every destination at once (under one FP8 config);
after the pass it runs on the CPU for each block of `--block-bits` patterns, and every
output is compared bit for bit with the cast engine's neuron profile. The three other
FP8 configs (`--all-configs`) sweep the fp8/fp4 destinations only, the only ones they
change. `--start`/`--stop` (in blocks) sweep part of the range, for chunked runs. Usage:

    nice python benchmarks/sweep_emulated_f32.py [--dst f8e4m3fn ...] [--all-configs] [--block-bits 23]

Prints progress and one line per destination with its mismatch count; exits 1 on any.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hloopt.cast_engine import FP8ConversionConfig, cast
from hloopt.passes.emulate_neuron_converts import EmulateNeuronConverts
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse
from hloopt.xla import bridge

DESTINATIONS = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "f16", "bf16"]
MINIFLOATS = ["f8e4m3fn", "f8e5m2", "f8e4m3", "f8e3m4", "f4e2m1fn"]
DESTINATIONS += [*MINIFLOATS, "f8e8m0fnu"]
DEFAULT = FP8ConversionConfig()


def emulated_module(targets: list[str], count: int, config: FP8ConversionConfig) -> str:
    lines = [f"  p = f32[{count}] parameter(0)"]
    lines += [f"  c{i} = {target}[{count}] convert(p)" for i, target in enumerate(targets)]
    shapes = ", ".join(f"{target}[{count}]" for target in targets)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(f'c{i}' for i in range(len(targets)))})")
    module = parse("HloModule sweep\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n", "sweep")
    run_pipeline(module, [EmulateNeuronConverts(config.saturate, config.nan_suppress)])
    return module.to_text()


def sweep(targets: list[str], config: FP8ConversionConfig, block_bits: int, start: int, stop: int) -> Counter[str]:
    """Mismatches per destination over blocks [start, stop) of 2^block_bits patterns each."""
    block = 1 << block_bits
    executable = bridge.compile_cpu(emulated_module(targets, block, config))
    bad: Counter[str] = Counter({target: 0 for target in targets})
    began = time.perf_counter()
    for index in range(start, stop):
        bits = np.arange(index * block, (index + 1) * block, dtype=np.uint64).astype(np.uint32)
        values = bits.view(np.float32)
        for target, got in zip(targets, executable([values])):
            want = cast(values, "f32", target, config)
            raw = f"u{got.dtype.itemsize}"
            differ = np.flatnonzero(got.view(raw) != want.view(raw))
            if differ.size and bad[target] == 0:
                first = differ[0]
                print(
                    f"  {target}: first mismatch {bits[first]:#010x} → {got.view(raw)[first]:#x}, engine {want.view(raw)[first]:#x}"
                )
            bad[target] += int(differ.size)
        done = index + 1 - start
        if done % 16 == 0 or index + 1 == stop:
            rate = done * block / (time.perf_counter() - began) / 1e6
            print(
                f"  blocks {start}..{index} done ({rate:.0f}M patterns/s), mismatches {sum(bad.values())}", flush=True
            )
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dst", action="append", help="destination(s); default: every BIR destination")
    parser.add_argument("--all-configs", action="store_true", help="also the three non-default FP8 configs")
    parser.add_argument("--block-bits", type=int, default=23)
    parser.add_argument("--start", type=int, default=0, help="first block")
    parser.add_argument("--stop", type=int, help="block to stop before (default: the last)")
    args = parser.parse_args()
    blocks = 1 << (32 - args.block_bits)
    start, stop = args.start, blocks if args.stop is None else args.stop
    targets = args.dst or DESTINATIONS
    configs = [DEFAULT]
    if args.all_configs:
        configs += [FP8ConversionConfig(s, n) for s, n in [(True, True), (False, False), (False, True)]]
    patterns = (stop - start) << args.block_bits
    failures = 0
    for config in configs:
        chosen = targets if config == DEFAULT else [t for t in targets if t in MINIFLOATS]
        if not chosen:
            continue
        began = time.perf_counter()
        print(f"sat={config.saturate:d} nan={config.nan_suppress:d}: {len(chosen)} destinations, {patterns:,} patterns")
        bad = sweep(chosen, config, args.block_bits, start, stop)
        for target in chosen:
            print(f"{target:10s} sat={config.saturate:d} nan={config.nan_suppress:d}  mismatches={bad[target]}")
        print(f"  {time.perf_counter() - began:.0f}s", flush=True)
        failures += sum(bad.values())
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
