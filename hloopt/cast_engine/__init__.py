"""hloopt.cast_engine: a vectorised, bit-exact numpy model of bir::CastToNewDType.

Standalone on purpose (it imports nothing else from hloopt): `cast` converts
numpy arrays or raw bytes between the BIR dtypes with the device's rules
(profile "neuron", the default) or with XLA's `convert` semantics ("xla").
"""

from .config import DEFAULT_FP8_CONFIG, FP8ConversionConfig
from .dtypes import NAMES, ORDINALS, PROFILES, DType, Numerics, names, resolve
from .engine import cast
from .errors import CastError

__all__ = [
    "DEFAULT_FP8_CONFIG",
    "NAMES",
    "ORDINALS",
    "PROFILES",
    "CastError",
    "DType",
    "FP8ConversionConfig",
    "Numerics",
    "cast",
    "names",
    "resolve",
]
