"""The opcode table: one row per HLO opcode XLA's parser knows, with every fact hloopt uses.

The rows transcribe ``HLO_OPCODE_LIST`` (``xla/hlo/ir/hlo_opcode.h``: enumerator, text
spelling, arity) and what ``xla/hlo/parser/hlo_parser.cc`` accepts per opcode
(docs: hlo-text-grammar.md §4). Validation, shape inference, the verifier and
dead-code removal read the derived sets below, computed once at import, so a
new opcode is one row and the modules cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache


class Elementwise(Enum):
    """How an elementwise opcode's result follows from its operands (NONE: not elementwise)."""

    NONE = "none"
    #: One operand; the result has its shape and element type.
    UNARY_SAME = "unary-same"
    #: One operand; a complex operand gives its part type (``abs``, ``real``, ``imag``), others their own.
    UNARY_TO_REAL = "unary-to-real"
    #: Two operands of one shape and element type; the result has them too.
    BINARY_SAME = "binary-same"
    #: The operands' dimensions with element type pred (``compare``, ``is-finite``).
    PREDICATE = "predicate"
    #: Three operands; the result has the second one's shape (``select``, ``clamp``).
    SELECT = "select"
    #: Two float operands; the result is the complex type of their type.
    COMPLEX = "complex"
    #: The operands' dimensions; the element type is the written result's (``convert``).
    CONVERT = "convert"


class OperandTypes(Enum):
    """The element types an opcode's operands may have, as the verifier checks them."""

    ANY = "any"
    INTEGER_OR_PRED = "integer-or-pred"
    INTEGER = "integer"
    FLOAT = "float"


class AsyncForm(Enum):
    """How an opcode runs asynchronously in text (hlo-text-grammar.md §8)."""

    #: ``<op>-start`` / ``-update`` / ``-done`` sugar wraps it in an async computation.
    SUGAR = "sugar"
    #: It has native start/done opcodes (``all-reduce-start``, ``send-done``…): no sugar.
    NATIVE = "native"
    #: ``async-start``, ``async-update``, ``async-done`` themselves.
    WRAPPER = "wrapper"


@dataclass(frozen=True, slots=True)
class Opcode:
    """One HLO opcode."""

    #: The text spelling (``count-leading-zeros``).
    name: str
    #: The ``HloOpcode`` enumerator (``kClz``).
    enum: str
    #: Operand count at XLA HEAD; None for variadic.
    arity: int | None
    elementwise: Elementwise = Elementwise.NONE
    operand_types: OperandTypes = OperandTypes.ANY
    #: Dead-code removal keeps it even when unused: an effect, a signature, or a callee that may have one.
    side_effect: bool = False
    #: Attributes naming called computations.
    callees: tuple[str, ...] = ()
    #: The callee whose root shape is the result and whose parameters take the operands.
    result_from: str | None = None
    async_form: AsyncForm = AsyncForm.SUGAR
    #: Attributes the parser accepts beyond `GENERIC_ATTRIBUTES`.
    attributes: frozenset[str] = frozenset()
    #: Those of `attributes` the parser refuses the instruction without ("attribute … is expected
    #: but not seen"). Rules that depend on the operands (a broadcast of a non-scalar needs
    #: ``dimensions``; a conditional's callees follow its selector) are the validator's.
    required: frozenset[str] = frozenset()


#: Attributes every instruction accepts (``ParseInstructionRhs``).
GENERIC_ATTRIBUTES: frozenset[str] = frozenset(
    [
        "sharding",
        "frontend_attributes",
        "statistics",
        "parameter_replication",
        "control-predecessors",
        "origin",
        "metadata",
        "backend_config",
    ]
)
#: Callee attributes whose value is a list of computations (``branch_computations={%a, %b}``).
COMPUTATION_LIST_ATTRIBUTES: frozenset[str] = frozenset({"branch_computations", "called_computations"})

_E = Elementwise
_T = OperandTypes
_COLLECTIVE = "replica_groups channel_id constrain_layout use_global_device_ids"
_DOT_DIMS = "lhs_batch_dims lhs_contracting_dims rhs_batch_dims rhs_contracting_dims operand_precision"
_HOST_TRANSFER = "channel_id is_host_transfer"
_ASYNC = "calls async_execution_thread"


