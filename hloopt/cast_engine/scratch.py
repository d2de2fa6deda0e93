"""Reusable per-call work buffers, so the chunk loop allocates nothing."""

from __future__ import annotations

import numpy as np

CHUNK_LANES = 1 << 17
"""Lanes per chunk: 128K float32 is 512 KiB, so the hub and a couple of index
buffers stay in a 2 MiB L2 while every numpy pass streams over them."""


class Scratch:
    """Named buffers of at most one chunk, created on first use and then reused."""

    def __init__(self, lanes: int) -> None:
        self._lanes = max(1, min(lanes, CHUNK_LANES))
        self._buffers: dict[str, np.ndarray] = {}

    def get(self, name: str, dtype: type | np.dtype, n: int) -> np.ndarray:
        """The first n elements of buffer `name` (one dtype per name)."""
        buf = self._buffers.get(name)
        if buf is None:
            buf = self._buffers[name] = np.empty(self._lanes, dtype)
        return buf[:n]
