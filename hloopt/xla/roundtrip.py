"""Does hloopt's print of a module mean to XLA what the module means?

The check XLA itself would make: XLA's canonical print of hloopt's output must
equal XLA's canonical print of the input, and hloopt must reproduce XLA's
canonical text byte for byte. Used by the corpus tests; callable by users who
want to know whether their own modules survive hloopt unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hloopt.errors import HloError
from hloopt.text.parser import parse
from hloopt.xla.timeouts import DEFAULT_TIMEOUT, limit


@dataclass(frozen=True)
class RoundTrip:
    """What happened to one module; `ok` when XLA agrees and the canonical text survives byte for byte."""

    name: str
    hloopt_error: str | None = None
    xla_input_error: str | None = None
    xla_output_error: str | None = None
    canonical_equal: bool = False
    byte_exact: bool = False
    first_difference: str = ""
    #: XLA's canonical print of the input, which hloopt reprints, is text XLA's own parser
    #: refuses, or dies on from jaxlib 0.11 (a printer defect: `statistics=` twice on an async sugar
    #: op, …): hloopt refuses it too.
    canonical_unreadable: str | None = None

    @property
    def ok(self) -> bool:
        return self.hloopt_error is None and self.xla_output_error is None and self.canonical_equal and self.byte_exact


_CONSTANT_PAYLOAD = re.compile(r"constant\((?:[^()]|\([^()]*\))*\)")


def _mask_constants(text: str) -> str:
    """The text with every constant's value hidden (for inputs XLA fills with random data)."""
    return _CONSTANT_PAYLOAD.sub("constant(…)", text)


def _first_difference(expected: str, got: str) -> str:
    for number, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines()), start=1):
        if a != b:
            return f"line {number}:\n  xla:    {a}\n  hloopt: {b}"
    return "line counts differ"


def check_roundtrip(text: str, name: str = "<string>", *, timeout: float | None = DEFAULT_TIMEOUT) -> RoundTrip:
    """Round-trip one module through hloopt and compare with XLA, in an XLA worker: a module that kills
    XLA, or keeps it past `timeout` seconds, is an XLA input error, not a dead caller."""
    from hloopt.xla.bridge import isolated_call

    try:
        checked: RoundTrip = isolated_call(_check_roundtrip, text, name, timeout=limit(timeout), label=name, jax=False)
    except HloError as err:
        return RoundTrip(name, xla_input_error=f"XLA crashed: {err}")
    return checked


def _check_roundtrip(text: str, name: str) -> RoundTrip:
    """`check_roundtrip` in the worker."""
    from hloopt.xla import bridge as xla_bridge

    try:
        expected = xla_bridge.canonical(text)
    except HloError as err:
        return RoundTrip(name, xla_input_error=str(err))
    try:
        ours = parse(text, name).to_text()
    except HloError as err:
        return RoundTrip(name, hloopt_error=str(err))
    unreadable = None
    try:
        again = parse(expected, name).to_text()
    except HloError as err:
        # In a worker of its own, even from a worker (where `isolated_call` would run it in place): jaxlib
        # 0.11+ can crash on its own print (statistics= twice), and that must not cost this module's result.
        (reread,) = xla_bridge.canonical_in_subprocess([expected], workers=1)
        if not isinstance(reread, HloError):
            return RoundTrip(name, hloopt_error=str(err))
        unreadable, again = str(err), ""
    try:
        through_xla = xla_bridge.canonical(ours)
    except HloError as err:
        return RoundTrip(name, xla_output_error=str(err))
    if through_xla != expected and "{...}" in text and xla_bridge.canonical(text) != expected:
        # XLA fills `{...}` constants with fresh pseudo-random data on every parse, so
        # only the rest of the module can be compared.
        expected, through_xla = _mask_constants(expected), _mask_constants(through_xla)
        again = _mask_constants(again)
    difference = ""
    if through_xla != expected:
        difference = "XLA canonical of hloopt's output differs, " + _first_difference(expected, through_xla)
    elif unreadable is not None:
        difference = f"XLA refuses its own canonical print, as hloopt does: {unreadable}"
    elif again != expected:
        difference = "print(parse(canonical)) differs, " + _first_difference(expected, again)
    return RoundTrip(
        name,
        canonical_equal=through_xla == expected,
        byte_exact=again == expected,
        first_difference=difference,
        canonical_unreadable=unreadable,
    )


def check_many(items: Sequence[tuple[str, str]], workers: int = 2) -> list[RoundTrip]:
    """`check_roundtrip` for many ``(text, name)`` pairs in isolated XLA worker processes."""
    from hloopt.xla.bridge import isolated_map

    results = isolated_map(_check_roundtrip, list(items), workers=workers, timeout=120, jax=False)
    return [
        result if isinstance(result, RoundTrip) else RoundTrip(name, xla_input_error=f"XLA crashed: {result}")
        for result, (_, name) in zip(results, items)
    ]
