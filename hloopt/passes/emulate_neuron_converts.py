"""emulate-neuron-converts: every convert between BIR dtypes computes what the device's cast computes.

XLA's ``convert`` and the device's ``bir::CastToNewDType`` (spec 002) disagree on FP8
overflow and underflow, NaN codes, float→int rounding, e8m0 and the f32 hub of integer
casts. This pass replaces each convert whose source and destination both have a BIR dtype
by HLO that computes ``hloopt.cast_engine.cast(..., profile="neuron")`` bit for bit, in
the device's two stages: decode to an f32 hub, then encode.

Both stages end in one *native* convert, fed only values on which XLA's convert and the
device agree; the device's own rules are applied around it with selects:

- decode: integers, bf16, fp8/fp4 convert natively (RNE, payloads kept, exact); f16 too,
  except that XLA quiets a signalling NaN, so NaN lanes are rebuilt with the device's
  integer rebias; e8m0 is its raw byte (bitcast-convert to u8, then convert).
- encode: the hub is first rewritten where the device departs from XLA: NaN becomes the
  f32 value of the device's NaN code, underflow below the flush exponent a signed zero,
  overflow ±max (a clamp) or the value of the overflow code; integers are rounded to
  nearest even first (s64/u64 truncate, as the device does) and NaN becomes ±Inf, which
  XLA's saturating convert takes to MAX/MIN. The native convert then computes the rest.

The fp8/fp4/f16/bf16 substitutes and thresholds are read from the cast engine's rules
(``minifloat.encode_rule``, ``decode_table``, the NaN constants), not written out here.
That XLA's convert agrees with the device on what is left is proven, for jaxlib 0.10.2's
CPU backend, on every 8/16-bit pattern and all 2^32 f32 patterns (the tests and
``benchmarks/sweep_emulated_f32.py``).

The converts this pass emits carry ``frontend_attributes={neuron_cast="lowered"}``, and a
convert carrying ``neuron_cast`` is left alone, so the pass is idempotent. A convert with
a type outside the BIR list keeps XLA's semantics, and so does every stochastic-convert
(the device has none, spec 003): each (opcode, source, destination) is reported once in
the warnings. Constants are not touched: a convert of a constant is emulated like any
other, and XLA folds the emulation at compile time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cache, cached_property

import numpy as np

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.cast_engine import CastError, DType, FP8ConversionConfig, neuron, resolve
from hloopt.cast_engine import minifloat as mf
from hloopt.errors import HloError
from hloopt.ir.attribute_values import ComparisonDirection, FrontendAttributes, IntList
from hloopt.ir.attributes import MapSyntaxError, with_frontend_attribute
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import numpy_dtype
from hloopt.ir.literal import Literal
from hloopt.ir.module import AttributeValue, Instruction, Module
from hloopt.ir.shape import ArrayShape, Layout
from hloopt.passes.base import OpExpanderPass, PassResult, known_shape

#: The frontend attribute that marks the converts this pass emits (already device-exact).
MARKER_KEY = "neuron_cast"
MARKER_VALUE = "lowered"
SIGN = 0x80000000
F32_INF = 0x7F800000


def bir_dtype(element_type: str) -> DType | None:
    """The cast engine's dtype for an HLO element type the device has; None for f64, pred, fnuz, s4…"""
    try:
        return resolve(element_type, "neuron")
    except CastError:
        return None


def is_lowered(instruction: Instruction) -> bool:
    """A convert carrying the marker: emitted by this pass, so fed only values on which XLA and the device agree."""
    value = instruction.attributes.get("frontend_attributes")
    return isinstance(value, FrontendAttributes) and MARKER_KEY in value


def _types(instruction: Instruction, shapes: ShapeResolver) -> tuple[str, str] | None:
    """(source, destination) element types of a convert or stochastic-convert between arrays."""
    if not instruction.operands:
        return None
    result, operand = shapes(instruction), shapes(instruction.operands[0])
    if isinstance(result, ArrayShape) and isinstance(operand, ArrayShape):
        return operand.element_type, result.element_type
    return None


def bir_pair(instruction: Instruction, shapes: ShapeResolver) -> tuple[DType, DType] | None:
    """The (source, destination) BIR dtypes of a convert the pass replaces; None for anything else."""
    if instruction.opcode != "convert" or is_lowered(instruction):
        return None
    types = _types(instruction, shapes)
    if types is None or types[0] == types[1]:
        return None
    source, target = bir_dtype(types[0]), bir_dtype(types[1])
    return None if source is None or target is None else (source, target)


