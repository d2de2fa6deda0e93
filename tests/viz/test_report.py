"""`viz.report` without a browser: what a page holds, that every text is escaped, that big outputs stay small,
and the order of a batch's index. (`test_report_browser.py` opens real pages.)"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from hloopt.arrays.comparing import CompareReport, Drift, PassRow, compare_outputs
from hloopt.arrays.distribution import distribution
from hloopt.arrays.tracing import OutputTrace, Traced, TraceReport, measure
from hloopt.viz.report import (
    CSP,
    PLOTTED_OUTPUTS,
    IndexEntry,
    ModuleSection,
    index_page,
    report_page,
    worst_first,
)

HOSTILE = '<script>alert("x")</script> & </script><!--'


def comparison(*pairs: tuple[np.ndarray, np.ndarray], per_pass: bool = False) -> CompareReport:
    outputs = tuple(compare_outputs(i, a, b, ("f32", "f32"), 1e-3, 1e-5) for i, (a, b) in enumerate(pairs))
    spreads = tuple(distribution(o.index, a, b, o.worst_index) for o, (a, b) in zip(outputs, pairs))
    rows = (PassRow("upcast-all-to-fp32", Drift.of(outputs), Drift.of(outputs)),) if per_pass else None
    return CompareReport(outputs, 1e-3, 1e-5, 0, ("a warning " + HOSTILE,), rows, spreads)


def pair(n: int, scale: float = 1.001, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    a = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return a, (a * np.float32(scale)).astype(np.float32)


class _Tags(HTMLParser):
    """Every start tag and its attributes, and whether any text sits inside a <script> it did not mean to."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def report_json(page: str) -> list[dict[str, object]]:
    found = re.search(r'<script type="application/json" id="hloopt-report">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_a_comparison_page_holds_its_tables_plots_json_and_module() -> None:
    report = comparison(pair(100), pair(50, 1.01, 1), per_pass=True)
    hlo = "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"
    dtypes = {
        "module": "m",
        "pipeline": "all",
        "dots_and_convolutions": {"listed": 1, "total": 1},
        "scopes": [
            {
                "scope": "jit(f)/dense",
                "rows": [
                    {
                        "kind": "dot",
                        "instructions": ["c"],
                        "opcodes": ["dot"],
                        "before": "bf16,bf16 -> bf16",
                        "after": "f32,f32 -> f32",
                        "auto_cast": None,
                        "skipped": None,
                    }
                ],
            }
        ],
    }
    page = report_page("m.hlo", [ModuleSection("m.hlo", report, dtypes=dtypes, printed=(("after", hlo),))], "cmd")
    found = tags(page)
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}) in found
    assert [a.get("class") for t, a in found if t == "table"] == ["outputs", "per-pass", "dtypes"]
    plots = [a["id"] for t, a in found if t == "div" and a.get("id", "") and "-hist-" in (a["id"] or "")]
    assert plots == ["m0-hist-0", "m0-hist-1"]
    assert page.count("Plotly.newPlot") == 4  # a histogram and a scatter per output
    from plotly.offline import get_plotlyjs

    assert page.count(get_plotlyjs()) == 1  # the library inline, once
    assert report_json(page) == [{"label": "m.hlo", "comparison": report.to_dict(), "trace": None, "dtypes": dtypes}]
    assert '<tr class=changed><td>dot</td><td><a href="#m0-p0-L4">%c</a>' in page  # linked to its line
    assert '<span class="line" id="m0-p0-L4" data-n="4">  ROOT %c = f32[] constant(1)</span>' in page
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=\"?https?:", page)


def test_every_text_is_escaped() -> None:
    report = comparison(pair(10))
    hlo = f"HloModule m\n// {HOSTILE}\nENTRY %e () -> f32[] {{\n  ROOT %c = f32[] constant(1)\n}}\n"
    page = report_page(HOSTILE, [ModuleSection(HOSTILE, report, printed=((HOSTILE, hlo),))], HOSTILE)
    assert HOSTILE not in page
    assert page.count("<script") == page.count("</script>")  # no text opened or closed a script
    scripts = [a for t, a in tags(page) if t == "script"]
    # plotly.js, one per plot (a histogram and a scatter), the JSON: nothing a text opened
    assert scripts == [{"type": "text/javascript"}, {}, {}, {"type": "application/json", "id": "hloopt-report"}]
    assert report_json(page)[0]["label"] == HOSTILE  # the JSON keeps the text, safely
    index = index_page(HOSTILE, [IndexEntry(HOSTILE, HOSTILE, "failed", error=HOSTILE)])
    assert HOSTILE not in index and "&lt;script&gt;" in index


