"""The snapshot reader against what jaxlib itself writes: an argument of every element type jax has on the
CPU, dumped by XLA (``--xla_dump_hlo_snapshots``), read back bit for bit; and a snapshot read as a module
with its inputs (`hloopt.xla.formats.load`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hloopt.arrays.snapshots import read_snapshot
from hloopt.support.formats import Format
from hloopt.xla.bridge import IsolatedPool
from hloopt.xla.formats import load
from hloopt.xla.running import run

#: Every ml_dtypes/numpy type jax 0.10-0.12 computes with on the CPU (fp6 it refuses: "Invalid XLA PrimitiveType").
JAX_TYPES = [
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex64",
    "complex128",
    "int2",
    "int4",
    "uint2",
    "uint4",
    "float8_e5m2",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e4m3b11fnuz",
    "float8_e3m4",
    "float8_e5m2fnuz",
    "float8_e4m3fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
]

#: Each type's argument (every bit pattern of a 1-byte type, random bits otherwise), passed to an identity
#: and a reversal, and saved as raw bytes for the test to compare with what XLA wrote.
IDENTITIES = """
import sys, numpy as np, ml_dtypes, jax
jax.config.update("jax_enable_x64", True)
saved = {}
for name in sys.argv[2:]:
    dtype = np.dtype(getattr(ml_dtypes, name, None) or getattr(np, name))
    rng = np.random.default_rng(len(saved))
    if "int" in name and dtype.itemsize == 1:
        info = ml_dtypes.iinfo(dtype)
        array = np.arange(int(info.min), int(info.max) + 1).astype(dtype)
    elif dtype == np.bool_:
        array = np.array([True, False, False, True])
    elif dtype.itemsize == 1:  # every bit pattern of an fp8 or fp4 type, NaNs included
        array = np.arange(1 << ml_dtypes.finfo(dtype).bits, dtype=np.uint8).view(dtype)
    else:
        array = rng.integers(0, 256, 16 * dtype.itemsize, dtype=np.uint8).view(dtype)
    def identity(x):
        return x, x[::-1]
    identity.__name__ = f"identity_{len(saved)}"
    jax.block_until_ready(jax.jit(identity)(array))
    saved[name] = array.reshape(-1).view(np.uint8)
np.savez(sys.argv[1], **saved)
"""


@pytest.mark.slow
def test_every_element_type_jaxlib_writes_is_read_bit_for_bit(tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dumps} --xla_dump_hlo_snapshots", "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, "-c", IDENTITIES, str(tmp_path / "saved.npz"), *JAX_TYPES]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=600)
    saved = np.load(tmp_path / "saved.npz")
    for index, name in enumerate(JAX_TYPES):
        [path] = dumps.glob(f"module_*.jit_identity_{index}.snapshot.*.pb")
        snapshot = read_snapshot(path.read_bytes(), str(path))
        [argument] = snapshot.arguments
        assert snapshot.result is not None
        first, reversed_ = snapshot.result
        raw = saved[name].tobytes()
        assert argument.array.tobytes() == raw, name
        assert first.array.tobytes() == raw, name
        # A computed output: jaxlib 0.12 quiets a NaN the reversal moves (0x7f for 0xff in f8e5m2).
        expected = np.ascontiguousarray(argument.array[::-1])
        nan = np.isnan(expected.astype(np.complex128))
        bits = expected.view(np.uint8).reshape(expected.size, -1) == reversed_.array.view(np.uint8).reshape(
            expected.size, -1
        )
        assert np.all(bits.all(axis=1) | nan), name


def test_a_snapshot_loads_as_its_module_with_its_inputs(jax_snapshots: dict[str, Path]) -> None:
    with IsolatedPool(1) as pool:
        loaded = load(str(jax_snapshots["int_ops"]), pool=pool)
        assert loaded.format is Format.SNAPSHOT
        assert loaded.snapshot is not None and loaded.snapshot.result is not None
        assert loaded.text.startswith("HloModule jit_int_ops")
        execution = run(loaded.text, loaded.snapshot.inputs, label="int_ops", pool=pool)
    assert [x.dtype.name for x in execution.inputs] == ["int32", "int8"]
    assert [x.tobytes() for x in execution.outputs] == [leaf.array.tobytes() for leaf in loaded.snapshot.result]
