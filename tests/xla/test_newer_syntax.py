"""When the installed jaxlib refuses syntax a newer one prints, the error says which and why."""

from __future__ import annotations

import re

import pytest
from hlo_text import hlo

from hloopt.ir.opcodes import JAXLIB_SINCE
from hloopt.xla import bridge
from hloopt.xla.bridge import XlaError, canonical, jaxlib_version, newer_syntax

TOPK = hlo(
    """
    HloModule m
    ENTRY e {
      p = f32[4] parameter(0)
      ROOT k = (f32[2], s32[2]) topk(p), k=2, is_stable=true
    }
    """
)
SHUFFLE = hlo(
    """
    HloModule m
    ENTRY e {
      p = f32[4] parameter(0)
      ROOT s = f32[4] shuffle(p), dimensions={0}, mode=rotate, shifts={1}
    }
    """
)


def test_each_newer_construct_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "jaxlib_version", lambda: (0, 10))
    assert "topk is_stable (jaxlib reads it from 0.11)" in newer_syntax(TOPK)
    assert "compact get-tuple-element" in newer_syntax("ROOT r = f32[] negate(%while.5#1)")
    assert "compare order" in newer_syntax("ROOT c = pred[4] compare(p, p), direction=LT, order=TOTAL")
    assert newer_syntax("ROOT c = pred[4] compare(p, p), direction=LT, type=TOTALORDER") == ""
    assert "origin call hierarchies" in newer_syntax('%v = f32[] parameter(0), origin={(),[""]}')
    assert newer_syntax("%v = f32[] parameter(0), origin={[synthetic_call]}") == ""
    reduce = "ROOT r = f32[4]{0} collective-reduce(%p), to_apply=%add"
    assert "opcode collective-reduce (jaxlib reads it from 0.11)" in newer_syntax(reduce)
    assert "opcode shuffle (jaxlib reads it from 0.12)" in newer_syntax(SHUFFLE)
    assert "opcode exp2" in newer_syntax("%e = exp2(%p)")  # no shape written
    assert "opcode log2" in newer_syntax("%s = ((f32[4]), f32[4]) log2-start(%p)")
    assert newer_syntax("ROOT r = f32[4] negate(%exp2), to_apply=%log2") == ""  # names, not opcodes
    monkeypatch.setattr(bridge, "jaxlib_version", lambda: (0, 11))
    assert newer_syntax(reduce) == ""
    assert "opcode shuffle" in newer_syntax(SHUFFLE)
    monkeypatch.setattr(bridge, "jaxlib_version", lambda: (0, 12))
    assert newer_syntax(TOPK) == newer_syntax(SHUFFLE) == ""


@pytest.mark.parametrize(
    ("text", "construct", "said"),
    [
        (TOPK, "topk is_stable", "topk is_stable (jaxlib reads it from 0.11)"),
        (SHUFFLE, "shuffle", "opcode shuffle (jaxlib reads it from 0.12)"),
    ],
)
def test_the_installed_jaxlib_says_it_is_too_old(text: str, construct: str, said: str) -> None:
    since = JAXLIB_SINCE[construct]
    if jaxlib_version() >= since:
        pytest.skip(f"jaxlib {since[0]}.{since[1]} and later read {construct}: only an older one refuses it")
    with pytest.raises(XlaError, match=rf"older than this module's syntax: {re.escape(said)}"):
        canonical(text)
