"""Property-based fuzzing of the parser (and of the passes on whatever still parses).

Real corpus modules are mutated — tokens and lines deleted, duplicated and
swapped, the text truncated, random bytes and invalid UTF-8 spliced in, numbers
made huge, brackets nested 10k deep. For every input the parser returns a
module or raises `HloParseError` with a line and column inside the text; any
other exception, or an input that runs past its time bound, fails the test.
Modules that still parse go through every pass and the printer, where only an
`HloError` (a clear refusal) is allowed.

CI runs a small budget; ``HLOOPT_FUZZ_EXAMPLES=100000`` is the long local mode
(add ``--hypothesis-show-statistics`` to see what it tried).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hlo_text import hlo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parity_fuzz import bound_for, time_bound

from hloopt.errors import HloError, HloParseError
from hloopt.passes.pipeline import run_pipeline
from hloopt.support.fileio import read_text
from hloopt.text.parser import parse
from hloopt.text.splitting import MAX_NESTING

EXAMPLES = int(os.environ.get("HLOOPT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 150,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Seeds are the corpus modules up to this size: big enough for every construct, small enough to fuzz fast.
SEED_BYTES = 16_000
_TOKEN = re.compile(r"\s+|[(){}\[\],=:%]|[^\s(){}\[\],=:%]+")
_NUMBER = re.compile(r"\d+")


def check_parses_or_located_error(data: bytes, run_passes: bool = True) -> None:
    """The property: a module (whose passes and printing fail only cleanly) or a located HloParseError."""
    with tempfile.NamedTemporaryFile(suffix=".hlo") as handle:
        handle.write(data)
        handle.flush()
        try:
            with time_bound(bound_for(len(data))):
                text = read_text(handle.name)
                module = parse(text, handle.name)
        except HloParseError as err:
            loc = err.location
            assert loc.filename == handle.name
            assert loc.line >= 1 and loc.column >= 1, err.render()
            assert err.message and err.render().startswith(f"{handle.name}:{loc.line}:{loc.column}: ")
            return
    if not run_passes:
        return
    try:
        with time_bound(bound_for(len(data)) * 2):
            run_pipeline(module, "all,fold-constant-converts", check_changed="both")
            module.to_text()
    except HloError as err:
        assert str(err)


@pytest.fixture(scope="module")
def seeds(corpus_dir: Path) -> list[bytes]:
    paths = sorted(p for folder in ("xla", "headerless", "invalid") for p in (corpus_dir / folder).glob("*.hlo"))
    texts = [p.read_bytes() for p in paths if p.stat().st_size <= SEED_BYTES]
    assert len(texts) > 8000
    return texts


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A corpus module with one to four mutations applied in turn."""
    data = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 4))):
        data = draw(st.sampled_from(MUTATIONS))(draw, data)
    return data


def _pick(draw: st.DrawFn, items: list, label: str) -> int:
    return draw(st.integers(0, max(len(items) - 1, 0)), label=label)


def _edit_units(draw: st.DrawFn, data: bytes, split: str) -> bytes:
    text = data.decode("utf-8", errors="surrogateescape")
    units = _tokens(text) if split == "token" else text.splitlines(keepends=True)
    if not units:
        return data
    i, j = _pick(draw, units, "i"), _pick(draw, units, "j")
    action = draw(st.sampled_from(["delete", "duplicate", "swap"]))
    if action == "delete":
        del units[i]
    elif action == "duplicate":
        units.insert(j, units[i])
    else:
        units[i], units[j] = units[j], units[i]
    return "".join(units).encode("utf-8", errors="surrogateescape")


def _truncate(draw: st.DrawFn, data: bytes) -> bytes:
    return data[: draw(st.integers(0, len(data)))]


