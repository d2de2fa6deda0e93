"""The `xla` profile: XLA `convert` as its constant folder (HloEvaluator) computes it.

The conversion is direct (no float32 hub). Between floats, ml_dtypes runs the
same C++ conversion templates XLA links, so it is used as is. Float to integer
truncates toward zero and saturates with NaN -> 0; integer to integer wraps
like a C cast. See docs/decisions.md for the places where XLA's folder, XLA's
CPU code and this profile differ (NaN bit patterns, denormal flushing).
"""

from __future__ import annotations

import numpy as np

from .dtypes import DType
from .neuron import Kernel, saturating_int_encoder
from .scratch import Scratch


def _direct(src: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    np.copyto(dst, src, casting="unsafe")


def _via_float32(src: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """For the small-float pairs numpy has no cast for: float32 holds every source value."""
    hub = scratch.get("hub", np.float32, src.size)
    np.copyto(hub, src, casting="unsafe")
    np.copyto(dst, hub, casting="unsafe")


def _to_pred(src: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """x != 0, so NaN is true."""
    np.not_equal(src, src.dtype.type(0), out=dst)


def kernel(src: DType, dst: DType) -> Kernel:
    """One chunk of XLA convert from src to dst."""
    if dst.kind == "b":
        return _to_pred
    if dst.is_int and src.kind == "f":
        return saturating_int_encoder(dst.container, np.trunc, np.float64, nan_positive=0, nan_negative=0)
    if np.can_cast(src.container, dst.container, casting="unsafe"):
        return _direct
    return _via_float32