def _op(
    enum: str,
    name: str,
    arity: int | None,
    attributes: str = "",
    *,
    elementwise: Elementwise = Elementwise.NONE,
    operand_types: OperandTypes = OperandTypes.ANY,
    side_effect: bool = False,
    callees: str = "",
    result_from: str | None = None,
    async_form: AsyncForm = AsyncForm.SUGAR,
) -> Opcode:
    """A row written like ``HLO_OPCODE_LIST``'s ``V(kAbs, "abs", 1)``; attribute names space-separated,
    a required one marked ``*`` (``"dimensions* to_apply*"``)."""
    names = attributes.split()
    return Opcode(
        name,
        enum,
        arity,
        elementwise,
        operand_types,
        side_effect,
        tuple(callees.split()),
        result_from,
        async_form,
        frozenset(key.rstrip("*") for key in names),
        frozenset(key[:-1] for key in names if key.endswith("*")),
    )


def _unary(enum: str, name: str, *, accuracy: bool = False, operand_types: OperandTypes = OperandTypes.ANY) -> Opcode:
    """An elementwise unary opcode; `accuracy` for those taking ``result_accuracy=``."""
    return _op(
        enum,
        name,
        1,
        "result_accuracy" if accuracy else "",
        elementwise=Elementwise.UNARY_SAME,
        operand_types=operand_types,
    )


def _binary(enum: str, name: str, *, operand_types: OperandTypes = OperandTypes.ANY) -> Opcode:
    return _op(enum, name, 2, elementwise=Elementwise.BINARY_SAME, operand_types=operand_types)


def _collective(
    enum: str,
    name: str,
    attributes: str,
    *,
    arity: int | None = None,
    callees: str = "",
    async_form: AsyncForm = AsyncForm.SUGAR,
) -> Opcode:
    """A collective (or one half of a native async collective): kept by dead-code removal."""
    return _op(enum, name, arity, attributes, side_effect=True, callees=callees, async_form=async_form)


