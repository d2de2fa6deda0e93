"""Typed attribute values (hloopt/ir/attribute_values.py, read by hloopt/text/attribute_reader.py).

Each kind is read from text into its value once, at parse time, and prints back byte for byte as it was
written. A value prints as XLA prints it (`canonical_text`): XLA is the judge, through its own parser and
printer in a worker, for every enum member, every field of a window, each dimension-number form and
the metadata and frontend-attribute maps; the corpus holds every dimension-number form its modules use.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hloopt import HloError, parse
from hloopt.ir.attribute_kinds import TYPED, Kind
from hloopt.ir.attribute_values import (
    ComparisonDirection,
    ComparisonType,
    ConvolutionDimensionNumbers,
    FftType,
    FrontendAttributes,
    FusionKind,
    Int,
    IntList,
    Metadata,
    Precision,
    PrecisionList,
    RandomDistribution,
    String,
    Window,
    WindowDimension,
)
from hloopt.ir.module import Instruction
from hloopt.text.attribute_reader import read_value
from hloopt.xla.bridge import canonical_in_subprocess

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


@pytest.mark.parametrize(
    "kind, text, value",
    [
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
    ],
)
def test_each_kind_reads_into_its_value_and_prints_as_written(kind: Kind, text: str, value: object) -> None:
    read = read_value(kind, text)
    assert read == value
    assert read.to_text() == text  # type: ignore[union-attr]


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
        *_ENUMS,
    } == TYPED


def test_text_no_reader_takes_stays_text() -> None:
    """Validation refuses what XLA refuses; a gap between it and a reader can never change a print."""
    assert read_value(Kind.INT_LIST, "{1,2") == "{1,2"
    assert read_value(Kind.CONVOLUTION_DIMENSION_NUMBERS, "0f_0io->0f") == "0f_0io->0f"
    assert read_value(Kind.PRECISION_LIST, "{packed_nibble}") == "{packed_nibble}"  # jaxlib 0.10 refuses it
    assert read_value(Kind.SHARDING, "{replicated}") == "{replicated}"
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
    return cases


_CASES = _cases()
_TYPED_ATTRIBUTE = re.compile(
    r", (direction|type|fft_type|fft_length|distribution|kind|operand_precision|window|dim_labels|metadata"
    r"|frontend_attributes|[lr]hs_contracting_dims|custom_call_target)="
)


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
    xla_line = _root_line(printed.split("ENTRY", 1)[1])
    compared = 0
    for key, value in root.attributes.items():
        if not _TYPED_ATTRIBUTE.search(f", {key}="):
            continue
        if f", {key}=" not in xla_line:
            # XLA leaves out an attribute it takes as the default (type=FLOAT on f32, default precisions;
            # jaxlib 0.12 also any comparison type on f32): whether to print one is the printer's choice
            assert isinstance(value, (ComparisonType, PrecisionList)), key
            continue
        fresh = value if isinstance(value, (*_ENUMS.values(),)) else _fresh(value)
        assert f", {key}={fresh.to_text()}" in xla_line + ",", (key, xla_line)  # type: ignore[union-attr]
        compared += 1
    assert compared


def _fresh(value: object) -> object:
    """`value` made again from its fields, without the text it was read from."""
    fields = {name: getattr(value, name) for name in value.__dataclass_fields__ if not name.startswith("_")}  # type: ignore[attr-defined]
    return type(value)(**fields)


# -- the corpus: every form its modules write ----------------------------------------------------------


@pytest.mark.corpus
def test_every_corpus_value_prints_as_its_text_reads(corpus_dir: Path) -> None:
    """Each typed value in the corpus: its print from its fields reads back as the same value, and equals
    the written text for every dimension-label form (the corpus is XLA's own test text; its windows
    sometimes spell defaults out, ``lhs_dilate=1x1``, which XLA's print leaves out)."""
    forms: dict[str, set[str]] = {"dim_labels": set(), "window": set()}
    for path in sorted((corpus_dir / "xla").glob("*.hlo")):
        try:
            module = parse(path.read_text(encoding="utf-8", errors="surrogateescape"), str(path))
        except HloError:
            continue
        for computation in module.computations:
            for instruction in computation.instructions:
                for key, value in instruction.attributes.items():
                    if isinstance(value, (ConvolutionDimensionNumbers, Window, IntList, Metadata, FrontendAttributes)):
                        fresh = _fresh(value)
                        again = read_value(_kind(key), fresh.to_text())  # type: ignore[attr-defined]
                        if isinstance(value, Metadata):  # XLA's order, not the one written
                            assert isinstance(again, Metadata) and dict(again.entries) == dict(value.entries)
                        else:
                            assert again == value, (path.name, key)
                        if key in forms:
                            forms[key].add(value.to_text())
                        if key == "dim_labels":
                            assert fresh.to_text() == value.to_text(), (path.name, key)  # type: ignore[attr-defined]
    assert len(forms["dim_labels"]) > 20 and len(forms["window"]) > 50


def _kind(key: str) -> Kind:
    from hloopt.ir.attribute_kinds import KINDS

    return KINDS[key]
