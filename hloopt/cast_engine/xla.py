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
    """Through float32: exact for the small-float pairs numpy has no cast for."""
    hub = scratch.get("hub", np.float32, src.size)
    np.copyto(hub, src, casting="unsafe")
    np.copyto(dst, hub, casting="unsafe")


def _f64_via_odd_float32(src: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """float64 -> a float narrower than float32, rounded once as XLA does.

    ml_dtypes casts float64 to bfloat16 and the 8/4-bit floats through float32,
    which rounds twice, while the folder converts directly. Rounding to float32
    *to odd* first (truncate, then set the last bit if anything was dropped)
    keeps the sticky information, and float32 has at least two more bits than
    every narrower float, so the second rounding is then exactly the direct one.
    """
    hub = scratch.get("hub", np.float32, src.size)
    np.copyto(hub, src, casting="unsafe")
    bits = hub.view(np.uint32)
    widened = scratch.get("widened", np.float64, src.size)
    np.copyto(widened, hub)
    away = np.greater(np.abs(widened), np.abs(src), out=scratch.get("away", np.bool_, src.size))
    np.subtract(bits, away, out=bits, casting="unsafe")  # step back toward zero by one ulp
    np.copyto(widened, hub)
    inexact = np.not_equal(widened, src, out=away)
    inexact &= ~np.isnan(src)
    np.bitwise_or(bits, inexact, out=bits, casting="unsafe")
    np.copyto(dst, hub, casting="unsafe")


def _int_via_odd_float32(src: np.ndarray, dst: np.ndarray, scratch: Scratch) -> None:
    """A 32/64-bit integer -> a float narrower than float32, rounded once as XLA does.

    ml_dtypes goes through float32, which rounds wide integers twice
    (2^30 + 2^22 + 1 -> bfloat16 ties to 2^30 instead of rounding up). The
    magnitude is rounded to odd in integer arithmetic, keeping at least 23
    significant bits (float64's exponent may overstate the bit length by one),
    which float32 holds exactly and which leaves the one real rounding to the
    final cast, as for float64 sources.
    """
    magnitude = np.abs(src.astype(np.int64 if src.dtype.kind == "i" else np.uint64)).view(np.uint64)
    shift = np.maximum(np.frexp(magnitude.astype(np.float64))[1] - 24, 0).astype(np.uint64)
    kept = magnitude >> shift
    dropped = magnitude != kept << shift
    odd = (kept | dropped.astype(np.uint64)) << shift
    hub = scratch.get("hub", np.float32, src.size)
    np.copyto(hub, odd, casting="unsafe")  # at most 24 significant bits: exact
    np.negative(hub, out=hub, where=src < 0)
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
    if dst.kind == "f" and dst.container.itemsize < 4:
        if src.name == "float64":
            return _f64_via_odd_float32
        if src.is_int and src.container.itemsize >= 4:
            return _int_via_odd_float32
    if np.can_cast(src.container, dst.container, casting="unsafe"):
        return _direct
    return _via_float32