ROWS: tuple[Opcode, ...] = (
    _op("kAbs", "abs", 1, elementwise=_E.UNARY_TO_REAL),
    _unary("kAcos", "acos", accuracy=True),
    _unary("kAcosh", "acosh", accuracy=True),
    _binary("kAdd", "add"),
    _op("kAddDependency", "add-dependency", 2, side_effect=True),
    _op("kAfterAll", "after-all", None, side_effect=True),
    _collective("kAllGather", "all-gather", f"dimensions* {_COLLECTIVE}", async_form=AsyncForm.NATIVE),
    _collective("kAllGatherDone", "all-gather-done", "", arity=1),
    _collective("kAllGatherStart", "all-gather-start", f"dimensions* {_COLLECTIVE}"),
    _collective(
        "kAllReduce", "all-reduce", f"to_apply* mode {_COLLECTIVE}", callees="to_apply", async_form=AsyncForm.NATIVE
    ),
    _collective("kAllReduceDone", "all-reduce-done", "", arity=1),
    _collective("kAllReduceStart", "all-reduce-start", f"to_apply* mode {_COLLECTIVE}", callees="to_apply"),
    _collective("kAllToAll", "all-to-all", "replica_groups channel_id dimensions constrain_layout"),
    _binary("kAnd", "and", operand_types=_T.INTEGER_OR_PRED),
    _unary("kAsin", "asin", accuracy=True),
    _unary("kAsinh", "asinh", accuracy=True),
    _op("kAsyncDone", "async-done", 1, _ASYNC, side_effect=True, callees="calls", async_form=AsyncForm.WRAPPER),
    _op(
        "kAsyncStart",
        "async-start",
        None,
        "calls* async_execution_thread output_to_operand_aliasing",
        side_effect=True,
        callees="calls",
        async_form=AsyncForm.WRAPPER,
    ),
    _op(
        "kAsyncUpdate",
        "async-update",
        None,
        f"{_ASYNC} output_to_operand_aliasing",
        side_effect=True,
        callees="calls",
        async_form=AsyncForm.WRAPPER,
    ),
    _binary("kAtan2", "atan2"),
    _unary("kAtanh", "atanh", accuracy=True),
    _op("kBatchNormGrad", "batch-norm-grad", 5, "epsilon* feature_index*", operand_types=_T.FLOAT),
    _op("kBatchNormInference", "batch-norm-inference", 5, "epsilon* feature_index*", operand_types=_T.FLOAT),
    _op("kBatchNormTraining", "batch-norm-training", 3, "epsilon* feature_index*", operand_types=_T.FLOAT),
    _op("kBitcast", "bitcast", 1),
    _op("kBitcastConvert", "bitcast-convert", 1),
    _op("kBroadcast", "broadcast", 1, "dimensions"),
    _op("kCall", "call", None, "to_apply* is_composite", side_effect=True, callees="to_apply", result_from="to_apply"),
    _unary("kCbrt", "cbrt", accuracy=True),
    _unary("kCeil", "ceil"),
    _op("kCholesky", "cholesky", 1, "lower"),
    _op("kClamp", "clamp", 3, elementwise=_E.SELECT),
    _unary("kClz", "count-leading-zeros", operand_types=_T.INTEGER),
    _collective("kCollectiveBroadcast", "collective-broadcast", "replica_groups channel_id has_dynamic_root"),
    _collective(
        "kCollectivePermute",
        "collective-permute",
        "source_target_pairs* channel_id slice_sizes",
        async_form=AsyncForm.NATIVE,
    ),
    _collective("kCollectivePermuteDone", "collective-permute-done", "", arity=1),
    _collective("kCollectivePermuteStart", "collective-permute-start", "source_target_pairs* channel_id slice_sizes"),
    _collective(
        "kCollectiveReduce", "collective-reduce", f"to_apply* has_dynamic_root {_COLLECTIVE}", callees="to_apply"
    ),
    _op("kCompare", "compare", 2, "direction* type order", elementwise=_E.PREDICATE),
    _op("kComplex", "complex", 2, elementwise=_E.COMPLEX),
    _op("kConcatenate", "concatenate", None, "dimensions*"),
    _op(
        "kConditional",
        "conditional",
        None,
        "true_computation false_computation branch_computations",
        side_effect=True,
        callees="true_computation false_computation branch_computations",
    ),
    _op("kConstant", "constant", 0),
    _op("kConvert", "convert", 1, elementwise=_E.CONVERT),
    _op(
        "kConvolution",
        "convolution",
        None,
        "dim_labels* window feature_group_count batch_group_count convolution_kind operand_precision sparsity_config algorithm",
    ),
    _op("kCopy", "copy", 1, elementwise=_E.UNARY_SAME, async_form=AsyncForm.NATIVE),
    _op("kCopyDone", "copy-done", 1),
    _op("kCopyStart", "copy-start", 1, "cross_program_prefetch_index"),
    _unary("kCos", "cosine", accuracy=True),
    _unary("kCosh", "cosh", accuracy=True),
    _op(
        "kCustomCall",
        "custom-call",
        None,
        """custom_call_target* window dim_labels feature_group_count batch_group_count operand_layout_constraints
        custom_call_has_side_effect to_apply called_computations output_to_operand_aliasing padding_type literal
        operand_precision schedule api_version""",
        side_effect=True,
        callees="to_apply called_computations",
    ),
    _binary("kDivide", "divide"),
    _op("kDomain", "domain", 1, "domain*"),
    _op("kDot", "dot", 2, f"{_DOT_DIMS} algorithm sparsity_config"),
    _op("kDynamicReshape", "dynamic-reshape", None),
    _op("kDynamicSlice", "dynamic-slice", None, "dynamic_slice_sizes*"),
    _op("kDynamicUpdateSlice", "dynamic-update-slice", None),
    _unary("kErf", "erf", accuracy=True),
    _unary("kExp", "exponential", accuracy=True),
    _unary("kExp2", "exp2", accuracy=True),
    _unary("kExpm1", "exponential-minus-one", accuracy=True),
    _op("kFft", "fft", 1, "fft_type* fft_length*"),
    _unary("kFloor", "floor"),
    _op("kFusion", "fusion", None, "kind* calls* output_to_operand_aliasing", callees="calls", result_from="calls"),
    _op(
        "kGather",
        "gather",
        2,
        """offset_dims* collapsed_slice_dims* start_index_map* operand_batching_dims
        start_indices_batching_dims index_vector_dim* slice_sizes* indices_are_sorted""",
    ),
    _op("kGetDimensionSize", "get-dimension-size", 1, "dimensions*"),
    _op("kGetTupleElement", "get-tuple-element", 1, "index*"),
    _op("kImag", "imag", 1, elementwise=_E.UNARY_TO_REAL),
    _op("kInfeed", "infeed", 1, "infeed_config", side_effect=True),
    _op("kIota", "iota", 0, "iota_dimension*"),
    _op("kIsFinite", "is-finite", 1, elementwise=_E.PREDICATE, operand_types=_T.FLOAT),
    _unary("kLog", "log", accuracy=True),
    _unary("kLog1p", "log-plus-one", accuracy=True),
    _unary("kLog2", "log2", accuracy=True),
    _unary("kLogistic", "logistic", accuracy=True),
    _op("kMap", "map", None, "to_apply* dimensions", callees="to_apply"),
    _binary("kMaximum", "maximum"),
    _binary("kMinimum", "minimum"),
    _binary("kMulhi", "mulhi", operand_types=_T.INTEGER),
    _binary("kMultiply", "multiply"),
    _unary("kNegate", "negate"),
    _unary("kNot", "not", operand_types=_T.INTEGER_OR_PRED),
    _op("kOptimizationBarrier", "opt-barrier", 1),
    _binary("kOr", "or", operand_types=_T.INTEGER_OR_PRED),
    _op("kOutfeed", "outfeed", 2, "outfeed_shape outfeed_config", side_effect=True),
    _op("kPad", "pad", 2, "padding*"),
    _op("kParameter", "parameter", 0, side_effect=True),
    _op("kPartitionId", "partition-id", 0),
    _unary("kPopulationCount", "popcnt", operand_types=_T.INTEGER),
    _binary("kPower", "power"),
    _collective("kRaggedAllToAll", "ragged-all-to-all", "replica_groups channel_id dimensions", arity=6),
    _op("kRaggedDot", "ragged-dot", 3, f"{_DOT_DIMS} lhs_ragged_dims rhs_group_dims"),
    _op("kReal", "real", 1, elementwise=_E.UNARY_TO_REAL),
    _op("kRecv", "recv", 1, _HOST_TRANSFER, side_effect=True, async_form=AsyncForm.NATIVE),
    _op("kRecvDone", "recv-done", 1, _HOST_TRANSFER, side_effect=True),
    _op("kReduce", "reduce", None, "dimensions* to_apply*", callees="to_apply"),
    _op(
        "kReducePrecision",
        "reduce-precision",
        1,
        "exponent_bits* mantissa_bits*",
        elementwise=_E.UNARY_SAME,
        operand_types=_T.FLOAT,
    ),
    _collective("kReduceScatter", "reduce-scatter", f"to_apply* dimensions* mode {_COLLECTIVE}", callees="to_apply"),
    _op("kReduceWindow", "reduce-window", None, "window to_apply*", callees="to_apply"),
    _binary("kRemainder", "remainder"),
    _op("kReplicaId", "replica-id", 0),
    _op("kReshape", "reshape", 1, "inferred_dimension"),
    _op("kReverse", "reverse", 1, "dimensions*"),
    _op("kRng", "rng", None, "distribution*", side_effect=True),
    _op("kRngBitGenerator", "rng-bit-generator", 1, "algorithm*"),
    _op("kRngGetAndUpdateState", "rng-get-and-update-state", 0, "delta*", side_effect=True),
    _unary("kRoundNearestAfz", "round-nearest-afz"),
    _unary("kRoundNearestEven", "round-nearest-even"),
    _unary("kRsqrt", "rsqrt", accuracy=True),
    _op("kScaledDot", "scaled-dot", 4, f"{_DOT_DIMS} algorithm"),
    _op("kScan", "scan", None, "to_apply* dimensions* num_carries* is_reverse is_associative", callees="to_apply"),
    _op(
        "kScatter",
        "scatter",
        None,
        """update_window_dims* inserted_window_dims* scatter_dims_to_operand_dims*
        input_batching_dims scatter_indices_batching_dims index_vector_dim* to_apply* indices_are_sorted
        unique_indices""",
        callees="to_apply",
    ),
    _op("kSelect", "select", 3, elementwise=_E.SELECT),
    _op("kSelectAndScatter", "select-and-scatter", 3, "select* scatter* window", callees="select scatter"),
    _op("kSend", "send", 2, _HOST_TRANSFER, side_effect=True, async_form=AsyncForm.NATIVE),
    _op("kSendDone", "send-done", 1, _HOST_TRANSFER, side_effect=True),
    _op("kSetDimensionSize", "set-dimension-size", 2, "dimensions*"),
    _binary("kShiftLeft", "shift-left", operand_types=_T.INTEGER),
    _binary("kShiftRightArithmetic", "shift-right-arithmetic", operand_types=_T.INTEGER),
    _binary("kShiftRightLogical", "shift-right-logical", operand_types=_T.INTEGER),
    _op("kShuffle", "shuffle", 1, "dimensions* mode* shifts"),
    _unary("kSign", "sign"),
    _unary("kSin", "sine", accuracy=True),
    _unary("kSinh", "sinh", accuracy=True),
    _op("kSlice", "slice", 1, "slice*"),
    _op("kSort", "sort", None, "dimensions* to_apply* is_stable", callees="to_apply"),
    _unary("kSqrt", "sqrt", accuracy=True),
    _op("kStochasticConvert", "stochastic-convert", 2, elementwise=_E.CONVERT),
    _binary("kSubtract", "subtract"),
    _unary("kTan", "tan", accuracy=True),
    _unary("kTanh", "tanh", accuracy=True),
    _op("kTopK", "topk", 1, "k* largest is_stable"),
    _op("kTranspose", "transpose", 1, "dimensions*"),
    _op("kTriangularSolve", "triangular-solve", 2, "left_side lower unit_diagonal transpose_a"),
    _op("kTuple", "tuple", None),
    _op("kWhile", "while", 1, "condition* body*", side_effect=True, callees="condition body", result_from="body"),
    _binary("kXor", "xor", operand_types=_T.INTEGER_OR_PRED),
)

