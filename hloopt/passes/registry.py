"""The pass registry: names, registration numbers, C++ class names, descriptions, options.

Registration numbers are the binary's (Neuron hilo pass registry); they fix the
run order. hloopt's own passes come after them. Rows are lazy: a pass module is
imported only when its row is used, so listing the passes imports neither numpy
nor anything a pass needs.

A spec names passes separated by commas, each with an optional option block,
``fold-constant-converts{numerics=neuron}``; option names and values are checked
against the pass's dataclass fields.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hloopt.errors import HloError
from hloopt.ir.brackets import BracketError, split_top

if TYPE_CHECKING:  # importing base at run time would import the analysis layer for `hloopt passes`
    from hloopt.passes.base import HloPass


@dataclass(frozen=True)
class PassInfo:
    """One registry row; `create(options)` imports the pass module and builds a pass object."""

    #: The kebab-case name, written only here: the class takes it when it is defined (`HloPass`).
    name: str
    number: int
    class_name: str
    description: str
    #: The module under hloopt/passes/ that defines `class_name`.
    module: str
    in_all: bool = True

    def pass_class(self) -> type[HloPass]:
        cls: type[HloPass] = getattr(importlib.import_module(f"hloopt.passes.{self.module}"), self.class_name)
        return cls

    def options(self) -> dict[str, Any]:
        """Option name → its type, from the pass's dataclass fields."""
        return _option_types(self.pass_class())

    def create(self, options: dict[str, str] | None = None) -> HloPass:
        """The pass with `options` (text values, as in a spec) checked and converted."""
        known = self.options()
        values: dict[str, object] = {}
        for key, text in (options or {}).items():
            field_name = key.replace("-", "_")
            if field_name not in known:
                listed = ", ".join(known) if known else "none"
                raise HloError(f"pass {self.name} has no option {key!r}; its options: {listed}")
            values[field_name] = _option_value(self.name, key, text, known[field_name])
        return self.pass_class()(**values)


@functools.cache
def _option_types(cls: type[HloPass]) -> dict[str, Any]:
    """Read once per class: a batch builds every pass for every module, and type hints cost."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _option_value(pass_name: str, key: str, text: str, kind: Any) -> object:
    """`text` as a value of the field type `kind` (a Literal of strings, bool, int or str)."""
    choices = typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
    if choices is not None:
        if text not in choices:
            raise HloError(f"option {key} of {pass_name} must be one of {', '.join(map(str, choices))}, not {text!r}")
        return text
    if kind is bool:
        if text not in ("true", "false"):
            raise HloError(f"option {key} of {pass_name} must be true or false, not {text!r}")
        return text == "true"
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise HloError(f"option {key} of {pass_name} must be an integer, not {text!r}") from None
    return text


REGISTRY: tuple[PassInfo, ...] = (
    PassInfo(
        "batchnorm-training-upcast", 51, "BatchNormTrainingUpcast",
        "BF16 batch-norm-training computed in F32, results narrowed back to BF16",
        "batchnorm_training_upcast",
    ),
    PassInfo(
        "upcast-all-to-fp32", 60, "UpcastAllToFP32",
        "every F16/BF16/F64/FP8/FP4 value and constant becomes F32; integers stay",
        "upcast_all_to_fp32",
    ),
    PassInfo(
        "neuron-int-matmul-downcast", 68, "NeuronIntMatmulDowncast",
        "integer dot routed through an F32 dot between converts, stamped auto_cast=none",
        "neuron_int_matmul_downcast",
    ),
    PassInfo(
        "neuron-auto-cast", 998, "NeuronAutoCast",
        "neuronx-cc's --auto-cast and mixed-precision accumulation as element types: mode none, matmult or all; "
        "type bf16, fp16, tf32 or fp8_e4m3; accumulate f32 or native (hloopt's own)",
        "neuron_auto_cast", in_all=False,
    ),
    PassInfo(
        "simplify-converts", 999, "SimplifyConverts",
        "same-type converts and exact widen-then-narrow chains removed (hloopt's own)",
        "simplify_converts", in_all=False,
    ),
    PassInfo(
        "fold-constant-converts", 1000, "FoldConstantConverts",
        "convert(constant) folded into one constant with the cast engine (hloopt's own)",
        "fold_constant_converts", in_all=False,
    ),
    PassInfo(
        "emulate-neuron-converts", 1001, "EmulateNeuronConverts",
        "every convert between BIR dtypes computes the device's CastToNewDType bit for bit (hloopt's own)",
        "emulate_neuron_converts", in_all=False,
    ),
    PassInfo(
        "cpu-runnable", 1002, "CpuRunnable",
        "an optimised dump made one XLA's CPU compiler runs: fusions become calls, bitcasts transposes and "
        "reshapes, layouts default, backend configs go (hloopt's own; exec and compare apply it themselves)",
        "cpu_runnable", in_all=False,
    ),
)  # fmt: skip

_BY_NAME: dict[str, PassInfo] = {p.name: p for p in REGISTRY} | {p.class_name.lower(): p for p in REGISTRY}
_BY_CLASS: dict[tuple[str, str], PassInfo] = {(f"hloopt.passes.{p.module}", p.class_name): p for p in REGISTRY}


def lookup(name: str) -> PassInfo:
    """A pass by kebab-case or C++ class name (case-insensitive); unknown names list the known ones."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        known = ", ".join(f"{p.name} ({p.class_name})" for p in REGISTRY)
        raise HloError(f"unknown pass {name.strip()!r}; known passes: {known}, or 'all'")
    return found


