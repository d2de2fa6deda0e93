"""Typed attribute values (hloopt/ir/attribute_values.py, read by hloopt/text/attribute_reader.py).

Each kind is read from text into its value once, at parse time, and prints back byte for byte as it was
written. A value prints as XLA prints it (`canonical_text`): XLA is the judge, through its own parser and
printer in a worker, for every enum member, every field of a window, each dimension-number form and
the metadata and frontend-attribute maps; the corpus holds every dimension-number form its modules use.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import pytest

from hloopt import HloError, parse
from hloopt.ir.attribute_kinds import TYPED, Kind
from hloopt.ir.attribute_values import (
    Aliasing,
    Bool,
    ComparisonDirection,
    ComparisonType,
    ConvolutionDimensionNumbers,
    FftType,
    Float,
    FrontendAttributes,
    FusionKind,
    Int,
    IntList,
    Iota,
    Metadata,
    PaddingConfig,
    PaddingDimension,
    Precision,
    PrecisionList,
    RandomDistribution,
    ReplicaGroups,
    Sharding,
    SliceRanges,
    String,
    TupleSharding,
    Window,
    WindowDimension,
    is_true,
)
from hloopt.ir.module import Instruction
from hloopt.text.attribute_reader import read_value
from hloopt.xla.bridge import canonical_in_subprocess

_V = TypeVar("_V")

_ENUMS = {
    Kind.COMPARISON_DIRECTION: ComparisonDirection,
    Kind.COMPARISON_TYPE: ComparisonType,
    Kind.FFT_TYPE: FftType,
    Kind.DISTRIBUTION: RandomDistribution,
    Kind.FUSION_KIND: FusionKind,
}


@pytest.mark.parametrize("kind, member", [(kind, member) for kind, enum in _ENUMS.items() for member in enum], ids=str)
def test_every_enum_member_reads_as_itself(kind: Kind, member: ComparisonDirection) -> None:
    assert read_value(kind, member.value) is member
    assert member.to_text() == member.value


def test_a_direction_is_read_in_any_case_as_xla_reads_it() -> None:
    assert read_value(Kind.COMPARISON_DIRECTION, "ge") is ComparisonDirection.GE


#: Each kind's written forms and the values they read into.
_WRITTEN: list[tuple[Kind, str, object]] = [
    (Kind.INT, "0", Int(0)),
    (Kind.INT, "-3", Int(-3)),
    (Kind.STRING, '"__cublas$gemm"', String("__cublas$gemm")),
    (Kind.STRING, '"a\\"b\\\\c\\n\\\'"', String("a\"b\\c\n'")),
    (Kind.INT_LIST, "{}", IntList(())),
    (Kind.INT_LIST, "{1,0,2}", IntList((1, 0, 2))),
    (Kind.INT_LIST, "{ 1, /*x*/ 0 }", IntList((1, 0))),
    (Kind.PRECISION_LIST, "{}", PrecisionList(())),
    (Kind.PRECISION_LIST, "{high,default}", PrecisionList((Precision.HIGH, Precision.DEFAULT))),
    (Kind.WINDOW, "{}", Window(())),
    (Kind.WINDOW, "{size=3}", Window((WindowDimension(3),))),
    (Kind.WINDOW, "{size=2x3 pad=0_1x2_3}", Window((WindowDimension(2, 1, 0, 1), WindowDimension(3, 1, 2, 3)))),
    (
        Kind.WINDOW,
        "{size=3x1 stride=2x1 lhs_dilate=1x2 rhs_dilate=3x1 rhs_reversal=1x0}",
        Window((WindowDimension(3, 2, 0, 0, 1, 3, True), WindowDimension(1, 1, 0, 0, 2, 1, False))),
    ),
    (
        Kind.CONVOLUTION_DIMENSION_NUMBERS,
        "b01f_01io->b01f",
        ConvolutionDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2)),
    ),
    (Kind.CONVOLUTION_DIMENSION_NUMBERS, "bf_io->bf", ConvolutionDimensionNumbers(0, 1, (), 0, 1, (), 0, 1, ())),
    (
        Kind.METADATA,
        '{op_type="a" op_name="b\\"c" source_line=3 profile_type={1,2}}',
        Metadata((("op_type", '"a"'), ("op_name", '"b\\"c"'), ("source_line", "3"), ("profile_type", "{1,2}"))),
    ),
    (
        Kind.FRONTEND_ATTRIBUTES,
        '{b="1",a={"k": {"j": "}"}}}',
        FrontendAttributes((("a", '{"k": {"j": "}"}}'), ("b", '"1"'))),
    ),
    (Kind.BOOL, "true", Bool(True)),
    (Kind.BOOL, "false", Bool(False)),
    (Kind.BOOL, "/*c*/ true", Bool(True)),
    (Kind.FLOAT, "0.001", Float(0.001)),
    (Kind.FLOAT, "1e-05", Float(1e-5)),
    (Kind.PADDING, "0_0", PaddingConfig((PaddingDimension(0, 0),))),
    (Kind.PADDING, "-1_2_0x3_0_1", PaddingConfig((PaddingDimension(-1, 2), PaddingDimension(3, 0, 1)))),
    (Kind.SLICE_RANGES, "{}", SliceRanges(())),
    (Kind.SLICE_RANGES, "{[0:4:1], [2:8:3],[1:2]}", SliceRanges(((0, 4, 1), (2, 8, 3), (1, 2, 1)))),
    (Kind.REPLICA_GROUPS, "{}", ReplicaGroups()),
    (Kind.REPLICA_GROUPS, "{{0,1},{2,3}}", ReplicaGroups(((0, 1), (2, 3)))),
    (Kind.REPLICA_GROUPS, "{ {0, 2}, {1,3} }", ReplicaGroups(((0, 2), (1, 3)))),
    (Kind.REPLICA_GROUPS, "[2,2]<=[4]", ReplicaGroups(iota=Iota((2, 2), (4,)))),
    (Kind.REPLICA_GROUPS, "[2,2]<=[2,2]T(1,0)", ReplicaGroups(iota=Iota((2, 2), (2, 2), (1, 0)))),
    (Kind.ALIASING, "{}", Aliasing(())),
    (Kind.ALIASING, "{{0}: (1, {}), {1, 2}:(0,{3})}", Aliasing((((0,), 1, ()), ((1, 2), 0, (3,))))),
    (Kind.SHARDING, "{replicated}", Sharding("replicated")),
    (Kind.SHARDING, "{maximal device=3}", Sharding("maximal", 3)),
    (Kind.SHARDING, "{manual}", Sharding("manual")),
    (Kind.SHARDING, "{unknown shard_as 2}", Sharding("unknown", shard_group=("shard_as", 2))),
    (Kind.SHARDING, "{devices=[2,2]0,1,2,3}", Sharding(tiles=(2, 2), devices=(0, 1, 2, 3))),
    (Kind.SHARDING, "{devices=[4]<=[2,2]T(1,0)}", Sharding(tiles=(4,), iota=Iota((4,), (2, 2), (1, 0)))),
    (
        Kind.SHARDING,
        "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
        Sharding(tiles=(2, 1, 2), devices=(0, 1, 2, 3), last_tile_dim_replicate=True),
    ),
    (
        Kind.SHARDING,
        '{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated} metadata={op_name="a"}}',
        Sharding(
            tiles=(2, 2, 2),
            iota=Iota((2, 2, 2), (8,)),
            last_tile_dims=("manual", "replicated"),
            metadata=(Metadata((("op_name", '"a"'),)),),
        ),
    ),
    (
        Kind.SHARDING,
        '{maximal device=0 metadata={{op_name="a"}, {op_type="b"}}}',
        Sharding("maximal", 0, metadata=(Metadata((("op_name", '"a"'),)), Metadata((("op_type", '"b"'),)))),
    ),
    (Kind.SHARDING, "{}", TupleSharding(())),
    (
        Kind.SHARDING,
        "{{replicated},{devices=[2]0,1}}",
        TupleSharding((Sharding("replicated"), Sharding(tiles=(2,), devices=(0, 1)))),
    ),
]


@pytest.mark.parametrize("kind, text, value", _WRITTEN)
def test_each_kind_reads_into_its_value_and_prints_as_written(kind: Kind, text: str, value: object) -> None:
    read = read_value(kind, text)
    assert read == value
    assert read.to_text() == text  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", sorted(TYPED, key=str), ids=str)
def test_every_cut_of_a_text_reads_or_stays_text(kind: Kind) -> None:
    """Each prefix of each written form (a reader is never given one validation let through, but a gap between
    the two must not hang or raise): a value, or the text itself."""
    texts = [text for k, text, _ in _WRITTEN if k is kind] + [m.value for m in _ENUMS.get(kind, ())]
    assert texts
    for text in texts:
        for end in range(len(text) + 1):
            read = read_value(kind, text[:end])
            assert read == text[:end] or not isinstance(read, str)


def test_metadata_xla_does_not_print_is_kept() -> None:
    """XLA's print leaves out ``stack_frame_id``; a value made by a pass keeps it (after XLA's fields)
    rather than lose it."""
    metadata = Metadata((("stack_frame_id", "2"), ("op_name", '"x"'), ("profile_type", "{1}"), ("op_type", '""')))
    assert metadata.to_text() == '{op_name="x" profile_type={1} stack_frame_id=2}'


def test_every_typed_kind_has_a_case() -> None:
    """The exhaustive list of kinds the reader models: a new one needs its cases above."""
    assert {
        Kind.INT,
        Kind.STRING,
        Kind.INT_LIST,
        Kind.PRECISION_LIST,
        Kind.WINDOW,
        Kind.CONVOLUTION_DIMENSION_NUMBERS,
        Kind.METADATA,
        Kind.FRONTEND_ATTRIBUTES,
        Kind.BOOL,
        Kind.FLOAT,
        Kind.PADDING,
        Kind.SLICE_RANGES,
        Kind.REPLICA_GROUPS,
        Kind.ALIASING,
        Kind.SHARDING,
        *_ENUMS,
    } == TYPED


def test_text_no_reader_takes_stays_text() -> None:
    """Validation refuses what XLA refuses; a gap between it and a reader can never change a print."""
    assert read_value(Kind.INT_LIST, "{1,2") == "{1,2"
    assert read_value(Kind.CONVOLUTION_DIMENSION_NUMBERS, "0f_0io->0f") == "0f_0io->0f"
    assert read_value(Kind.PRECISION_LIST, "{packed_nibble}") == "{packed_nibble}"  # jaxlib 0.10 refuses it
    assert read_value(Kind.SHARDING, "{mesh[a=2]}") == "{mesh[a=2]}"  # a mesh sharding is not modelled
    assert read_value(Kind.SHARDING, "{maximal}") == "{maximal}"
    assert read_value(Kind.SHARDING, "{replicated manual}") == "{replicated manual}"
    assert read_value(Kind.SHARDING, "{devices=[2]0,1 unreduced}") == "{devices=[2]0,1 unreduced}"
    assert read_value(Kind.REPLICA_GROUPS, "{{0,1}{2}}") == "{{0,1}{2}}"
    assert read_value(Kind.BOOL, "True") == "True"
    assert read_value(Kind.STRING, '"\\101"') == '"\\101"'  # an octal escape


def test_a_module_holds_typed_values_and_prints_as_it_was_written() -> None:
    text = (
        "HloModule m\n\nENTRY %e (p: f32[2,2]) -> pred[2,2] {\n"
        '  %p = f32[2,2]{1,0} parameter(0), metadata={op_type="x"  op_name="y"}\n'
        "  %t = f32[2,2]{1,0} transpose(%p), dimensions={ 1,0 }\n"
        '  ROOT %c = pred[2,2]{1,0} compare(%t, %p), direction=LT, type=TOTALORDER, frontend_attributes={b="1",a="2"}\n'
        "}\n\n"
    )
    module = parse(text)
    p, t, c = module.entry.instructions
    assert p.attributes["metadata"] == Metadata((("op_type", '"x"'), ("op_name", '"y"')))
    assert t.attributes["dimensions"] == IntList((1, 0))
    assert c.attributes["direction"] is ComparisonDirection.LT and c.attributes["type"] is ComparisonType.TOTALORDER
    assert c.attributes["frontend_attributes"] == FrontendAttributes((("a", '"2"'), ("b", '"1"')))
    assert module.to_text().split("\n", 1)[1] == text.split("\n", 1)[1]


def test_the_header_holds_typed_values_and_prints_as_it_was_written() -> None:
    text = (
        'HloModule m, is_scheduled=true, replica_count=2, frontend_attributes={b="1"}, buffer_donor={ (0, {}) }\n\n'
        "ENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2]{0} parameter(0), sharding={replicated}\n}\n\n"
    )
    module = parse(text)
    assert module.attributes == {
        "is_scheduled": Bool(True),
        "replica_count": Int(2),
        "frontend_attributes": FrontendAttributes((("b", '"1"'),)),
        "buffer_donor": "{ (0, {}) }",  # not modelled: verbatim
    }
    assert module.entry.instructions[0].attributes["sharding"] == Sharding("replicated")
    assert module.to_text().split("\n", 1)[1] == text.split("\n", 1)[1]


@pytest.mark.parametrize("flag, value", [("true", True), ("false", False), ("/*x*/ true", True)])
def test_a_flag_is_read_as_a_boolean(flag: str, value: bool) -> None:
    """Readers ask `is_true`, never the spelling: a comment or a pass-made value reads the same, text never."""
    module = parse(
        "HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n"
        f'  ROOT %c = f32[2]{{0}} custom-call(%p), custom_call_target="x", custom_call_has_side_effect={flag}\n}}\n'
    )
    read = module.entry.root.attributes["custom_call_has_side_effect"]  # type: ignore[union-attr]
    assert read == Bool(value) and is_true(read) is value
    assert is_true(Bool(value)) is value and not is_true(flag) and not is_true(None)


def test_made_values_print_as_xla_prints_them() -> None:
    """Values a pass builds, each printed in XLA's form (the XLA-judged tests below cover each form's print)."""
    assert Bool(True).to_text() == "true" and not Bool(False)
    assert Float(0.1234567).to_text() == "0.123457" and Float(1e8).to_text() == "1e+08"
    assert PaddingConfig((PaddingDimension(0, 0), PaddingDimension(1, 2, 1))).to_text() == "0_0_0x1_2_1"
    assert SliceRanges(((0, 4, 1), (0, 8, 2))).to_text() == "{[0:4:1], [0:8:2]}"
    assert ReplicaGroups(iota=Iota((2, 2), (2, 2), (1, 0))).to_text() == "[2,2]<=[2,2]T(1,0)"
    assert Aliasing((((0,), 1, ()),)).to_text() == "{{0}: (1, {})}"
    assert Sharding(tiles=(4,), iota=Iota((4,), (4,)), shard_group=("shard_like", 2)).to_text() == (
        "{devices=[4]<=[4] shard_like 2}"
    )


# -- XLA is the judge of each value's print -------------------------------------------------------------

_HEAD = "HloModule m\n\n"
_SUM = "%sum (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n"
_FUSED = "%fused (z: f32[4]) -> f32[4] {\n  ROOT %z = f32[4]{0} parameter(0)\n}\n\n"


def _entry(params: str, body: str) -> str:
    return f"ENTRY %e {{\n{params}{body}\n}}\n"


def _cases() -> list[str]:
    """One module per written form: each enum member, windows, dimension labels, precisions and maps."""
    two = "  %a = f32[4]{0} parameter(0)\n  %b = f32[4]{0} parameter(1)\n"
    cases = [
        _HEAD + _entry(two, f"  ROOT %c = pred[4]{{0}} compare(%a, %b), direction={d.value}")
        for d in ComparisonDirection
    ]
    cases += [
        _HEAD + _entry(two, f"  ROOT %c = pred[4]{{0}} compare(%a, %b), direction=EQ, type={t.value}")
        for t in ComparisonType
    ]
    ffts = {
        FftType.FFT: ("c64[8]{0}", "c64[8]{0}"),
        FftType.IFFT: ("c64[8]{0}", "c64[8]{0}"),
        FftType.RFFT: ("f32[8]{0}", "c64[5]{0}"),
        FftType.IRFFT: ("c64[5]{0}", "f32[8]{0}"),
    }
    cases += [
        _HEAD
        + _entry(
            f"  %a = {source} parameter(0)\n", f"  ROOT %f = {result} fft(%a), fft_type={kind.value}, fft_length={{8}}"
        )
        for kind, (source, result) in ffts.items()
    ]
    scalars = "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
    cases += [
        _HEAD + _entry(scalars, f"  ROOT %r = f32[4]{{0}} rng(%a, %b), distribution={d.value}")
        for d in RandomDistribution
    ]
    cases += [
        _HEAD + _FUSED + _entry(two, f"  ROOT %f = f32[4]{{0}} fusion(%a), kind={k.value}, calls=%fused")
        for k in FusionKind
    ]
    matrices = "  %a = f32[2,2]{1,0} parameter(0)\n  %b = f32[2,2]{1,0} parameter(1)\n"
    cases += [
        _HEAD
        + _entry(
            matrices,
            "  ROOT %d = f32[2,2]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
            f"operand_precision={{{p.value},{q.value}}}",
        )
        for p in Precision
        for q in (Precision.DEFAULT, Precision.HIGHEST)
    ]
    image = "  %a = f32[1,6,6,2]{3,2,1,0} parameter(0)\n  %k = f32[3,3,2,2]{3,2,1,0} parameter(1)\n"
    for window, labels in [
        ("{size=3x3}", "b01f_01io->b01f"),
        ("{size=3x3 stride=2x1}", "b01f_01io->b01f"),
        ("{size=3x3 pad=1_1x0_2}", "b01f_01io->b01f"),
        ("{size=3x3 lhs_dilate=2x1}", "b01f_01io->b01f"),
        ("{size=3x3 rhs_dilate=1x2 rhs_reversal=1x0}", "b01f_01io->b01f"),
        ("{size=3x3 stride=1x2 pad=0_1x1_0 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}", "b01f_01io->b01f"),
        ("{size=3x3}", "bf01_oi01->bf01"),
        ("{size=3x3}", "f01b_i01o->01bf"),
        ("{size=3x3}", "b10f_10io->b10f"),
    ]:
        cases.append(
            _HEAD
            + _entry(
                image, f"  ROOT %c = f32[1,4,4,2]{{3,2,1,0}} convolution(%a, %k), window={window}, dim_labels={labels}"
            )
        )
    for target in ["foo", 'a\\"b\\\\c', "tab\\there", "it\\'s"]:
        cases.append(_HEAD + _entry(two, f'  ROOT %c = f32[4]{{0}} custom-call(%a), custom_call_target="{target}"'))
    for metadata in [
        'metadata={op_type="add" op_name="jit(f)/add" source_file="/a/b.py" source_line=3}',
        'metadata={op_name="a\\"b" source_line=2 source_end_line=4 source_column=1 source_end_column=9}',
        'metadata={scheduling_name="s" source_end_column=9 source_file="f" op_name="n" op_type="t" deduplicated_name="d"}',
        'metadata={op_type="" op_name="n" source_line=0 metadata_payload="q" deduplicated_name="d"}',
        'metadata={op_name="x" deduplicated_name="d" scheduling_name="s"}',
        'frontend_attributes={a="1",b="x y",c={"k": 2}}',
    ]:
        cases.append(_HEAD + _entry("", f"  ROOT %p = f32[4]{{0}} parameter(0), {metadata}"))
    return cases + _sharding_cases(_SHARDINGS) + _other_cases()


#: Each sharding form, written as XLA prints it.
_SHARDINGS = [
    "{replicated}",
    "{maximal device=1}",
    "{manual}",
    "{unknown}",
    "{unreduced}",
    "{devices=[2,2]0,1,2,3}",
    "{devices=[2,2]0,2,1,3}",
    "{devices=[4]<=[4]}",
    "{devices=[2,2]<=[2,2]T(1,0)}",
    "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
    "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
    "{devices=[2,2]<=[4] last_tile_dims={unreduced}}",
    '{replicated metadata={op_name="a"}}',
    '{devices=[4]<=[4] metadata={op_type="t" op_name="a" source_line=3}}',
    '{maximal device=0 metadata={{op_name="a"}, {op_name="b"}}}',
    "{replicated shard_as 1}",
    "{devices=[4]<=[4] shard_like 2}",
    "{{replicated}, {maximal device=0}}",
    "{{manual}, {devices=[2]0,1}}",
]
#: Sharding texts XLA reads into another form (a partial tile's groups sorted, a size-1 replicated dimension
#: dropped, an identity transpose merged, a metadata list of one, blanks): the value hloopt reads, printed
#: afresh, must still read in XLA as the written text does.
_NORMALISED_SHARDINGS = [
    "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}",
    "{devices=[2,1]0,1 last_tile_dim_replicate}",
    "{devices=[2,2]<=[2,2]T(0,1)}",
    '{replicated metadata={{op_name="a"}}}',
    "{ {replicated} ,{ devices=[2] 0 , 1 } }",
    "{devices=[2,2]<=[4] last_tile_dims={replicated, replicated}}",
]


def _sharding_cases(shardings: list[str]) -> list[str]:
    """A copy of a tuple or array, `sharding=` each of `shardings`."""
    one = "  %a = f32[8]{0} parameter(0)\n"
    cases = []
    for sharding in shardings:
        is_tuple = re.match(r"\{\s*\{", sharding) is not None
        root = "(f32[8]{0}, f32[8]{0}) tuple(%a, %a)" if is_tuple else "f32[8]{0} copy(%a)"
        cases.append(_HEAD + _entry(one, f"  ROOT %r = {root}, sharding={sharding}"))
    return cases


def _other_cases() -> list[str]:
    """Replica groups, paddings, slices, aliasing, floats and booleans in each form XLA prints."""
    one = "  %a = f32[8]{0} parameter(0)\n"
    cases = [
        _HEAD + _SUM + _entry(one, f"  ROOT %r = f32[8]{{0}} all-reduce(%a), replica_groups={groups}, to_apply=%sum")
        for groups in [
            "{}",
            "{{0,1},{2,3}}",
            "{{0,2},{1,3}}",
            "{{0},{1},{2},{3}}",
            "[2,2]<=[4]",
            "[2,2]<=[2,2]T(1,0)",
            "[1,4]<=[4]",
        ]
    ]
    for padding in ["0_0", "1_2", "-1_2", "1_2_1", "0_0x1_2_1", "0_0_0x0_0_3", "-1_2_0x3_0"]:
        rank = padding.count("x") + 1
        dims, layout = ",".join(["4"] * rank), ",".join(map(str, reversed(range(rank))))
        params = f"  %a = f32[{dims}]{{{layout}}} parameter(0)\n  %z = f32[] constant(0)\n"
        cases.append(_HEAD + _entry(params, f"  ROOT %p = f32[] pad(%a, %z), padding={padding}"))
    for ranges in ["{[0:4]}", "{[0:4:1]}", "{[0:8:2]}", "{[1:3:1], [0:2]}", "{[1:7:3], [2:4], [0:8:4]}"]:
        rank = ranges.count("[")
        dims, layout = ",".join(["8"] * rank), ",".join(map(str, reversed(range(rank))))
        cases.append(
            _HEAD
            + _entry(f"  %a = f32[{dims}]{{{layout}}} parameter(0)\n", f"  ROOT %s = f32[] slice(%a), slice={ranges}")
        )
    two = one + "  %b = f32[8]{0} parameter(1)\n"
    for aliasing in ["{{0}: (1, {})}", "{{0}: (1, {}), {1}:(0,{})}"]:
        cases.append(
            _HEAD
            + _entry(
                two,
                '  ROOT %c = (f32[8]{0}, f32[8]{0}) custom-call(%a, %b), custom_call_target="x", '
                f"output_to_operand_aliasing={aliasing}",
            )
        )
    cases.append(
        _HEAD
        + _entry(
            one,
            '  ROOT %c = f32[8]{0} custom-call(%a), custom_call_target="x", output_to_operand_aliasing={{}: (0, {})}',
        )
    )
    for flag in ["true", "false"]:
        cases.append(
            _HEAD
            + _entry(
                one,
                f'  ROOT %c = f32[8]{{0}} custom-call(%a), custom_call_target="x", custom_call_has_side_effect={flag}',
            )
        )
    norm = "  %a = f32[2,2]{1,0} parameter(0)\n  %s = f32[2]{0} parameter(1)\n"
    for epsilon in ["0.001", "1e-05", "0.1234567", "1", "1e-3", "100000000", "0.0000001", "0.5"]:
        cases.append(
            _HEAD
            + _entry(
                norm,
                "  ROOT %b = (f32[2,2]{1,0}, f32[2]{0}, f32[2]{0}) batch-norm-training(%a, %s, %s), "
                f"epsilon={epsilon}, feature_index=1",
            )
        )
    return cases


#: Header attributes in each form (``is_scheduled=false`` and ``num_partitions=1`` are XLA's defaults, which it
#: leaves out).
_HEADERS = [
    "is_scheduled=true",
    "is_scheduled=false",
    "num_partitions=2, replica_count=4",
    "num_partitions=1",
    "alias_passthrough_params=true",
    'frontend_attributes={b="1",a="2"}',
    "buffer_donor={ (0, {}) }",
]
_HEADER_CASES = [
    f"HloModule m, {header}\n\n" + _entry("  %a = f32[8]{0} parameter(0)\n", "  ROOT %b = f32[8]{0} copy(%a)")
    for header in _HEADERS
]

_CASES = _cases()
_TYPED_ATTRIBUTE = re.compile(
    r", (direction|type|fft_type|fft_length|distribution|kind|operand_precision|window|dim_labels|metadata"
    r"|frontend_attributes|[lr]hs_contracting_dims|custom_call_target|sharding|replica_groups|padding|slice"
    r"|output_to_operand_aliasing|epsilon|custom_call_has_side_effect)="
)


_UNREDUCED_DEFAULT = ' metadata={op_type="sdy::reduction_op" op_name="SUM"}'


@pytest.fixture(scope="module")
def xla_prints() -> list[str | HloError]:
    return canonical_in_subprocess(_CASES)


def _root_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith("ROOT") and " %e" not in line)


@pytest.mark.parametrize("index", range(len(_CASES)))
def test_a_value_prints_as_xla_prints_it(index: int, xla_prints: list[str | HloError]) -> None:
    """hloopt reads the written form; the value, made afresh from its fields, prints as XLA prints it."""
    printed = xla_prints[index]
    assert isinstance(printed, str), printed
    root = parse(_CASES[index]).entry.root
    assert isinstance(root, Instruction)
    # jaxlib 0.12 gives an unreduced sharding read without metadata its default reduction's (SUM); that is
    # XLA's reading of the same text, which hloopt keeps as read
    xla_line = _root_line(printed.split("ENTRY", 1)[1]).replace(_UNREDUCED_DEFAULT, "")
    compared = 0
    for key, value in root.attributes.items():
        if not _TYPED_ATTRIBUTE.search(f", {key}="):
            continue
        if f", {key}=" not in xla_line:
            # XLA leaves out an attribute it takes as the default (type=FLOAT on f32, default precisions,
            # custom_call_has_side_effect=false; jaxlib 0.12 also any comparison type on f32): whether to print
            # one is the printer's choice
            assert isinstance(value, (ComparisonType, PrecisionList)) or value == Bool(False), key
            continue
        fresh = value if isinstance(value, (*_ENUMS.values(),)) else _fresh(value)
        assert f", {key}={fresh.to_text()}" in xla_line + ",", (key, xla_line)  # type: ignore[union-attr]
        compared += 1
    assert compared


def _fresh(value: _V) -> _V:
    """`value` made again from its fields, without the text it was read from."""
    fields = {name: getattr(value, name) for name in value.__dataclass_fields__ if not name.startswith("_")}  # type: ignore[attr-defined]
    return type(value)(**fields)


def _made_by_a_pass(text: str) -> str:
    """`text` parsed, each typed value (header and instructions) made again from its fields as a pass would
    make it, and printed."""
    module = parse(text)
    module.attributes = {k: v if isinstance(v, str) else _fresh(v) for k, v in module.attributes.items()}
    for computation in module.computations:
        for instruction in computation.instructions:
            instruction.set_attributes(
                {
                    k: _fresh(v) if hasattr(v, "canonical_text") and not isinstance(v, _ENUM_TYPES) else v
                    for k, v in instruction.attributes.items()
                }
            )
    return module.to_text()


_ENUM_TYPES = tuple(_ENUMS.values())
_JUDGED = _CASES + _sharding_cases(_NORMALISED_SHARDINGS) + _HEADER_CASES


@pytest.fixture(scope="module")
def xla_judges() -> tuple[list[str | HloError], list[str | HloError]]:
    """XLA's print of each written text, and of hloopt's print of the same module with pass-made values."""
    printed = canonical_in_subprocess(_JUDGED + [_made_by_a_pass(text) for text in _JUDGED])
    return printed[: len(_JUDGED)], printed[len(_JUDGED) :]


@pytest.mark.parametrize("index", range(len(_JUDGED)))
def test_a_pass_made_value_reads_in_xla_as_the_written_text(
    index: int, xla_judges: tuple[list[str | HloError], list[str | HloError]]
) -> None:
    """XLA's print of hloopt's pass-made value equals XLA's canonical print of the text it was read from: the
    values XLA normalises (shardings) included."""
    written, made = xla_judges
    assert isinstance(written[index], str), written[index]
    assert made[index] == written[index]


@pytest.mark.parametrize("index", range(len(_HEADER_CASES)))
def test_a_header_value_prints_as_xla_prints_it(
    index: int, xla_judges: tuple[list[str | HloError], list[str | HloError]]
) -> None:
    """Each typed header value, made afresh, prints as XLA prints it (where XLA prints it: not its defaults)."""
    module = parse(_HEADER_CASES[index])
    xla_header = xla_judges[0][len(_JUDGED) - len(_HEADER_CASES) + index]
    assert isinstance(xla_header, str)
    head = xla_header.split("\n", 1)[0]
    for key, value in module.attributes.items():
        if isinstance(value, str):
            continue
        text = _fresh(value).to_text()
        assert f", {key}={text}" in head + "," or value in (Bool(False), Int(1)), (key, head)


# -- the corpus: every form its modules write ----------------------------------------------------------


@pytest.mark.corpus
def test_every_corpus_value_prints_as_its_text_reads(corpus_dir: Path) -> None:
    """Each typed value in the corpus: its print from its fields reads back as the same value (a sharding's
    metadata in XLA's order), and equals the written text for every dimension-label form (the corpus is XLA's
    own test text; its windows sometimes spell defaults out, ``lhs_dilate=1x1``, which XLA's print leaves out).
    The only sharding and replica-group texts left as text are the mesh forms hloopt does not model."""
    forms: dict[str, set[str]] = {key: set() for key in ("dim_labels", "window", "sharding", "replica_groups")}
    for path in sorted((corpus_dir / "xla").glob("*.hlo")):
        try:
            module = parse(path.read_text(encoding="utf-8", errors="surrogateescape"), str(path))
        except HloError:
            continue
        for computation in module.computations:
            for instruction in computation.instructions:
                for key, value in instruction.attributes.items():
                    if key in ("sharding", "replica_groups") and isinstance(value, str):
                        assert "mesh" in value, (path.name, key, value)
                    if isinstance(value, _CORPUS_CHECKED):
                        fresh = _fresh(value)
                        printed = fresh.to_text()
                        again = read_value(_kind(key), printed)
                        if isinstance(value, Metadata):  # XLA's order, not the one written
                            assert isinstance(again, Metadata) and dict(again.entries) == dict(value.entries)
                        elif isinstance(value, (Sharding, TupleSharding)):
                            assert again.to_text() == printed, (path.name, key)  # type: ignore[union-attr]
                        else:
                            assert again == value, (path.name, key)
                        if key in forms:
                            forms[key].add(value.to_text())
                        if key == "dim_labels":
                            assert printed == value.to_text(), (path.name, key)
    assert len(forms["dim_labels"]) > 20 and len(forms["window"]) > 50
    assert len(forms["sharding"]) > 100 and len(forms["replica_groups"]) > 20


_CORPUS_CHECKED = (
    ConvolutionDimensionNumbers,
    Window,
    IntList,
    Metadata,
    FrontendAttributes,
    Sharding,
    TupleSharding,
    ReplicaGroups,
    PaddingConfig,
    SliceRanges,
    Aliasing,
    Bool,
)


def _kind(key: str) -> Kind:
    from hloopt.ir.attribute_kinds import KINDS

    return KINDS[key]
