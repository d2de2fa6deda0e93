"""`cast`: input checks, the identity short-cut, and the chunk loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

import numpy as np

from . import neuron, xla
from .config import DEFAULT_FP8_CONFIG, FP8ConversionConfig
from .dtypes import NEURON, PROFILES, XLA, DType, resolve
from .errors import CastError
from .scratch import CHUNK_LANES, Scratch

Bytes = bytes | bytearray | memoryview
Data = np.ndarray | Bytes


@overload
def cast(
    data: np.ndarray, src: str | int, dst: str | int, fp8_config: FP8ConversionConfig | None = None, profile: str = ...
) -> np.ndarray: ...
@overload
def cast(
    data: Bytes, src: str | int, dst: str | int, fp8_config: FP8ConversionConfig | None = None, profile: str = ...
) -> Bytes: ...
def cast(
    data: Data,
    src: str | int,
    dst: str | int,
    fp8_config: FP8ConversionConfig | None = None,
    profile: str = NEURON,
) -> Data:
    """Convert `data` from dtype `src` to dtype `dst`.

    `data` is a C-contiguous numpy array (of the source's storage dtype, or of
    an unsigned integer type of the same width holding raw bit patterns) or a
    bytes-like object of little-endian elements; the result has the same form
    (bytes-like input gives `bytes`). When src == dst the input object comes
    back unchanged, before anything is validated, as the device aliases it.
    `fp8_config` applies to the neuron profile's fp8/fp4 encoders; None means
    the device default (saturate on, NaN byte clear).
    """
    if src == dst:
        return data
    if profile not in PROFILES:
        raise CastError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")
    source = resolve(src, profile)
    target = resolve(dst, profile)
    if source is target:
        return data
    if profile == XLA:
        if fp8_config is not None:
            raise CastError("fp8_config applies only to the neuron profile; XLA convert has no such knob")
        kernel = xla.kernel(source, target)
    else:
        # Callers without a type checker pass anything: the check is for them.
        if fp8_config is not None and not isinstance(fp8_config, FP8ConversionConfig):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise CastError(f"fp8_config must be an FP8ConversionConfig, not {type(fp8_config).__name__}")
        kernel = neuron.kernel(source, target, fp8_config or DEFAULT_FP8_CONFIG)
    flat, rebuild = _flatten(data, source, target)
    lanes = flat.size * source.lanes
    out = np.empty(lanes // target.lanes, target.container)
    with np.errstate(all="ignore"):  # NaN and overflow are handled explicitly
        _run(kernel, flat, out, source.lanes, target.lanes)
    return rebuild(out)


def _run(
    kernel: Callable[[np.ndarray, np.ndarray, Scratch], None],
    src: np.ndarray,
    out: np.ndarray,
    src_lanes: int,
    dst_lanes: int,
) -> None:
    """Feed the kernel chunk by chunk; CHUNK_LANES is a multiple of 4 lanes."""
    lanes = src.size * src_lanes
    scratch = Scratch(lanes)
    for start in range(0, lanes, CHUNK_LANES):
        stop = min(start + CHUNK_LANES, lanes)
        kernel(src[start // src_lanes : stop // src_lanes], out[start // dst_lanes : stop // dst_lanes], scratch)


def _flatten(data: Data, src: DType, dst: DType) -> tuple[np.ndarray, Callable[[np.ndarray], Data]]:
    """A 1-D view of the source containers and how to shape the result like the input."""
    if isinstance(data, np.ndarray):
        return _flatten_array(data, src, dst)
    if isinstance(data, (bytes, bytearray, memoryview)):  # pyright: ignore[reportUnnecessaryIsInstance]  # untyped callers
        view = memoryview(data)
        if not view.c_contiguous:
            raise CastError("input buffer is not contiguous")
        if view.nbytes % src.itemsize:
            raise CastError(
                f"input length {view.nbytes} bytes is not a multiple of the {src.name} element size {src.itemsize}"
            )
        flat = np.frombuffer(view.cast("B"), dtype=src.container.newbyteorder("<"))
        _check_whole_containers(flat.size * src.lanes, dst)
        return flat, lambda out: out.astype(out.dtype.newbyteorder("<"), copy=False).tobytes()
    raise CastError(f"expected a numpy array or bytes, not {type(data).__name__}")


def _flatten_array(data: np.ndarray, src: DType, dst: DType) -> tuple[np.ndarray, Callable[[np.ndarray], Data]]:
    given = data.dtype
    if not given.isnative:
        raise CastError(f"array dtype {given} is not in native byte order")
    raw_bits = given.kind == "u" and given.itemsize == src.itemsize
    if given != src.container and not raw_bits:
        raise CastError(
            f"array dtype {given} does not hold {src.name} (expected {src.container} or uint{8 * src.itemsize})"
        )
    if not data.flags.c_contiguous:
        raise CastError("array is not C-contiguous; pass np.ascontiguousarray(data)")
    shape = data.shape
    if src.lanes != dst.lanes:
        if not shape:
            raise CastError(
                f"a 0-d array cannot be cast between {src.name} and {dst.name}: x4 lanes run along the last axis"
            )
        lanes = shape[-1] * src.lanes
        _check_whole_containers(lanes, dst)
        shape = (*shape[:-1], lanes // dst.lanes)
    return data.reshape(-1).view(src.container), lambda out: out.reshape(shape)


def _check_whole_containers(lanes: int, dst: DType) -> None:
    if lanes % dst.lanes:
        raise CastError(f"{lanes} lanes do not fill whole {dst.name} containers ({dst.lanes} lanes each)")