# --------------------------------------------------------------------------- the device's rules, as f32 values


def _f32_bits(values: np.ndarray) -> tuple[int, int]:
    """The f32 bit patterns of a (positive, negative) pair of values."""
    bits = np.asarray(values, np.float32).view(np.uint32)
    return int(bits[0]), int(bits[1])


_SIGNED_NANS = np.array([mf.F32_NAN, mf.F32_NAN | SIGN], np.uint32).view(np.float32)
_SIGNED_INFS = np.array([np.inf, -np.inf], np.float32)


@dataclass(frozen=True)
class _MiniFloatRules:
    """What an fp8/fp4 encoder does beyond XLA's RNE convert, as f32 values XLA converts exactly."""

    #: Clamp to ±this first when overflow saturates to ±max-finite.
    clamp: float | None
    #: Inputs of at least this magnitude overflow to `overflow_bits`; None when XLA's own Inf is right.
    overflow_from: float | None
    overflow_bits: tuple[int, int]
    #: Nonzero inputs below this magnitude become signed zero (the early flush); None: RNE to zero.
    flush_below: float | None
    nan_bits: tuple[int, int]


@cache
def minifloat_rules(fmt: mf.MiniFloat, config: FP8ConversionConfig) -> _MiniFloatRules:
    """Read from `encode_rule`: the codes of ±NaN and ±Inf (which overflows), decoded back to f32."""
    table = mf.decode_table(fmt)
    nan_codes = mf.encode_rule(fmt, _SIGNED_NANS, config)
    overflow_codes = mf.encode_rule(fmt, _SIGNED_INFS, config)
    sign_code = 1 << (fmt.width - 1)
    saturates = [int(c) for c in overflow_codes] == [fmt.max_code, sign_code | fmt.max_code]
    to_inf = fmt.has_inf and [int(c) for c in overflow_codes] == [fmt.inf_code, sign_code | fmt.inf_code]
    return _MiniFloatRules(
        clamp=fmt.max_value if saturates else None,
        overflow_from=None if saturates or to_inf else _first_overflow(fmt, config),
        overflow_bits=_f32_bits(table[overflow_codes]),
        flush_below=None if fmt.flush_exponent is None else 2.0**fmt.flush_exponent,
        nan_bits=_f32_bits(table[nan_codes]),
    )


def _first_overflow(fmt: mf.MiniFloat, config: FP8ConversionConfig) -> float:
    """The smallest f32 above max-finite that the rule does not round to max-finite (rounding is monotonic)."""
    low, high = int(np.float32(fmt.max_value).view(np.uint32)), F32_INF
    while high - low > 1:  # invariant: low encodes to max_code, high does not
        middle = (low + high) // 2
        code = mf.encode_rule(fmt, np.array([middle], np.uint32).view(np.float32), config)[0]
        low, high = (middle, high) if code == fmt.max_code else (low, middle)
    return float(np.array([high], np.uint32).view(np.float32)[0])


# --------------------------------------------------------------------------- building the lowering


