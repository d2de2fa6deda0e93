"""FP8ConversionConfig: the two knobs the device FP8 encoders consult."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FP8ConversionConfig:
    """The 2-byte config word of bir::CastToNewDType (byte 0 saturate, byte 1 NaN).

    These are the entire configurable numeric surface of the device cast: there
    is deliberately no rounding mode, no stochastic rounding and no flush-to-zero.
    The default (word 0x0001) is the exported global FP8ConvConfig: saturate on.
    """

    saturate: bool = True
    nan_suppress: bool = False

    @classmethod
    def from_word(cls, word: int) -> FP8ConversionConfig:
        """Decode the packed WORD; each byte is tested as a C bool (non-zero = set)."""
        if not 0 <= word <= 0xFFFF:
            raise ValueError(f"FP8ConversionConfig word out of range: {word:#x}")
        return cls(saturate=bool(word & 0xFF), nan_suppress=bool(word >> 8))

    @property
    def word(self) -> int:
        """The packed WORD as the binary stores it."""
        return int(self.saturate) | int(self.nan_suppress) << 8


DEFAULT_FP8_CONFIG = FP8ConversionConfig()