def _splice_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    junk = draw(
        st.one_of(
            st.binary(min_size=1, max_size=16),
            st.sampled_from(
                [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\xef\xbb\xbf", b"\r", b"\t"]
            ),
            st.text(min_size=1, max_size=8).map(lambda s: s.encode("utf-8", errors="surrogatepass")),
        )
    )
    return data[:at] + junk + data[at:]


def _huge_number(draw: st.DrawFn, data: bytes) -> bytes:
    matches = list(_NUMBER.finditer(data.decode("latin-1")))
    if not matches:
        return data
    match = matches[_pick(draw, matches, "number")]
    digits = draw(st.integers(10, 5000))
    number = draw(
        st.sampled_from(
            [
                "9" * digits,
                "1" + "0" * digits,
                "-" + "9" * digits,
                "18446744073709551616",
                "9223372036854775808",
                "2147483648",
                "4294967296",
                "1e400",
                "0x" + "f" * digits,
            ]
        )
    )
    return data[: match.start()] + number.encode() + data[match.end() :]


def _nest(draw: st.DrawFn, data: bytes) -> bytes:
    depth = draw(st.sampled_from([17, 100, 1000, 10_000]))
    opener = draw(st.sampled_from("({["))
    closer = {"(": ")", "{": "}", "[": "]"}[opener]
    at = draw(st.integers(0, len(data)))
    inner = draw(st.sampled_from([b"", b"f32[]", b"1", b"%x"]))
    return data[:at] + opener.encode() * depth + inner + closer.encode() * depth + data[at:]


MUTATIONS = [
    lambda draw, data: _edit_units(draw, data, "token"),
    lambda draw, data: _edit_units(draw, data, "line"),
    _truncate,
    _splice_bytes,
    _huge_number,
    _nest,
]


def test_mutated_corpus_modules(seeds: list[bytes]) -> None:
    @FUZZ
    @given(mutated(seeds))
    def property_holds(data: bytes) -> None:
        check_parses_or_located_error(data)

    property_holds()


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    check_parses_or_located_error(data)


@FUZZ
@given(
    st.text(
        alphabet=st.sampled_from(list("HloModule ENTRY ROOT %e{}()[],=:f32 parameter constant add 0 1 \n")),
        max_size=400,
    )
)
def test_random_hlo_shaped_text(text: str) -> None:
    check_parses_or_located_error(("HloModule m\n" + text).encode())


def _template(*lines: str, header: str = "HloModule m") -> str:
    """A `str.format` template of a module: `header`, then an entry computation of these instruction lines."""
    return "\n".join([header, "ENTRY e {{", *(f"  {line}" for line in lines), "}}", ""])


@pytest.mark.parametrize("depth", [16, 17, 10_000])
@pytest.mark.parametrize(
    "template",
    [
        _template("ROOT p = {open}f32[]{close} parameter(0)"),
        _template("ROOT c = f32[1] constant({open}1{close})"),
        _template("p = f32[] parameter(0)", "ROOT t = tuple({open}p{close})"),
        _template(
            "ROOT p = f32[] parameter(0)", header="HloModule m, entry_computation_layout={{{open}f32[]{close}->f32[]}}"
        ),
        _template('ROOT p = f32[] parameter(0), metadata={{op_name={open}"x"{close}}}'),
    ],
    ids=["shape", "literal", "operands", "header", "attribute"],
)
@pytest.mark.parametrize("brackets", ["()", "{}", "[]"])
def test_deep_nesting_is_a_clean_error(template: str, depth: int, brackets: str) -> None:
    """The grammar allows 16 levels of brackets; anything deeper is a located error, never a RecursionError."""
    text = template.format(open=brackets[0] * depth, close=brackets[1] * depth)
    check_parses_or_located_error(text.encode())


def test_deep_nesting_error_points_into_the_nest() -> None:
    """Past the depth XLA's parser overflows its stack at, a located refusal at the first bracket too deep."""
    depth = 10_000
    text = "HloModule m\nENTRY e {\n  ROOT p = " + "(" * depth + "f32[]" + ")" * depth + " parameter(0)\n}\n"
    with pytest.raises(HloParseError) as caught:
        parse(text, "deep.hlo")
    assert (caught.value.location.line, caught.value.location.column) == (3, 12 + MAX_NESTING - 1)
    assert "nest more than" in caught.value.message


@pytest.mark.parametrize(
    "number",
    ["9" * 5000, "18446744073709551616", "-9223372036854775809", "1e99999"],
    ids=["5000-digits", "2^64", "-2^63-1", "1e99999"],
)
@pytest.mark.parametrize(
    "template",
    [
        _template("ROOT p = f32[{n}] parameter(0)"),
        _template("ROOT p = f32[] parameter({n})"),
        _template("ROOT c = s32[] constant({n})"),
        _template("ROOT c = f32[] constant({n})"),
        _template("ROOT c = u64[] constant({n})"),
        _template("p = f32[4] parameter(0)", "ROOT t = f32[4] transpose(p), dimensions={{{n}}}"),
        _template("ROOT p = f32[] parameter(0)", header="HloModule m, replica_count={n}"),
        _template("ROOT p = f32[2]{{{n}}} parameter(0)"),
    ],
    ids=["dim", "parameter", "s32", "f32", "u64", "attribute", "header", "layout"],
)
def test_huge_numbers(template: str, number: str) -> None:
    check_parses_or_located_error(template.format(n=number).encode())


def test_found_by_the_long_mode_a_negative_tuple_index() -> None:
    """`index=-9999999999` once indexed a Python tuple from the end, then past it, in shape inference."""
    text = hlo(
        """
        HloModule m
        ENTRY e {
          p = (bf16[2], bf16[2]) parameter(0)
          ROOT g = bf16[2] get-tuple-element(p), index=-9999999999
        }
        """
    )
    check_parses_or_located_error(text.encode())


@pytest.mark.parametrize("indent", [30, 200])
def test_deep_indentation_does_not_backtrack(indent: int) -> None:
    """A gap written `(WS+)*` once made a 174-byte module indented by 30 spaces take 85 s; gaps are possessive."""
    pad = " " * indent
    check_parses_or_located_error(
        f"{pad}HloModule m\n{pad}ENTRY e {{\n{pad}  ROOT c = s64[] constant(42)\n{pad}}}\n".encode()
    )
    check_parses_or_located_error(f"HloModule m\nENTRY e {{\n  ROOT c = s64[] constant(42)\n{pad}@}}\n".encode())
