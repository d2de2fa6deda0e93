"""The attribute-kind table: for each instruction attribute, the kind of value XLA's parser reads it
into (``hlo_parser.cc``'s ``AttrTy``), per opcode where one name means two things.

The parser reads the kinds in `TYPED` into values of `attribute_values` once, at parse time; the others
stay verbatim text (or callee and control-predecessor references, which assembly resolves).
`tests/ir/test_attribute_kinds.py` holds the table to every attribute `opcodes` allows.
"""

from __future__ import annotations

from enum import Enum


class Kind(Enum):
    """What an attribute's value is (the ``AttrTy`` it is read as)."""

    INT = "kInt64"
    BOOL = "kBool"
    FLOAT = "kFloat"
    STRING = "kString"
    #: A string or JSON config hloopt passes through as written (``backend_config``).
    CONFIG = "kString, kept as written"
    INT_LIST = "kBracedInt64List"
    INT_LIST_LIST = "kBracedInt64ListList"
    WINDOW = "kWindow"
    CONVOLUTION_DIMENSION_NUMBERS = "kConvolutionDimensionNumbers"
    PRECISION_LIST = "kPrecisionList"
    COMPARISON_DIRECTION = "kComparisonDirection"
    COMPARISON_TYPE = "kComparisonType"
    FFT_TYPE = "kFftType"
    DISTRIBUTION = "kDistribution"
    FUSION_KIND = "kFusionKind"
    METADATA = "kMetadata"
    FRONTEND_ATTRIBUTES = "kFrontendAttributes"
    SHARDING = "kSharding"
    PADDING = "kPaddingConfig"
    SLICE_RANGES = "kSliceRanges"
    REPLICA_GROUPS = "kBracedInt64ListList or an iota list"
    ALIASING = "kInstructionAliasing"
    ALGORITHM = "kAlgorithm"
    OTHER = "a text kind hloopt keeps verbatim"
    COMPUTATION = "kHloComputation"
    COMPUTATION_LIST = "kBracedHloComputationList"
    INSTRUCTION_LIST = "kInstructionList"


#: The kinds read into typed values; every other kind stays as written.
TYPED: frozenset[Kind] = frozenset(
    {
        Kind.INT,
        Kind.BOOL,
        Kind.FLOAT,
        Kind.STRING,
        Kind.INT_LIST,
        Kind.WINDOW,
        Kind.CONVOLUTION_DIMENSION_NUMBERS,
        Kind.PRECISION_LIST,
        Kind.COMPARISON_DIRECTION,
        Kind.COMPARISON_TYPE,
        Kind.FFT_TYPE,
        Kind.DISTRIBUTION,
        Kind.FUSION_KIND,
        Kind.METADATA,
        Kind.FRONTEND_ATTRIBUTES,
        Kind.SHARDING,
        Kind.PADDING,
        Kind.SLICE_RANGES,
        Kind.REPLICA_GROUPS,
        Kind.ALIASING,
    }
)


def _each(kind: Kind, names: str) -> dict[str, Kind]:
    return dict.fromkeys(names.split(), kind)


#: Each attribute name's kind.
KINDS: dict[str, Kind] = {
    **_each(
        Kind.INT,
        "index channel_id batch_group_count feature_group_count delta exponent_bits mantissa_bits feature_index"
        " index_vector_dim inferred_dimension iota_dimension k num_carries cross_program_prefetch_index",
    ),
    **_each(
        Kind.BOOL,
        "constrain_layout custom_call_has_side_effect indices_are_sorted is_host_transfer is_reverse is_stable"
        " largest left_side lower unique_indices unit_diagonal use_global_device_ids has_dynamic_root"
        " is_associative is_composite",
    ),
    **_each(Kind.FLOAT, "epsilon"),
    **_each(
        Kind.INT_LIST,
        "dimensions collapsed_slice_dims dynamic_slice_sizes fft_length input_batching_dims inserted_window_dims"
        " lhs_batch_dims lhs_contracting_dims lhs_ragged_dims offset_dims operand_batching_dims rhs_batch_dims"
        " rhs_contracting_dims rhs_group_dims scatter_dims_to_operand_dims scatter_indices_batching_dims"
        " start_index_map start_indices_batching_dims update_window_dims slice_sizes",
    ),
    **_each(Kind.INT_LIST_LIST, "source_target_pairs"),
    **_each(Kind.WINDOW, "window"),
    **_each(Kind.CONVOLUTION_DIMENSION_NUMBERS, "dim_labels"),
    **_each(Kind.PRECISION_LIST, "operand_precision"),
    **_each(Kind.COMPARISON_DIRECTION, "direction"),
    **_each(Kind.COMPARISON_TYPE, "type"),
    **_each(Kind.FFT_TYPE, "fft_type"),
    **_each(Kind.DISTRIBUTION, "distribution"),
    **_each(Kind.FUSION_KIND, "kind"),
    **_each(Kind.METADATA, "metadata"),
    **_each(Kind.FRONTEND_ATTRIBUTES, "frontend_attributes"),
    **_each(Kind.SHARDING, "sharding"),
    **_each(Kind.PADDING, "padding"),
    **_each(Kind.SLICE_RANGES, "slice"),
    **_each(Kind.REPLICA_GROUPS, "replica_groups"),
    **_each(Kind.ALIASING, "output_to_operand_aliasing"),
    **_each(Kind.ALGORITHM, "algorithm"),
    **_each(Kind.STRING, "custom_call_target async_execution_thread convolution_kind"),
    **_each(Kind.CONFIG, "backend_config infeed_config outfeed_config literal"),
    **_each(
        Kind.OTHER,
        "api_version domain mode order origin outfeed_shape operand_layout_constraints padding_type"
        " parameter_replication result_accuracy schedule shifts sparsity_config statistics transpose_a",
    ),
    **_each(Kind.COMPUTATION, "to_apply body condition calls select scatter true_computation false_computation"),
    **_each(Kind.COMPUTATION_LIST, "branch_computations called_computations"),
    **_each(Kind.INSTRUCTION_LIST, "control-predecessors"),
}

#: Where one opcode reads a name as another kind than `KINDS` says.
BY_OPCODE: dict[tuple[str, str], Kind] = {
    ("collective-permute", "slice_sizes"): Kind.INT_LIST_LIST,
    ("collective-permute-start", "slice_sizes"): Kind.INT_LIST_LIST,
}


#: Each header attribute's kind (``HloModule m, is_scheduled=true, …``; ``entry_computation_layout`` is modelled
#: apart, as a program layout). The aliasing and donor lists, the per-output boolean lists and the recovery table
#: stay verbatim: nothing in hloopt reads them.
MODULE_KINDS: dict[str, Kind] = {
    **_each(Kind.BOOL, "is_scheduled alias_passthrough_params"),
    **_each(Kind.INT, "num_partitions replica_count"),
    **_each(Kind.FRONTEND_ATTRIBUTES, "frontend_attributes"),
    **_each(
        Kind.OTHER,
        "input_output_alias buffer_donor allow_spmd_sharding_propagation_to_parameters"
        " allow_spmd_sharding_propagation_to_output origin_recovery_table",
    ),
}


def kind_of(opcode: str, name: str) -> Kind:
    """The kind of attribute `name` on `opcode` (OTHER for a name the table does not know)."""
    return BY_OPCODE.get((opcode, name)) or KINDS.get(name, Kind.OTHER)