@dataclass
class _Emitter:
    """Instructions of one lowering: the result's dimensions and layout, one broadcast per constant."""

    builder: Builder
    result: ArrayShape
    #: Frontend attributes of the emitted converts: the original convert's plus the marker.
    stamp: FrontendAttributes
    _constants: dict[tuple[str, bytes], Instruction] = field(default_factory=dict[tuple[str, bytes], Instruction])

    def like(self, element_type: str) -> ArrayShape:
        """The result shape itself for its own type; for others its layout without the tail (E(n), tiles)."""
        if element_type == self.result.element_type:
            return self.result
        layout = self.result.layout and Layout(self.result.layout.minor_to_major)
        return ArrayShape(element_type, self.result.dims, self.result.dynamic, layout)

    def op(
        self,
        opcode: str,
        element_type: str,
        *operands: Instruction,
        attributes: dict[str, AttributeValue] | None = None,
    ) -> Instruction:
        return self.builder.add(opcode, self.like(element_type), operands, attributes)

    def convert(self, value: Instruction, element_type: str) -> Instruction:
        return self.builder.add("convert", self.like(element_type), [value], {"frontend_attributes": self.stamp})

    def bitcast(self, value: Instruction, element_type: str) -> Instruction:
        return self.op("bitcast-convert", element_type, value)

    def constant(self, element_type: str, value: int | float) -> Instruction:
        """A scalar broadcast to the shape; an int is the bit pattern for a float type."""
        dtype = numpy_dtype(element_type)
        if isinstance(value, int) and dtype.kind == "f":
            array = np.array(value, f"u{dtype.itemsize}").view(dtype)
        else:
            array = np.array(value, dtype)
        key = (element_type, array.tobytes())
        if key not in self._constants:
            scalar = self.builder.constant(Literal.from_value(ArrayShape(element_type), array))
            self._constants[key] = self.op("broadcast", element_type, scalar, attributes={"dimensions": IntList(())})
        return self._constants[key]

    def compare(self, a: Instruction, b: Instruction, direction: ComparisonDirection) -> Instruction:
        return self.op("compare", "pred", a, b, attributes={"direction": direction})

    def select(self, where: Instruction, then: Instruction, otherwise: Instruction) -> Instruction:
        """Every select of the lowering picks between f32 values (the hub and its substitutes)."""
        return self.op("select", "f32", where, then, otherwise)


@dataclass(frozen=True)
class _Hub:
    """The f32 hub and what its source guarantees, so the encoder emits only the rules that can apply."""

    value: Instruction
    may_be_nan: bool
    #: Every value is an integer (integer and e8m0 sources): no rounding, no underflow.
    integral: bool


def decode(emit: _Emitter, value: Instruction, source: DType) -> _Hub:
    """Stage A (readings 1, 11–13 of docs/decisions.md)."""
    if source.name == "float32":
        return _Hub(value, may_be_nan=True, integral=False)
    if source.is_int:
        return _Hub(emit.convert(value, "f32"), may_be_nan=False, integral=True)
    if source.name == "float8_e8m0fnu":
        return _Hub(emit.convert(emit.bitcast(value, "u8"), "f32"), may_be_nan=False, integral=True)
    if source.name == "float16":
        return _Hub(_decode_f16(emit, value), may_be_nan=True, integral=False)
    # bf16, fp8, fp4: XLA widens exactly as the device does, NaN payloads and signs included.
    has_nan = source.fmt is None or source.fmt.nan_code is not None
    return _Hub(emit.convert(value, "f32"), may_be_nan=has_nan, integral=False)


def _decode_f16(emit: _Emitter, value: Instruction) -> Instruction:
    """XLA's widening, except NaN lanes: XLA quiets a signalling NaN, the device's integer rebias keeps it.

    For a NaN half h the device gives sign | ((h << 13) & 0x0FFFE000) + 0x70000000; with h
    sign-extended to 32 bits that word is (h << 13) | 0x70000000, for either sign.
    """
    native = emit.convert(value, "f32")
    extended = emit.convert(emit.bitcast(value, "s16"), "s32")
    shifted = emit.op("shift-left", "s32", extended, emit.constant("s32", 13))
    rebiased = emit.op("or", "s32", shifted, emit.constant("s32", 0x70000000))
    return emit.select(emit.compare(native, native, ComparisonDirection.NE), emit.bitcast(rebiased, "f32"), native)


#: Integer destinations the device truncates instead of rounding (reading 10).
_TRUNCATING = frozenset({"int64", "uint64"})
#: f32 values whose native conversion gives the device's f16 / bf16 NaN (readings 2 and 8).
_F16_NAN_BITS = (int(neuron.f16_table()[neuron.F16_NAN]), int(neuron.f16_table()[neuron.F16_NAN | 0x8000]))
_BF16_NAN_BITS = (neuron.BF16_NAN << 16, neuron.BF16_NAN << 16)
#: ±Inf: XLA's saturating float→int convert takes them to MAX and MIN, the device's NaN results (reading 9).
_INF_BITS = (F32_INF, F32_INF | SIGN)
_ZERO_BITS = (0, SIGN)
#: The mantissa bits cast_fp32_to_fp32r drops (spec 002).
F32R_DROPPED = 12