def row_for(module: str, class_name: str) -> PassInfo | None:
    """The registry row of the class `class_name` defined in `module`; None for a class the registry does not know.

    A registered pass class takes its `name` from here (`HloPass.__init_subclass__`), so a name is
    written once, in its row, where listing the passes reads it without importing them.
    """
    return _BY_CLASS.get((module, class_name))


def row_of(hlo_pass: HloPass) -> PassInfo | None:
    """The registry row of a pass object's class; None for a pass the registry does not know."""
    cls = type(hlo_pass)
    return row_for(cls.__module__, cls.__name__)


@dataclass(frozen=True)
class Selected:
    """One pass named in a spec, with the options the spec gave it."""

    info: PassInfo
    options: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def number(self) -> int:
        return self.info.number

    def create(self, numerics: str | None = None) -> HloPass:
        """The pass object; `numerics` fills a ``numerics`` option the spec left unset."""
        options = dict(self.options)
        if numerics is not None and "numerics" not in options and "numerics" in self.info.options():
            options["numerics"] = numerics
        return self.info.create(options)


def select(spec: str) -> tuple[list[Selected], list[Selected]]:
    """``a,b{k=v}`` or ``all`` → (as given, in registration order); duplicates are dropped.

    Options are checked here, so a bad spec fails before any module is read.
    """
    given: list[Selected] = []
    for part in _split(spec, ","):
        name, options = _item(part)
        if not name:
            continue
        if name.lower() == "all":
            if options:
                raise HloError(f"'all' takes no options, got {part.strip()!r}")
            given += [Selected(p) for p in REGISTRY if p.in_all]
        else:
            selected = Selected(lookup(name), options)
            if options:
                selected.info.create(dict(options))
            given.append(selected)
    given = list(dict.fromkeys(given))
    names = [s.name for s in given]
    for twice in {n for n in names if names.count(n) > 1}:
        raise HloError(f"--passes names {twice} twice with different options")
    if not given:
        raise HloError("--passes names no pass; use 'all' or a comma-separated list (see 'hloopt passes')")
    return given, sorted(given, key=lambda p: p.number)


def _split(text: str, separators: str) -> list[str]:
    """`text` cut at `separators` outside ``{…}``."""
    try:
        return split_top(text, separators, strict=True)
    except BracketError as err:
        raise HloError(f"{err} in --passes {text!r}") from None


def _item(part: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``name{k=v k2=v2}`` (options separated by spaces or commas) → (name, options)."""
    text = part.strip()
    if "{" not in text:
        return text, ()
    name, _, block = text.partition("{")
    if not block.endswith("}") or "{" in block:
        raise HloError(f"expected name{{option=value …}} in --passes, got {text!r}")
    options: dict[str, str] = {}
    for entry in block[:-1].replace(",", " ").split():
        key, eq, value = entry.partition("=")
        if not eq or not key or not value:
            raise HloError(f"expected option=value in {text!r}, got {entry!r}")
        options[key] = value
    return name.strip(), tuple(options.items())
