"""Modules and inputs the ``numerics`` tests share, from Python (`tests/xla`) and from the CLI (`tests/cli`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hlo_text import hlo

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


#: A ``while`` whose condition is always true: what a time limit must stop (in bf16, so that the passes
#: change it and ``--verify-numerics`` runs it).
FOREVER = hlo(
    """
    HloModule forever
    cond {
      c = bf16[] parameter(0)
      ROOT t = pred[] constant(true)
    }
    body {
      b = bf16[] parameter(0)
      one = bf16[] constant(1)
      ROOT n = bf16[] add(b, one)
    }
    ENTRY e {
      z = bf16[] constant(0)
      ROOT w = bf16[] while(z), condition=cond, body=body
    }
    """
)
