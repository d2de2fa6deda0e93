"""Literals hloopt creates are printed exactly as XLA prints them (checked against XLA itself)."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from hloopt.ir import ArrayShape, Computation, Instruction, Literal, Module
from hloopt.ir.shape import TupleShape, default_layout
from hloopt.xla.bridge import canonical_in_subprocess

FLOAT_SPECIALS = [0.0, -0.0, 1.0, -2.5, 0.1, 1e-3, 3.3, 65504.0, np.inf, -np.inf]


def _values(type_name: str, rng: np.random.Generator) -> np.ndarray:
    from hloopt.ir.literal import numpy_dtype

    dtype = numpy_dtype(type_name)
    if type_name == "pred":
        return rng.integers(0, 2, 10).astype(bool)
    if type_name.startswith(("s", "u")):
        info = (
            np.iinfo(dtype)
            if dtype.itemsize >= 1 and type_name not in ("s4", "u4", "s2", "u2")
            else ml_dtypes.iinfo(dtype)
        )
        low, high = max(int(info.min), -(2**62)), min(int(info.max), 2**62)
        values = [int(info.min), int(info.max), 0, 1] + [int(v) for v in rng.integers(low, high, 6, endpoint=True)]
        return np.array(values, dtype=object).astype(dtype)
    if type_name in ("c64", "c128"):
        return (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(dtype)
    finfo = ml_dtypes.finfo(dtype)
    candidates = np.array(FLOAT_SPECIALS + list(rng.standard_normal(10) * 3), dtype=np.float64)
    candidates = candidates[(np.abs(candidates) <= float(finfo.max)) | np.isinf(candidates)]
    if not np.isinf(np.array(np.inf).astype(dtype)):
        candidates = candidates[np.isfinite(candidates)]
    if float(finfo.min) >= 0:  # unsigned exponent-only type
        candidates = np.abs(candidates[np.isfinite(candidates)]) + 0.5
    return candidates[:10].astype(dtype)


TYPES = [
    "pred",
    "s8",
    "s16",
    "s32",
    "s64",
    "u8",
    "u32",
    "u64",
    "s4",
    "u4",
    "f16",
    "bf16",
    "f32",
    "f64",
    "f8e5m2",
    "f8e4m3fn",
    "f8e4m3",
    "f8e3m4",
    "f8e4m3fnuz",
    "f8e5m2fnuz",
    "f8e8m0fnu",
    "f4e2m1fn",
    "c64",
    "c128",
]


def _module(name: str, shape: ArrayShape | TupleShape, value: object) -> str:
    module = Module(name)
    entry = module.add_computation(Computation("main", is_entry=True))
    constant = entry.append(Instruction("c", "constant", shape, literal=Literal.from_value(shape, value)))  # type: ignore[arg-type]
    entry.root = constant
    return module.to_text()


def _cases() -> list[tuple[str, str]]:
    rng = np.random.default_rng(7)
    cases = []
    for type_name in TYPES:
        values = _values(type_name, rng)
        vector = ArrayShape(type_name, (len(values),), (False,), default_layout(1))
        cases.append((_module(f"v_{type_name}", vector, values), f"{type_name}[{len(values)}]"))
        scalar = ArrayShape(type_name, (), (), default_layout(0))
        cases.append((_module(f"s_{type_name}", scalar, values[1]), f"{type_name}[]"))
    for dims in [(2, 3), (3, 1), (1, 2, 1, 2), (2, 1, 2, 1, 2)]:
        shape = ArrayShape("f32", dims, (False,) * len(dims), default_layout(len(dims)))
        values = np.arange(np.prod(dims), dtype=np.float32).reshape(dims) / 4
        cases.append((_module(f"r{len(dims)}", shape, values), f"f32{list(dims)}"))
    for type_name, bits in [
        ("f32", [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00005]),
        ("f16", [0x7E00, 0xFE00, 0x7C01]),
        ("bf16", [0x7FC0, 0xFFC0, 0x7F81]),
        ("f64", [0x7FF8000000000000, 0xFFF0000000000003]),
        ("f8e5m2", [0x7E, 0xFE, 0x7D]),
        ("f8e4m3fn", [0x7F, 0xFF]),
        ("f8e4m3", [0x7C, 0xFD]),
        ("f8e3m4", [0x78, 0xF9]),
        ("f8e4m3fnuz", [0x80]),
        ("f8e8m0fnu", [0xFF]),
    ]:
        from hloopt.ir.literal import numpy_dtype

        dtype = numpy_dtype(type_name)
        raw = np.array(bits, dtype=f"u{dtype.itemsize}").view(dtype)
        shape = ArrayShape(type_name, (len(bits),), (False,), default_layout(1))
        cases.append((_module(f"nan_{type_name}", shape, raw), f"nan {type_name}"))
    tuple_shape = TupleShape(
        (ArrayShape("s32", (), (), default_layout(0)), ArrayShape("f32", (2,), (False,), default_layout(1)))
    )
    cases.append((_module("t", tuple_shape, (np.array(3, np.int32), np.array([1.5, -2], np.float32))), "tuple"))
    return cases


@pytest.fixture(scope="module")
def printed() -> dict[str, tuple[str, object]]:
    """Each case: hloopt's text, and XLA's print of that text (or XLA's error)."""
    cases = _cases()
    xla = canonical_in_subprocess([text for text, _ in cases])
    return {name: (text, canonical) for (text, name), canonical in zip(cases, xla)}


@pytest.mark.parametrize("case", [name for _, name in _cases()])
def test_created_literal_prints_like_xla(printed: dict[str, tuple[str, object]], case: str) -> None:
    ours, xla = printed[case]
    assert isinstance(xla, str), xla
    if case == "tuple":
        # XLA elides every tuple constant as {...}; hloopt keeps the data it made.
        assert "constant({...})" in xla and "constant(( 3, {1.5, -2} ))" in ours
        return
    # XLA prints negative zero as "-0" (and reads that back as +0); hloopt writes "-0.0".
    constant = re.sub(r"-0\.0(?![0-9])", "-0", next(line for line in ours.splitlines() if "constant(" in line))
    assert constant in xla.splitlines(), (
        f"hloopt: {constant}\nxla:    {[line for line in xla.splitlines() if 'constant(' in line]}"
    )
