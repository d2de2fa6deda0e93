"""The x4 containers (reading 15): lane i of fp8 x4 is byte i; lane i of fp4 x4
is bits 4i..4i+3 of a little-endian uint16, i.e. low nibble first in each byte."""

from __future__ import annotations

import numpy as np

from .scratch import Scratch


def nibble_pair_table(table16: np.ndarray) -> np.ndarray:
    """(256, 2) table: for each packed byte, the values of its low and high lane.

    One lookup per byte then yields both lanes, instead of two masked passes.
    """
    byte = np.arange(256)
    return np.ascontiguousarray(np.stack([table16[byte & 0xF], table16[byte >> 4]], axis=1))


def unpack_nibbles(pairs: np.ndarray, containers: np.ndarray, out: np.ndarray) -> None:
    """Decode packed fp4 containers through a nibble_pair_table into 4 lanes each."""
    np.take(pairs, containers.view(np.uint8), axis=0, out=out.reshape(-1, 2))


def pack_nibbles(codes: np.ndarray, containers: np.ndarray, scratch: Scratch) -> None:
    """Pack 4-bit codes (one per byte, high nibble clear) two to a byte, low lane first."""
    out = containers.view(np.uint8)
    high = scratch.get("pack_high", np.uint8, out.size)
    np.left_shift(codes[1::2], 4, out=high)
    np.bitwise_or(high, codes[0::2], out=out)
