"""``result_accuracy={tolerance={…}}``: hloopt refuses, located and without a traceback, exactly what
jaxlib's parser refuses or aborts on (XLA reads each value as a double and cuts ulps to an int64)."""

from __future__ import annotations

import itertools

import pytest
from conftest import sampled, selected

from hloopt import parse
from hloopt.errors import HloParseError
from hloopt.xla.bridge import canonical_in_subprocess

_NUMBERS = [
    "0", "1", "-0", "-0.0", "01", "5.", "1.5", "0.5", "-0.5", "-.5", ".5", "+1", "1_0", "1e2", "1E5", "1e-400",
    "1e308", "1e400", "-1e400", "1e30", "inf", "-inf", "INF", "nan", "-nan", "0x10", "true", "x", "-1",
    "2147483648", "9223372036854775807", "9223372036854774784", "99999999999999999999",
]  # fmt: skip
_FIELDS = [
    "", "atol=1", "atol=1,rtol=2", "atol=1, rtol=2,ulps=3", "atol=1 rtol=2", "atol=1,", ",atol=1", "atol=1,atol=2", "atol=,rtol=1", "ulps=", "atol= ",
    "bogus=1", "atol", "atol=", "atol==1", "ulps=1,rtol=0,atol=0",
]  # fmt: skip
_VALUES = [
    *(f"{{tolerance={{{key}={number}}}}}" for key, number in itertools.product(("atol", "rtol", "ulps"), _NUMBERS)),
    *(f"{{tolerance={{{fields}}}}}" for fields in _FIELDS),
    "{mode=highest}", "{mode=HIGHEST}", "{mode=default}", "{mode=bogus}", "{tolerance=1}", "{}",
]  # fmt: skip


def _module(value: str) -> str:
    return f"HloModule m\n\nENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT x = f32[2] exponential(p), result_accuracy={value}\n}}\n"


def _hloopt_accepts(text: str) -> bool:
    try:
        parse(text)
    except HloParseError as error:
        assert error.location.line == 5, error
        return False
    return True


@pytest.fixture(scope="module")
def xla_verdicts(request: pytest.FixtureRequest) -> dict[str, bool]:
    values = [str(value) for value in selected(request, "value")]
    texts = [_module(value) for value in values]
    return {value: isinstance(out, str) for value, out in zip(values, canonical_in_subprocess(texts), strict=True)}


# Many values abort XLA, each costing a fresh worker: the fast tier judges every third.
@pytest.mark.parametrize("value", sampled(_VALUES, 3))
def test_result_accuracy_is_accepted_exactly_where_xla_accepts_it(value: str, xla_verdicts: dict[str, bool]) -> None:
    assert _hloopt_accepts(_module(value)) == xla_verdicts[value]
