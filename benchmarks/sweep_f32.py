"""Sweep all 2^32 float32 bit patterns through the neuron profile (outside CI).

Each destination's output is compared bit for bit with the independent
reference in tests/cast_engine/cast_reference.py (grid search for float
destinations, float64 masks for integer ones). Usage:

    python benchmarks/sweep_f32.py [--dst NAME ...] [--block-bits 24]

Prints one line per destination with the mismatch count; exits 1 on any.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "cast_engine")]
import cast_reference as ref  # noqa: E402

from hloopt.cast_engine import FP8ConversionConfig, cast, names  # noqa: E402

FP8ISH = ref.FP8_LANES


def expected(dst: str, bits: np.ndarray, config: FP8ConversionConfig) -> np.ndarray:
    if dst in ref.INTS or dst == "float8_e8m0fnu":
        return ref.integer_vectorised("uint8" if dst == "float8_e8m0fnu" else dst, bits)
    return ref.encode(dst, bits, config.saturate, config.nan_suppress)


def sweep(dst: str, block_bits: int, config: FP8ConversionConfig) -> int:
    bad = 0
    block = 1 << block_bits
    for start in range(0, 1 << 32, block):
        bits = np.arange(start, start + block, dtype=np.uint64).astype(np.uint32)
        got = cast(bits.view(np.float32), "float32", dst, config)
        want = expected(dst, bits, config)
        bad += int(np.count_nonzero(got.view(want.dtype) != want))
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dst", action="append", help="destination(s); default: all neuron dtypes")
    parser.add_argument("--block-bits", type=int, default=24)
    parser.add_argument("--all-configs", action="store_true", help="also the three non-default FP8 configs")
    args = parser.parse_args()
    dsts = args.dst or [n for n in names("neuron") if n not in ("float32", "float32r")] + ["float32r"]
    failures = 0
    for dst in dsts:
        configs = [FP8ConversionConfig()]
        if args.all_configs and dst in FP8ISH:
            configs += [FP8ConversionConfig(s, n) for s, n in [(True, True), (False, False), (False, True)]]
        for config in configs:
            t0 = time.perf_counter()
            with np.errstate(all="ignore"):
                bad = sweep(dst, args.block_bits, config)
            failures += bad
            print(
                f"{dst:20s} sat={config.saturate:d} nan={config.nan_suppress:d}  mismatches={bad}  "
                f"{time.perf_counter() - t0:7.1f}s",
                flush=True,
            )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