def test_a_page_without_plots_carries_no_plotly() -> None:
    report = CompareReport(comparison(pair(10)).outputs, 1e-3, 1e-5, 0)
    page = report_page("m", [ModuleSection("m", report)])
    assert "plotly" not in page.lower() and len(page) < 20_000


@pytest.mark.parametrize("elements", [1_000_000, pytest.param(10_000_000, marks=pytest.mark.slow)])
def test_a_large_output_makes_a_small_page(elements: int) -> None:
    report = comparison(pair(elements))
    page = report_page("big", [ModuleSection("big", report)])
    from plotly.offline import get_plotlyjs

    assert len(page) - len(get_plotlyjs()) < 600_000  # the sample's 5000 pairs and the bins, not the values
    spread = report.distributions[0] if report.distributions else None
    assert spread is not None and spread.stride == elements // 5000 and sum(spread.ulp_counts) == elements


def test_only_the_worst_outputs_are_drawn() -> None:
    pairs = [pair(8, 1 + i / 1000, i) for i in range(PLOTTED_OUTPUTS + 3)]
    page = report_page("many", [ModuleSection("many", comparison(*pairs))])
    drawn = re.findall(r'id="m0-hist-(\d+)"', page)
    assert len(drawn) == PLOTTED_OUTPUTS and "0" not in drawn and "1" not in drawn  # the least scaled are dropped
    assert f"the {PLOTTED_OUTPUTS} worst of {PLOTTED_OUTPUTS + 3} outputs are drawn" in page


def test_a_trace_links_each_worst_instruction_to_its_line() -> None:
    a = np.ones(4, np.float32)
    b = a + np.float32(1e-3)
    hlo = "HloModule t\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4] parameter(0)\n  ROOT %y = f32[4] negate(%p)\n}\n"
    traced = (
        Traced("p", "p", "p", "", measure(a, a), measure(a, a)),
        Traced("y", "y", "y", "jit(f)/neg", measure(a, b), measure(a, b), "suspect"),
    )
    trace = TraceReport(traced, (OutputTrace(0, "y", ("y",), "suspect"),), 1, 3, "provenance", "f64")
    page = report_page("t", [ModuleSection("t", trace=trace, printed=(("A", hlo),))])
    assert 'first local error over tolerance: <a href="#m0-p0-L5">%y</a>' in page
    assert '<table class="worst">' in page and "jit(f)/neg" in page
    assert report_json(page)[0]["trace"] == json.loads(trace.to_json())


def drift(nans: int, rel: float, abs_: float) -> Drift:
    return Drift(abs_, rel, None, None, nans, 0)


def test_the_index_puts_failures_first_then_the_worst_error() -> None:
    entries = [
        IndexEntry("d.hlo", "d.hlo.html", "changed", drift(0, 0.5, 1.0), False),
        IndexEntry("a.hlo", None, "unchanged"),
        IndexEntry("c.hlo", "c.hlo.html", "changed", drift(3, 0.0, 0.0), False),
        IndexEntry("b.hlo", None, "failed", error="b.hlo: bad"),
        IndexEntry("e.hlo", "e.hlo.html", "changed", drift(0, 0.5, 2.0), True),
        IndexEntry("f.hlo", "f.hlo.html", "changed", drift(0, 0.0, 0.0), True),
    ]
    assert [e.label for e in worst_first(entries)] == ["b.hlo", "c.hlo", "e.hlo", "d.hlo", "f.hlo", "a.hlo"]
    page = index_page("batch", entries)
    assert re.findall(r">([a-f])\.hlo<", page) == ["b", "c", "e", "d", "f", "a"]
    assert '<a href="c.hlo.html">c.hlo</a>' in page and "plotly" not in page.lower()


def test_a_missing_plotly_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from hloopt.errors import HloError
    from hloopt.viz.report import require_plotly

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a))
    with pytest.raises(HloError, match=r"pip install 'hloopt\[viz\]'"):
        require_plotly()
