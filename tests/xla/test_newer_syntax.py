"""When the installed jaxlib refuses syntax a newer one prints, the error says which and why."""

from __future__ import annotations

import pytest
from hlo_text import hlo

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


def test_each_newer_construct_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bridge, "jaxlib_version", lambda: (0, 10))
    assert "topk is_stable (jaxlib reads it from 0.11)" in newer_syntax(TOPK)
    assert "compact get-tuple-element" in newer_syntax("ROOT r = f32[] negate(%while.5#1)")
    assert "compare order" in newer_syntax("ROOT c = pred[4] compare(p, p), direction=LT, order=TOTAL")
    assert newer_syntax("ROOT c = pred[4] compare(p, p), direction=LT, type=TOTALORDER") == ""
    monkeypatch.setattr(bridge, "jaxlib_version", lambda: (0, 12))
    assert newer_syntax(TOPK) == ""


@pytest.mark.skipif(jaxlib_version() >= (0, 11), reason="this jaxlib reads is_stable")
def test_the_installed_jaxlib_says_it_is_too_old() -> None:
    with pytest.raises(XlaError, match=r"older than this module's syntax: topk is_stable"):
        canonical(TOPK)
