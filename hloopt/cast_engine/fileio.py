"""Reading the CLI's .npy and raw .bin files, and encoding its outputs as them."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from .dtypes import BY_NAME, DType
from .errors import CastError

NPY_SUFFIX = ".npy"


def read_input(path: Path, src: DType | None) -> tuple[np.ndarray | bytes, DType]:
    """Load `path` and settle its source dtype.

    .npy files may omit the source dtype when their numpy dtype names one
    (ml_dtypes types are saved by numpy as opaque void records, so those need
    it); any other file is raw little-endian bytes and needs it.
    """
    if path.suffix != NPY_SUFFIX:
        if src is None:
            raise CastError(f"{path}: raw input needs --from")
        return path.read_bytes(), src
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CastError(f"{path}: not a readable .npy file ({exc})") from None
    if array.dtype.kind == "V":  # how numpy stores ml_dtypes arrays
        if src is None:
            raise CastError(f"{path}: the .npy dtype {array.dtype} does not name a dtype; pass --from")
        array = array.view(f"u{array.dtype.itemsize}")
    if src is None:
        src = BY_NAME.get(array.dtype.name)
        if src is None:
            raise CastError(f"{path}: cannot infer a dtype from {array.dtype}; pass --from")
    return np.ascontiguousarray(array), src


def encode_output(path: Path, result: np.ndarray | bytes | bytearray | memoryview, dst: DType) -> bytes:
    """The bytes of `path`'s output: .npy for a .npy path, raw little-endian elements otherwise.

    Only the bytes: writing them (atomically, through to a device or FIFO, a symlink's
    target) is the caller's, so the cast engine needs nothing outside itself.
    """
    if path.suffix == NPY_SUFFIX:
        array = result if isinstance(result, np.ndarray) else np.frombuffer(result, dst.container)
        return _npy_bytes(array)
    return result.tobytes() if isinstance(result, np.ndarray) else bytes(result)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()
