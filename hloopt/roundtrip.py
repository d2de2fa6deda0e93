"""``hloopt.roundtrip`` for existing callers: the round trip lives in `hloopt.xla.roundtrip`."""

from hloopt.xla.roundtrip import RoundTrip, check_many, check_roundtrip

__all__ = ["RoundTrip", "check_many", "check_roundtrip"]