class _Encoder:
    """Stage B on one hub; its NaN test, magnitude and sign-dependent substitutes are made once."""

    def __init__(self, emit: _Emitter, hub: _Hub, config: FP8ConversionConfig) -> None:
        self.emit = emit
        self.hub = hub
        self.config = config
        self._signed: dict[tuple[int, int], Instruction] = {}

    @cached_property
    def nan(self) -> Instruction:
        return self.emit.compare(self.hub.value, self.hub.value, ComparisonDirection.NE)

    @cached_property
    def magnitude(self) -> Instruction:
        return self.emit.op("abs", "f32", self.hub.value)

    @cached_property
    def sign(self) -> Instruction:
        """The hub's sign bit, as a u32 word."""
        return self.emit.op("and", "u32", self.emit.bitcast(self.hub.value, "u32"), self.emit.constant("u32", SIGN))

    def by_sign(self, bits: tuple[int, int]) -> Instruction:
        """The f32 with bit pattern bits[0] where the hub's sign is clear, bits[1] where it is set."""
        if bits not in self._signed:
            positive, negative = bits
            if positive == negative:
                self._signed[bits] = self.emit.constant("f32", positive)
            else:
                assert negative == positive | SIGN, f"{bits} differ in more than the sign"
                word = (
                    self.sign
                    if positive == 0
                    else self.emit.op("or", "u32", self.sign, self.emit.constant("u32", positive))
                )
                self._signed[bits] = self.emit.bitcast(word, "f32")
        return self._signed[bits]

    def where(self, condition: Instruction, bits: tuple[int, int], value: Instruction) -> Instruction:
        return self.emit.select(condition, self.by_sign(bits), value)

    def without_nan(self, bits: tuple[int, int], value: Instruction) -> Instruction:
        """`value` with the hub's NaN lanes replaced (when the source can hold a NaN at all)."""
        return self.where(self.nan, bits, value) if self.hub.may_be_nan else value

    def encode(self, target: DType, element_type: str) -> Instruction:
        emit, value = self.emit, self.hub.value
        if target.name == "float32":
            return value
        if target.name == "float32r":
            return self._f32r()
        if target.name == "float16":
            return emit.convert(self.without_nan(_F16_NAN_BITS, value), element_type)
        if target.name == "bfloat16":
            return emit.convert(self.without_nan(_BF16_NAN_BITS, value), element_type)
        if target.fmt is not None:
            return emit.convert(self._minifloat(target.fmt), element_type)
        # Integers, and e8m0, which the device encodes as uint8 (reading 12).
        if not self.hub.integral and target.name not in _TRUNCATING:
            value = emit.op("round-nearest-even", "f32", value)
        value = self.without_nan(_INF_BITS, value)
        if target.is_int:
            return emit.convert(value, element_type)
        return emit.bitcast(emit.convert(value, "u8"), element_type)

    def _f32r(self) -> Instruction:
        """Reading 7 as HLO: RNE dropping the low 12 mantissa bits, in integer arithmetic on the bits."""
        emit = self.emit
        bits = emit.bitcast(self.hub.value, "u32")
        shifted = emit.op("shift-right-logical", "u32", bits, emit.constant("u32", F32R_DROPPED))
        odd = emit.op("and", "u32", shifted, emit.constant("u32", 1))
        half = emit.constant("u32", (1 << (F32R_DROPPED - 1)) - 1)
        biased = emit.op("add", "u32", emit.op("add", "u32", bits, odd), half)
        kept = emit.op("and", "u32", biased, emit.constant("u32", -(1 << F32R_DROPPED) & 0xFFFFFFFF))
        return self.without_nan((mf.F32_NAN, mf.F32_NAN), emit.bitcast(kept, "f32"))

    def _minifloat(self, fmt: mf.MiniFloat) -> Instruction:
        """The hub rewritten so that XLA's RNE convert gives the device's code (readings 3–6, 14)."""
        emit, rules, value = self.emit, minifloat_rules(fmt, self.config), self.hub.value
        if rules.clamp is not None:
            low, high = emit.constant("f32", -rules.clamp), emit.constant("f32", rules.clamp)
            value = emit.op("clamp", "f32", low, value, high)
        if rules.overflow_from is not None:
            over = emit.compare(self.magnitude, emit.constant("f32", rules.overflow_from), ComparisonDirection.GE)
            value = self.where(over, rules.overflow_bits, value)
        if rules.flush_below is not None and not self.hub.integral:
            under = emit.compare(self.magnitude, emit.constant("f32", rules.flush_below), ComparisonDirection.LT)
            value = self.where(under, _ZERO_BITS, value)
        return self.without_nan(rules.nan_bits, value)


