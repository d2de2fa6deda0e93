"""The dtype table: BIR names and ordinals, array storage types, profile membership.

One row per dtype keeps every fact about it (ordinal, container, lanes, format)
in one place, so lookups by name, by BIR ordinal or by XLA's short HLO name all
land on the same object and can be compared with `is`.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import index as as_index
from typing import Literal, TypeAlias

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import minifloat as mf
from .errors import CastError

NEURON = "neuron"
XLA = "xla"
PROFILES = (NEURON, XLA)
#: Whose cast rules a convert follows, the profiles by name: XLA's ``convert``, or the Neuron device's
#: ``CastToNewDType``. The one type for fold-constant-converts' option, execution and ``hloopt.jax``;
#: in the order choices are listed to users.
Numerics: TypeAlias = Literal["xla", "neuron"]
_BOTH = frozenset(PROFILES)


@dataclass(frozen=True, eq=False)
class DType:
    """One dtype. `container` is the numpy dtype arrays of it use.

    For the x4 containers one array element is a whole container (uint32 for
    four fp8 lanes, uint16 for four fp4 lanes); `lane` is the scalar type of one
    lane. float32r is stored as float32 because it shares the fp32 bit layout.
    """

    name: str
    ordinal: int | None
    container: np.dtype
    lane: np.dtype
    lanes: int = 1
    fmt: mf.MiniFloat | None = None
    profiles: frozenset[str] = _BOTH
    hlo_name: str | None = None
    kind: str = "f"  # numpy kind of a lane: "i", "u", "b" or "f"

    @property
    def itemsize(self) -> int:
        """Bytes per container: the stride the BIR SIZE_LUT holds."""
        return self.container.itemsize

    @property
    def is_int(self) -> bool:
        return self.kind in ("i", "u")

    def __repr__(self) -> str:
        return f"DType({self.name})"


def _d(
    name: str,
    ordinal: int | None,
    container: npt.DTypeLike,
    *,
    lane: npt.DTypeLike | None = None,
    lanes: int = 1,
    fmt: mf.MiniFloat | None = None,
    profiles: frozenset[str] = _BOTH,
    hlo: str | None = None,
) -> DType:
    cdt = np.dtype(container)
    ldt = np.dtype(lane) if lane is not None else cdt
    kind = ldt.kind if ldt.kind in "iub" else "f"
    return DType(name, ordinal, cdt, ldt, lanes, fmt, profiles, hlo, kind)


_NEURON_ONLY = frozenset({NEURON})
_XLA_ONLY = frozenset({XLA})

ALL: tuple[DType, ...] = (
    _d("uint8", 0, np.uint8, hlo="u8"),
    _d("int8", 1, np.int8, hlo="s8"),
    _d("float4_e2m1fn_x4", 2, np.uint16, lane=ml_dtypes.float4_e2m1fn, lanes=4, fmt=mf.E2M1FN, profiles=_NEURON_ONLY),
    _d("float8_e3m4", 3, ml_dtypes.float8_e3m4, fmt=mf.E3M4, hlo="f8e3m4"),
    _d("float8_e4m3", 4, ml_dtypes.float8_e4m3, fmt=mf.E4M3, hlo="f8e4m3"),
    _d("float8_e4m3fn", 5, ml_dtypes.float8_e4m3fn, fmt=mf.E4M3FN, hlo="f8e4m3fn"),
    _d("float8_e8m0fnu", 6, ml_dtypes.float8_e8m0fnu, hlo="f8e8m0fnu"),
    _d("float8_e5m2", 7, ml_dtypes.float8_e5m2, fmt=mf.E5M2, hlo="f8e5m2"),
    _d("float8_e4m3fn_x4", 8, np.uint32, lane=ml_dtypes.float8_e4m3fn, lanes=4, fmt=mf.E4M3FN, profiles=_NEURON_ONLY),
    _d("float8_e5m2_x4", 9, np.uint32, lane=ml_dtypes.float8_e5m2, lanes=4, fmt=mf.E5M2, profiles=_NEURON_ONLY),
    _d("uint16", 10, np.uint16, hlo="u16"),
    _d("int16", 11, np.int16, hlo="s16"),
    _d("bfloat16", 12, ml_dtypes.bfloat16, hlo="bf16"),
    _d("float16", 13, np.float16, hlo="f16"),
    _d("uint32", 14, np.uint32, hlo="u32"),
    _d("int32", 15, np.int32, hlo="s32"),
    _d("float32", 16, np.float32, hlo="f32"),
    _d("float32r", 17, np.float32, profiles=_NEURON_ONLY),
    _d("uint64", 18, np.uint64, hlo="u64"),
    _d("int64", 19, np.int64, hlo="s64"),
    _d("float4_e2m1fn", None, ml_dtypes.float4_e2m1fn, fmt=mf.E2M1FN, hlo="f4e2m1fn"),
    _d("float64", None, np.float64, profiles=_XLA_ONLY, hlo="f64"),
    _d("pred", None, np.bool_, profiles=_XLA_ONLY, hlo="pred"),
    _d("float8_e4m3fnuz", None, ml_dtypes.float8_e4m3fnuz, profiles=_XLA_ONLY, hlo="f8e4m3fnuz"),
    _d("float8_e5m2fnuz", None, ml_dtypes.float8_e5m2fnuz, profiles=_XLA_ONLY, hlo="f8e5m2fnuz"),
    _d("float8_e4m3b11fnuz", None, ml_dtypes.float8_e4m3b11fnuz, profiles=_XLA_ONLY, hlo="f8e4m3b11fnuz"),
)

BY_NAME: dict[str, DType] = {d.name: d for d in ALL} | {d.hlo_name: d for d in ALL if d.hlo_name}
BY_ORDINAL: dict[int, DType] = {d.ordinal: d for d in ALL if d.ordinal is not None}
NAMES: tuple[str, ...] = tuple(d.name for d in ALL)
ORDINALS: dict[str, int] = {d.name: d.ordinal for d in ALL if d.ordinal is not None}


def names(profile: str) -> tuple[str, ...]:
    """The canonical dtype names one profile accepts, in table order."""
    return tuple(d.name for d in ALL if profile in d.profiles)


def resolve(spec: str | int | DType, profile: str) -> DType:
    """Look up a dtype by name, HLO short name or BIR ordinal, for one profile."""
    if isinstance(spec, DType):
        dtype = spec
    elif isinstance(spec, str):
        dtype = BY_NAME.get(spec)
        if dtype is None:
            raise CastError(f"unknown dtype {spec!r}; known: {', '.join(names(profile))}")
    elif isinstance(spec, bool):
        raise CastError(f"unknown dtype {spec!r}: a bool is not a dtype ordinal")
    else:
        try:
            ordinal = as_index(spec)
        except TypeError:
            raise CastError(f"unknown dtype {spec!r}: expected a name or a BIR ordinal") from None
        dtype = BY_ORDINAL.get(ordinal)
        if dtype is None:
            raise CastError(f"unknown dtype ordinal {ordinal}; BIR ordinals are 0..19")
    if profile not in dtype.profiles:
        raise CastError(f"dtype {dtype.name} is not available in the {profile!r} profile")
    return dtype
