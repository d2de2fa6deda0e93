"""Every literal hloopt prints reads back in XLA as the same bits: every pattern of every narrow float type.

One module per type holds all its bit patterns as one constant printed by hloopt;
XLA parses it and the CPU returns the constant, whose bits must be the patterns.
XLA's CPU has no f6 types: for those, XLA's canonical print is read back by
hloopt (XLA's printer is not lossless everywhere, e8m0's 2^-127 prints as
5.9e-39, which is why the executed route is the judge where it exists). XLA's
print elides constants of more than a few elements, so that module holds rows
of ROW elements.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hlo_text import hlo

from hloopt.ir.element_types import BY_NAME, FLOAT_TYPES, numpy_dtype
from hloopt.ir.literal import Literal
from hloopt.ir.shape import ArrayShape

bridge = pytest.importorskip("hloopt.xla.bridge")

NARROW = sorted(t for t in FLOAT_TYPES if BY_NAME[t].bits <= 16)
NOT_ON_CPU = {"f6e2m3fn", "f6e3m2fn"}


def patterns(element_type: str) -> tuple[np.ndarray, np.ndarray]:
    """(bit patterns, values) of every code of the type, in storage containers."""
    dtype = numpy_dtype(element_type)
    codes = np.arange(1 << BY_NAME[element_type].bits, dtype=f"u{dtype.itemsize}")
    return codes, codes.view(dtype)


ROW = 8


def constant(element_type: str, values: np.ndarray) -> str:
    """hloopt's print of `values` as a constant's literal."""
    return Literal.from_value(ArrayShape(element_type, (values.size,)), values).text


def module(element_type: str, values: np.ndarray) -> str:
    return hlo(f"""
        HloModule m

        ENTRY e {{
          ROOT c = {element_type}[{values.size}] constant({constant(element_type, values)})
        }}
        """)


def rows_module(element_type: str, values: np.ndarray) -> str:
    rows = [values[i : i + ROW] for i in range(0, values.size, ROW)]
    lines = [
        f"  c{i} = {element_type}[{row.size}] constant({constant(element_type, row)})" for i, row in enumerate(rows)
    ]
    shapes = ", ".join(f"{element_type}[{row.size}]" for row in rows)
    names = ", ".join(f"c{i}" for i in range(len(rows)))
    body = "\n".join(lines)
    return f"HloModule m\n\nENTRY e {{\n{body}\n  ROOT t = ({shapes}) tuple({names})\n}}\n"


def test_every_narrow_float_type_is_covered() -> None:
    assert {"f16", "bf16", "f8e8m0fnu", "f4e2m1fn", "f8e4m3fnuz", "f8e5m2", "f6e2m3fn"} <= set(NARROW)


@pytest.mark.parametrize("element_type", sorted(set(NARROW) - NOT_ON_CPU))
def test_xla_holds_the_printed_bits(element_type: str) -> None:
    codes, values = patterns(element_type)
    (held,) = bridge.execute(module(element_type, values), [])
    got = np.asarray(held).reshape(-1).view(codes.dtype)
    wrong = np.flatnonzero(got != codes)
    assert not wrong.size, [(hex(int(codes[i])), hex(int(got[i]))) for i in wrong[:8]]


@pytest.mark.parametrize("element_type", sorted(NOT_ON_CPU))
def test_xla_reads_the_printed_values(element_type: str) -> None:
    """No CPU kernels: XLA's own print of what it parsed, read by hloopt, gives the patterns."""
    codes, values = patterns(element_type)
    printed = bridge.canonical(rows_module(element_type, values))
    texts = re.findall(r"constant\((\{[^}]*\})\)", printed)
    back = [Literal(ArrayShape(element_type, (len(text.split(",")),)), text=text).value for text in texts]
    assert np.array_equal(np.concatenate([np.asarray(row) for row in back]).view(codes.dtype), codes)


def test_smallest_e8m0_prints_with_the_digits_it_needs() -> None:
    smallest = np.zeros(1, np.uint8).view(numpy_dtype("f8e8m0fnu"))
    assert Literal.from_value(ArrayShape("f8e8m0fnu", (1,)), smallest).text == "{5.877e-39}"


def test_e8m0_decimals_near_its_smallest_value_read_as_in_xla() -> None:
    """XLA stores every double in (2^-127, 2^-126) as 2^-126, whatever ml_dtypes rounds it to (0.7: the nearer)."""
    texts = ["2.9e-39", "5.87747e-39", "5.877e-39", "5.8774719e-39", "5.9e-39", "8.8e-39", "8.9e-39", "1.76e-38"]
    literal = "{" + ", ".join(texts) + "}"
    text = hlo(f"""
        HloModule m

        ENTRY e {{
          ROOT c = f8e8m0fnu[{len(texts)}] constant({literal})
        }}
        """)
    (held,) = bridge.execute(text, [])
    ours = Literal(ArrayShape("f8e8m0fnu", (len(texts),)), text=literal).value
    assert (
        np.asarray(ours).view(np.uint8).tolist() == np.asarray(held).view(np.uint8).tolist() == [0, 0, 0, 1, 1, 1, 1, 1]
    )
