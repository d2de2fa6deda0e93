"""Throughput of hloopt.cast_engine (neuron profile) beside ml_dtypes/numpy astype.

Every major pair runs on 16M-element arrays; the baseline for each pair is the
astype that computes the nearest thing (ml_dtypes for bf16/fp8/fp4, numpy for
fp16 and int8), and np.copyto of float32 shows the memory-bandwidth ceiling.
Usage: python benchmarks/cast.py [--n 16777216] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hloopt.cast_engine import cast

# (src, dst, baseline numpy dtype of the other side, goal ratio or absolute Melem/s)
PAIRS: list[tuple[str, str, object, str]] = [
    ("float32", "float8_e4m3fn", ml_dtypes.float8_e4m3fn, ">=2x"),
    ("float8_e4m3fn", "float32", np.float32, ">=2x"),
    ("float32", "float8_e5m2", ml_dtypes.float8_e5m2, ">=2x"),
    ("float8_e5m2", "float32", np.float32, ">=2x"),
    ("float32", "float8_e3m4", ml_dtypes.float8_e3m4, ">=2x"),
    ("float32", "float8_e4m3", ml_dtypes.float8_e4m3, ">=2x"),
    ("float32", "float4_e2m1fn", ml_dtypes.float4_e2m1fn, ">=2x"),
    ("float32", "bfloat16", ml_dtypes.bfloat16, ">=0.8x"),
    ("bfloat16", "float32", np.float32, ">=0.8x"),
    ("float32", "float16", np.float16, ">=0.8x"),
    ("float16", "float32", np.float32, ">=0.8x"),
    ("float32", "int8", np.int8, ">=1000M"),
    ("int8", "float32", np.float32, ">=1000M"),
    ("bfloat16", "float8_e4m3fn", ml_dtypes.float8_e4m3fn, "-"),
    ("float32", "float8_e4m3fn_x4", None, "-"),
]

NUMPY_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int8": np.int8,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}


def best_rate(fn: Callable[[], object], n: int, repeat: int) -> float:
    """Melem/s of the fastest of `repeat` runs (after one warm-up)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    base = (rng.standard_normal(n) * 64).astype(np.float32)
    sources = {name: base.astype(dt) for name, dt in NUMPY_DTYPES.items()}
    out = np.empty_like(base)
    copy = best_rate(lambda: np.copyto(out, base), n, args.repeat)
    print(f"np.copyto float32 (bandwidth ceiling): {copy:8.0f} Melem/s   n={n}")
    print(f"{'pair':34s} {'hloopt':>8s} {'astype':>8s} {'ratio':>6s}  goal")
    with np.errstate(all="ignore"):
        for src, dst, other, goal in PAIRS:
            data = sources[src]
            ours = best_rate(lambda data=data, src=src, dst=dst: cast(data, src, dst), n, args.repeat)
            if other is None:
                print(f"{src + ' -> ' + dst:34s} {ours:8.0f} {'-':>8s} {'-':>6s}  {goal}")
                continue
            theirs = best_rate(lambda data=data, other=other: data.astype(other), n, args.repeat)
            print(f"{src + ' -> ' + dst:34s} {ours:8.0f} {theirs:8.0f} {ours / theirs:6.2f}  {goal}")


if __name__ == "__main__":
    main()
