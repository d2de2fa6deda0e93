"""npz files of a run's arrays: ``exec --inputs`` and ``compare --inputs`` read them, ``exec --save-inputs``
and ``-o`` write them."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Sequence

import numpy as np

from hloopt.arrays import ExecutionError
from hloopt.support.fileio import write_atomic

_NUMBERED = re.compile(r"(\D*)(\d+)")


def load_arrays(path: str) -> list[np.ndarray]:
    """The arrays of an npz file in input order: by number for keys like ``input3``, else file order."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise ExecutionError(f"{path}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        raise ExecutionError(f"{path}: not an npz file of arrays: {err}") from None
    numbered = [_NUMBERED.fullmatch(key) for key in arrays]
    if all(numbered) and len({m.group(1) for m in numbered if m}) == 1:
        return [arrays[m.group(0)] for m in sorted((m for m in numbered if m), key=lambda m: int(m.group(2)))]
    return list(arrays.values())


def save_arrays(path: str, prefix: str, arrays: Sequence[np.ndarray]) -> None:
    """Write ``prefix0``, ``prefix1``… atomically; bf16/fp8 arrays are stored as their raw bytes."""
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **{f"{prefix}{i}": array for i, array in enumerate(arrays)})
    write_atomic(path, buffer.getvalue())