# --------------------------------------------------------------------------- the pass


def device_cast(
    builder: Builder, value: Instruction, shape: ArrayShape, target: str, config: FP8ConversionConfig
) -> Instruction:
    """HLO computing CastToNewDType of `value` (of `shape`, a BIR dtype) to `target`, a cast-engine dtype name:
    the one way to reach a dtype without an HLO element type (``float32r``, in an f32 container)."""
    source, dtype = resolve(shape.element_type, "neuron"), resolve(target, "neuron")
    element_type = dtype.hlo_name or "f32"
    result = ArrayShape(element_type, shape.dims, shape.dynamic, shape.layout)
    marker = with_frontend_attribute(None, MARKER_KEY, MARKER_VALUE)
    emit = _Emitter(builder, result, marker)
    return _Encoder(emit, decode(emit, value, source), config).encode(dtype, element_type)


def _stamp(convert: Instruction) -> FrontendAttributes:
    """The original's frontend attributes plus the marker, for every convert the lowering emits."""
    try:
        return with_frontend_attribute(convert.attributes.get("frontend_attributes"), MARKER_KEY, MARKER_VALUE)
    except MapSyntaxError as err:
        raise HloError(f"%{convert.name}: cannot read its frontend attributes: {err}") from None


@dataclass(frozen=True)
class EmulateNeuronConverts(OpExpanderPass):
    """Each convert between two BIR dtypes becomes HLO computing the device's CastToNewDType."""

    #: The FP8ConversionConfig (spec 002): overflow clamps to ±max-finite; NaN (and e4m3fn overflow) → ±0.
    saturate: bool = True
    nan_suppress: bool = False

    @property
    def config(self) -> FP8ConversionConfig:
        return FP8ConversionConfig(self.saturate, self.nan_suppress)

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        return bir_pair(instruction, shapes) is not None

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        result = known_shape(shapes, instruction)
        pair = bir_pair(instruction, shapes)
        # Earlier expansions replace instructions by ones of the same shape, so the match still holds.
        assert isinstance(result, ArrayShape) and pair is not None, f"%{instruction.name} no longer matches"
        source, target = pair
        emit = _Emitter(builder, result, _stamp(instruction))
        hub = decode(emit, instruction.operands[0], source)
        return _Encoder(emit, hub, self.config).encode(target, result.element_type)

    def run_on_module(self, module: Module) -> PassResult:
        result = super().run_on_module(module)
        return replace(result, warnings=result.warnings + kept_semantics(module))


def kept_semantics(module: Module) -> tuple[str, ...]:
    """One warning per (opcode, source, destination) that keeps XLA's semantics: a type without a BIR
    dtype, or a stochastic-convert (spec 003: the device has no stochastic rounding)."""
    shapes = ShapeResolver(module)
    counts: Counter[tuple[str, str, str]] = Counter()
    first: dict[tuple[str, str, str], Instruction] = {}
    for computation in module.computations:
        for instruction in computation.instructions:
            types = _types(instruction, shapes) if instruction.opcode in ("convert", "stochastic-convert") else None
            if types is None:
                continue
            key = (instruction.opcode, *types)
            has_bir = bir_dtype(types[0]) is not None and bir_dtype(types[1]) is not None
            if instruction.opcode == "stochastic-convert" or (types[0] != types[1] and not has_bir):
                counts[key] += 1
                first.setdefault(key, instruction)
    return tuple(_warning(key, count, first[key]) for key, count in counts.items())


def _warning(key: tuple[str, str, str], count: int, first: Instruction) -> str:
    opcode, source, target = key
    if opcode == "stochastic-convert":
        why = "the device has no stochastic rounding (spec 003)"
    else:
        missing = [t for t in (source, target) if bir_dtype(t) is None]
        why = f"{' and '.join(missing)} {'have' if len(missing) > 1 else 'has'} no BIR dtype"
    where = f"%{first.name}" if count == 1 else f"{count} instructions, first %{first.name}"
    return f"{opcode} {source}→{target} keeps XLA's semantics ({where}): {why}"