#: Syntax that only newer jaxlib parsers take, with the first jaxlib version that does (probed
#: on 0.10.2, 0.11.2 and 0.12.0.1). hloopt reads all of it, since each version's XLA prints its
#: own; an older jaxlib then refuses the module, and the bridge says which construct and why.
#: Opcode keys are the opcode's spelling, attribute keys ``"<opcode> <attribute>"``.
JAXLIB_SINCE: dict[str, tuple[int, int]] = {
    "collective-reduce": (0, 11),
    "exp2": (0, 12),
    "log2": (0, 12),
    "shuffle": (0, 12),
    "compare order": (0, 11),
    "topk is_stable": (0, 11),
    "collective-broadcast has_dynamic_root": (0, 11),
    "convolution algorithm": (0, 11),
    "dot sparsity_config": (0, 12),
    "async-update output_to_operand_aliasing": (0, 11),
    "compact get-tuple-element operands (%x#1)": (0, 11),
    "origin trees separated by commas": (0, 11),
    'origin call hierarchies (["name"])': (0, 11),
}

#: Each row by its text spelling.
BY_NAME: dict[str, Opcode] = {row.name: row for row in ROWS}


def _where(*kinds: Elementwise) -> frozenset[str]:
    return frozenset(row.name for row in ROWS if row.elementwise in kinds)


