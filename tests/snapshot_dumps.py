"""HloSnapshots written by the installed jax on the CPU (``--xla_dump_hlo_snapshots``), for the tests.

jax runs in a subprocess with XLA_FLAGS set (the test process never imports jax: it is never forked
after that, and its XLA flags stay its own). Each program is a named jax function called once on
numpy inputs; `dump` returns each program's snapshot file by the function's name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hloopt.support.formats import wire_fields

#: The programs (their outputs: f32 and pred, bf16, integers, a function of fp8, a reduction), and the inputs.
PROGRAMS = """
import numpy as np, ml_dtypes, jax, jax.numpy as jnp

def f32_pair(a, b):
    return a * b + 1, a > b

def bf16_matmul(x, w):
    return jnp.tanh(x) @ w

def int_ops(i, j):
    return i // 3 + j.astype(jnp.int32), i % 5, jnp.maximum(j, jnp.int8(-2))

def fp8_scale(q, s):
    return q.astype(jnp.float32) * s

def softmax(x):
    return jax.nn.softmax(x, axis=-1)

rng = np.random.default_rng(7)
calls = {
    f32_pair: (rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)),
    bf16_matmul: (rng.standard_normal((3, 8)).astype(ml_dtypes.bfloat16), rng.standard_normal((8, 2)).astype(ml_dtypes.bfloat16)),
    int_ops: (rng.integers(-50, 50, (6,)).astype(np.int32), rng.integers(-9, 9, (6,)).astype(np.int8)),
    fp8_scale: (rng.standard_normal((2, 4)).astype(ml_dtypes.float8_e4m3fn), np.float32(1.5)),
    softmax: (rng.standard_normal((3, 7)).astype(np.float32),),
}
for function, args in calls.items():
    jax.block_until_ready(jax.jit(function)(*args))
"""
NAMES = ("f32_pair", "bf16_matmul", "int_ops", "fp8_scale", "softmax")


def dump(directory: Path) -> dict[str, Path]:
    """Run `PROGRAMS` under jax with snapshots dumped into `directory`: each program's snapshot by name."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={directory} --xla_dump_hlo_snapshots", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", PROGRAMS], env=env, check=True, capture_output=True, timeout=300)
    found = {name: sorted(directory.glob(f"module_*.jit_{name}.snapshot.*.pb")) for name in NAMES}
    assert all(len(files) == 1 for files in found.values()), found
    return {name: files[0] for name, files in found.items()}


def result_value_span(data: bytes, output: int) -> tuple[int, int]:
    """Where the values of output `output` of a snapshot's recorded (tuple) result lie in `data`."""
    result = next(f for f in wire_fields(data) or [] if f.number == 3)
    element = [f for f in wire_fields(data[result.start : result.end]) or [] if f.number == 10][output]
    start, end = result.start + element.start, result.start + element.end
    values = next(f for f in wire_fields(data[start:end]) or [] if f.number != 1 and f.wire == 2)
    return start + values.start, start + values.end
