"""neuronx-cc's dtype flags, read as the compiler reads them, and the auto-cast pipeline entry they make.

Users tune a Neuron compile with compiler flags (``NEURON_CC_FLAGS="--auto-cast matmult"``), not with
hloopt's pass options, so ``--neuron-cc-flags`` takes the compiler's own spellings and
`NeuronCcSettings.with_passes` turns them into the ``neuron-auto-cast`` entry of a pipeline spec.
Pure: no click, no jax; the CLI, the driver and `hloopt.jax.jit` all read flags here.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, get_args

from hloopt.errors import HloError

AutoCast = Literal["none", "matmult", "all"]
AutoCastType = Literal["bf16", "fp16", "tf32", "fp8_e4m3"]
Compiler = Literal["2.26", "2.27"]
#: The neuronx-cc releases whose defaults `--neuron-compiler` picks; the newest is the default.
COMPILERS: tuple[Compiler, ...] = get_args(Compiler)
#: The environment variable torch-neuronx and jax-neuronx hand to the compiler, read only for ``env``.
ENVIRONMENT_VARIABLE = "NEURON_CC_FLAGS"
#: The pass the settings configure (part of hloopt's registry; not in ``all``).
AUTO_CAST_PASS = "neuron-auto-cast"

_CHOICES: dict[str, tuple[str, ...]] = {"--auto-cast": get_args(AutoCast), "--auto-cast-type": get_args(AutoCastType)}
_SWITCHES: dict[str, tuple[str, bool]] = {
    "--enable-mixed-precision-accumulation": ("accumulate", True),
    "--disable-mixed-precision-accumulation": ("accumulate", False),
    "--enable-saturate-infinity": ("saturate_infinity", True),
}
#: Flags of neuron-cc (Inf1), not neuronx-cc: named with the neuronx-cc flag that does their job.
_INF1_FLAGS = {"--fp32-cast": "--auto-cast", "--fast-math": "--auto-cast"}


@dataclass(frozen=True)
class NeuronCcSettings:
    """The dtype behaviour of one neuronx-cc compile: its release's defaults under the flags given."""

    auto_cast: AutoCast
    auto_cast_type: AutoCastType
    #: Mixed-precision accumulation (``--enable/--disable-mixed-precision-accumulation``).
    accumulate: bool
    #: ``--enable-saturate-infinity``: kept, but it changes no cast hloopt models (`notes`).
    saturate_infinity: bool = False
    compiler: Compiler = COMPILERS[-1]
    #: The flags given that hloopt does not model, each named once, in the order given.
    ignored: tuple[str, ...] = ()

    @property
    def pass_options(self) -> dict[str, str]:
        """The options of the ``neuron-auto-cast`` pass, as a spec writes them."""
        return {
            "mode": self.auto_cast,
            "type": self.auto_cast_type,
            "accumulate": "f32" if self.accumulate else "native",
        }

    @property
    def pass_spec(self) -> str:
        """The pipeline entry, ``neuron-auto-cast{mode=…,type=…,accumulate=…}``."""
        options = ",".join(f"{key}={value}" for key, value in self.pass_options.items())
        return AUTO_CAST_PASS + "{" + options + "}"

    def with_passes(self, passes: str | None) -> str:
        """`passes` (a spec, or None for none) with the auto-cast entry added; the registry's order runs it
        after the Neuron passes and before the converts' emulation, wherever it is written."""
        return self.pass_spec if not passes else f"{passes},{self.pass_spec}"

    @property
    def notes(self) -> tuple[str, ...]:
        """What the user should know about flags that were read but change nothing here."""
        if not self.saturate_infinity:
            return ()
        return (
            "--enable-saturate-infinity changes only the matrix-multiply transposes the compiler introduces "
            "(trn1), which hloopt does not model; FP8 casts saturate regardless",
        )


def compiler_defaults(compiler: Compiler = COMPILERS[-1]) -> NeuronCcSettings:
    """A release's defaults: before 2.27 ``--auto-cast matmult --auto-cast-type bf16`` without mixed-precision
    accumulation; from 2.27 ``--auto-cast none`` with it (Neuron 2.27 release notes)."""
    if compiler not in COMPILERS:
        raise HloError(f"--neuron-compiler must be one of {', '.join(COMPILERS)}, not {compiler!r}")
    if compiler == "2.26":
        return NeuronCcSettings("matmult", "bf16", accumulate=False, compiler=compiler)
    return NeuronCcSettings("none", "bf16", accumulate=True, compiler=compiler)


def flags_text(given: str, environ: Mapping[str, str] | None = None) -> str:
    """The flags `given` names: ``env`` is ``$NEURON_CC_FLAGS`` (from `environ`, else this process's
    environment, read only then), anything else the flags themselves."""
    if given.strip() != "env":
        return given
    return (os.environ if environ is None else environ).get(ENVIRONMENT_VARIABLE, "")


def parse_neuron_cc_flags(
    given: str, compiler: Compiler | None = None, environ: Mapping[str, str] | None = None
) -> NeuronCcSettings:
    """`given` (neuronx-cc flags, quoted as a shell quotes them, or ``env``) over `compiler`'s defaults.

    Both ``--flag value`` and ``--flag=value``; the right-most of competing flags wins. Flags hloopt does
    not model are returned in `NeuronCcSettings.ignored` (with the values that follow them); a modelled
    flag with a missing or unknown value is an `HloError` naming the flag and its choices.
    """
    text = flags_text(given, environ)
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise HloError(f"--neuron-cc-flags {text!r}: {err}") from None
    settings = compiler_defaults(compiler or COMPILERS[-1])
    values: dict[str, object] = {}
    ignored: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        flag, eq, value = word.partition("=")
        if flag in _CHOICES:
            if not eq:
                if index == len(words) or words[index].startswith("-"):
                    raise HloError(f"--neuron-cc-flags: {flag} needs a value: one of {', '.join(_CHOICES[flag])}")
                value = words[index]
                index += 1
            if value not in _CHOICES[flag]:
                raise HloError(f"--neuron-cc-flags: {flag} must be one of {', '.join(_CHOICES[flag])}, not {value!r}")
            values["auto_cast" if flag == "--auto-cast" else "auto_cast_type"] = value
        elif flag in _SWITCHES:
            if eq:
                raise HloError(f"--neuron-cc-flags: {flag} takes no value, got {word!r}")
            field, on = _SWITCHES[flag]
            values[field] = on
        else:
            name = flag if flag.startswith("-") else word
            while not eq and flag.startswith("-") and index < len(words) and not words[index].startswith("-"):
                index += 1  # the flag's own values: `--target trn1`
            hint = f" (a neuron-cc flag; neuronx-cc's is {_INF1_FLAGS[flag]})" if flag in _INF1_FLAGS else ""
            if name + hint not in ignored:
                ignored.append(name + hint)
    return replace(settings, ignored=tuple(ignored), **values)
