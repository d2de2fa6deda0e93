"""neuronx-cc's dtype flags: every spelling the compiler takes, the release defaults, ``env``, bad values."""

from __future__ import annotations

import itertools
import re

import pytest

from hloopt.errors import HloError
from hloopt.passes.neuron_cc_flags import (
    COMPILERS,
    NeuronCcSettings,
    compiler_defaults,
    flags_text,
    parse_neuron_cc_flags,
)

MODES = ("none", "matmult", "all")
TYPES = ("bf16", "fp16", "tf32", "fp8_e4m3")


@pytest.mark.parametrize(("mode", "cast_type"), list(itertools.product(MODES, TYPES)))
@pytest.mark.parametrize("spelling", ["{flag} {value}", "{flag}={value}", "'{flag}={value}'", '"{flag}" {value}'])
def test_every_mode_and_type_in_every_spelling(mode: str, cast_type: str, spelling: str) -> None:
    text = " ".join(
        spelling.format(flag=f, value=v) for f, v in (("--auto-cast", mode), ("--auto-cast-type", cast_type))
    )
    settings = parse_neuron_cc_flags(text)
    assert (settings.auto_cast, settings.auto_cast_type, settings.ignored) == (mode, cast_type, ())


@pytest.mark.parametrize(
    ("text", "mode", "cast_type"),
    [
        ("--auto-cast all --auto-cast matmult", "matmult", "bf16"),
        ("--auto-cast=none --auto-cast all", "all", "bf16"),
        ("--auto-cast-type fp16 --auto-cast-type=tf32 --auto-cast-type fp8_e4m3", "all", "fp8_e4m3"),
    ],
)
def test_the_right_most_wins(text: str, mode: str, cast_type: str) -> None:
    settings = parse_neuron_cc_flags(f"--auto-cast all {text}")
    assert (settings.auto_cast, settings.auto_cast_type) == (mode, cast_type)


@pytest.mark.parametrize(
    ("text", "accumulate"),
    [
        ("", None),
        ("--enable-mixed-precision-accumulation", True),
        ("--disable-mixed-precision-accumulation", False),
        ("--disable-mixed-precision-accumulation --enable-mixed-precision-accumulation", True),
        ("--enable-mixed-precision-accumulation --disable-mixed-precision-accumulation", False),
    ],
)
@pytest.mark.parametrize("compiler", COMPILERS)
def test_accumulation_switches_over_each_release(text: str, accumulate: bool | None, compiler: str) -> None:
    settings = parse_neuron_cc_flags(text, compiler)  # type: ignore[arg-type]
    expected = compiler_defaults(compiler).accumulate if accumulate is None else accumulate  # type: ignore[arg-type]
    assert settings.accumulate is expected
    assert settings.pass_options["accumulate"] == ("f32" if expected else "native")


def test_release_defaults() -> None:
    """Before 2.27: matmult to bf16, no mixed-precision accumulation; from 2.27: no auto-cast, accumulation on."""
    assert compiler_defaults("2.26") == NeuronCcSettings("matmult", "bf16", accumulate=False, compiler="2.26")
    assert compiler_defaults("2.27") == NeuronCcSettings("none", "bf16", accumulate=True, compiler="2.27")
    assert parse_neuron_cc_flags("") == compiler_defaults("2.27")  # the newest release without --neuron-compiler
    assert parse_neuron_cc_flags("--auto-cast none", "2.26").auto_cast == "none"  # a flag given beats the default
    assert parse_neuron_cc_flags("--auto-cast all", "2.27").accumulate is True


def test_the_pipeline_entry() -> None:
    settings = parse_neuron_cc_flags("--auto-cast matmult --auto-cast-type fp16", "2.26")
    assert settings.pass_spec == "neuron-auto-cast{mode=matmult,type=fp16,accumulate=native}"
    assert settings.with_passes(None) == settings.pass_spec
    assert settings.with_passes("all") == f"all,{settings.pass_spec}"


def test_unmodelled_flags_are_named_once_with_their_values_skipped() -> None:
    settings = parse_neuron_cc_flags(
        "stray -O2 --target trn1 --model-type=transformer --auto-cast matmult --target trn2 x --fp32-cast matmult -O2"
    )
    assert settings.auto_cast == "matmult"
    assert settings.ignored == (
        "stray",
        "-O2",
        "--target",
        "--model-type",
        "--fp32-cast (a neuron-cc flag; neuronx-cc's is --auto-cast)",
    )


def test_saturate_infinity_is_read_and_explained() -> None:
    assert parse_neuron_cc_flags("").notes == ()
    settings = parse_neuron_cc_flags("--enable-saturate-infinity")
    assert settings.saturate_infinity and settings.ignored == ()
    assert "does not model" in settings.notes[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("--auto-cast=fast", "--auto-cast must be one of none, matmult, all, not 'fast'"),
        ("--auto-cast fast", "--auto-cast must be one of none, matmult, all, not 'fast'"),
        ("--auto-cast=", "--auto-cast must be one of none, matmult, all, not ''"),
        ("--auto-cast", "--auto-cast needs a value: one of none, matmult, all"),
        ("--auto-cast --auto-cast-type bf16", "--auto-cast needs a value"),
        ("--auto-cast-type=fp8", "--auto-cast-type must be one of bf16, fp16, tf32, fp8_e4m3, not 'fp8'"),
        ("--auto-cast-type", "--auto-cast-type needs a value: one of bf16, fp16, tf32, fp8_e4m3"),
        ("--auto-cast MATMULT", "not 'MATMULT'"),  # neuronx-cc's choices are case-sensitive
        ("--enable-mixed-precision-accumulation=1", "takes no value"),
        ("--auto-cast 'matmult", "No closing quotation"),
    ],
)
def test_malformed_values_name_the_flag_and_the_choices(text: str, message: str) -> None:
    with pytest.raises(HloError, match="--neuron-cc-flags") as caught:
        parse_neuron_cc_flags(text)
    assert message in str(caught.value)


def test_an_unknown_release_lists_the_known_ones() -> None:
    with pytest.raises(HloError, match=re.escape("--neuron-compiler must be one of 2.26, 2.27, not '2.25'")):
        compiler_defaults("2.25")  # type: ignore[arg-type]


def test_env_reads_the_variable_only_when_asked() -> None:
    environ = {"NEURON_CC_FLAGS": "--auto-cast=all --auto-cast-type fp16"}
    assert flags_text("env", environ) == environ["NEURON_CC_FLAGS"]
    assert flags_text("--auto-cast none", environ) == "--auto-cast none"
    assert flags_text("env", {}) == ""
    settings = parse_neuron_cc_flags(" env ", environ=environ)
    assert (settings.auto_cast, settings.auto_cast_type) == ("all", "fp16")


def test_env_without_a_mapping_reads_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast matmult")
    assert parse_neuron_cc_flags("env").auto_cast == "matmult"
    assert parse_neuron_cc_flags("").auto_cast == "none"  # not read unasked