def _typed(rule: OperandTypes) -> frozenset[str]:
    return frozenset(row.name for row in ROWS if row.operand_types is rule)


#: Every opcode spelling (async sugar aside).
OPCODES: frozenset[str] = frozenset(BY_NAME)
UNARY_SAME: frozenset[str] = _where(Elementwise.UNARY_SAME)
UNARY_TO_REAL: frozenset[str] = _where(Elementwise.UNARY_TO_REAL)
BINARY_SAME: frozenset[str] = _where(Elementwise.BINARY_SAME)
PREDICATES: frozenset[str] = _where(Elementwise.PREDICATE)
SELECTS: frozenset[str] = _where(Elementwise.SELECT)
#: Opcodes whose result shape follows from their operands' shapes alone.
ELEMENTWISE_INFERRED: frozenset[str] = (
    UNARY_SAME | UNARY_TO_REAL | BINARY_SAME | PREDICATES | SELECTS | _where(Elementwise.COMPLEX)
)
#: Every elementwise opcode (the converts too, whose element type is their own): XLA runs each on operands of
#: its result's dimensions (HLO has no implicit broadcast).
ELEMENTWISE: frozenset[str] = ELEMENTWISE_INFERRED | _where(Elementwise.CONVERT)
INTEGER_OR_PRED_OPERANDS: frozenset[str] = _typed(OperandTypes.INTEGER_OR_PRED)
INTEGER_OPERANDS: frozenset[str] = _typed(OperandTypes.INTEGER)
FLOAT_OPERANDS: frozenset[str] = _typed(OperandTypes.FLOAT)
#: What dead-code removal never removes, used or not.
SIDE_EFFECT_OPCODES: frozenset[str] = frozenset(row.name for row in ROWS if row.side_effect)
#: The callee whose root gives the result shape: ``{"call": "to_apply", "fusion": "calls", "while": "body"}``.
RESULT_FROM: dict[str, str] = {row.name: row.result_from for row in ROWS if row.result_from is not None}
#: Every attribute naming called computations.
CALLEE_ATTRIBUTES: frozenset[str] = frozenset(name for row in ROWS for name in row.callees)
#: Callee attributes whose value names one computation (``to_apply=%add``).
COMPUTATION_ATTRIBUTES: frozenset[str] = CALLEE_ATTRIBUTES - COMPUTATION_LIST_ATTRIBUTES
#: Opcodes with native start/done pairs: no ``<op>-start`` sugar for these.
NATIVE_ASYNC: frozenset[str] = frozenset(row.name for row in ROWS if row.async_form is AsyncForm.NATIVE)
ASYNC_WRAPPERS: frozenset[str] = frozenset(row.name for row in ROWS if row.async_form is AsyncForm.WRAPPER)
_SUGAR_BASES = frozenset(row.name for row in ROWS if row.async_form is AsyncForm.SUGAR)
_ASYNC_SUFFIXES = ("-start", "-update", "-done")


