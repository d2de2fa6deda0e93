"""Modules and inputs the ``numerics`` tests share, from Python (`tests/xla`) and from the CLI (`tests/cli`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: The device rounds a float-to-int convert to nearest even; XLA truncates.
FLOAT_TO_INT = """HloModule float_to_int
ENTRY main {
  x = f32[4] parameter(0)
  ROOT i = s32[4] convert(x)
}
"""

#: f64 has no BIR dtype: this convert keeps XLA's semantics, and the emulation warns so.
FROM_F64 = """HloModule from_f64
ENTRY main {
  x = f64[4] parameter(0)
  ROOT y = f32[4] convert(x)
}
"""

#: Halfway values, where the two roundings of FLOAT_TO_INT part.
TIES = np.array([2.5, 3.5, -2.5, -3.5], np.float32)