def base_opcode(opcode: str) -> tuple[str, str | None]:
    """Split async sugar: ``custom-call-start`` → (``custom-call``, ``-start``); KeyError if unknown."""
    if opcode in BY_NAME:
        return opcode, None
    for suffix in _ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            base = opcode[: -len(suffix)]
            if base in _SUGAR_BASES:
                return base, suffix
    raise KeyError(opcode)


@cache
def allowed_attributes(opcode: str) -> frozenset[str]:
    """The attribute names the parser accepts on `opcode` (async sugar included); KeyError if unknown."""
    base, suffix = base_opcode(opcode)
    if suffix is None:
        return GENERIC_ATTRIBUTES | BY_NAME[base].attributes
    if suffix == "-start":
        return GENERIC_ATTRIBUTES | BY_NAME[base].attributes | ASYNC_OWN_ATTRIBUTES
    return GENERIC_ATTRIBUTES | {"async_execution_thread"}


@cache
def required_attributes(opcode: str) -> frozenset[str]:
    """The attributes the parser requires on `opcode`: a sugar start needs its wrapped op's."""
    base, suffix = base_opcode(opcode)
    return BY_NAME[base].required if suffix in (None, "-start") else frozenset()


#: Attributes an async sugar start takes for itself, not for the op it wraps (a ``-done`` takes
#: only the thread); the passes split a start's attributes by them when they unwrap it.
ASYNC_OWN_ATTRIBUTES: frozenset[str] = frozenset({"async_execution_thread", "output_to_operand_aliasing"})
