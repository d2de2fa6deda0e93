"""The HTML reports of ``compare``, ``run --verify-numerics`` (a file and a batch) and ``trace``, made by the
command line from the shipped examples and opened in headless Chromium (`tests/browser.py`): no console
error, no request but the page itself, the tables and plots in the DOM with the figures of the JSON
report, each link landing on its line of HLO, and a screenshot for a person to look at.

``HLOOPT_REGEN_SCREENSHOTS=1`` also writes the README's picture, docs/images/report-run.png.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser import BrowserPage, open_page, require_browser
from cli_invoke import invoke

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
MLP = EXAMPLES / "fp8_bf16_mlp.hlo"
README_IMAGE = REPO / "docs" / "images" / "report-run.png"

pytestmark = pytest.mark.slow


def clean(seen: BrowserPage) -> None:
    """What every report must be: no error of any kind, nothing fetched."""
    assert seen.console_errors == []
    assert seen.page_errors == []
    assert seen.foreign_requests == []


def cells(seen: BrowserPage, selector: str) -> list[list[str]]:
    rows = seen.page.locator(f"{selector} tbody tr").all()
    return [[cell.strip() for cell in row.locator("td").all_inner_texts()] for row in rows]


def output_cells(output: dict[str, Any]) -> list[str]:
    """The figures of one output of ``--json``, as the page's table writes them (three significant digits)."""
    ulp = "-" if output["max_ulp"] is None else f"{output['max_ulp']} ({output['ulp_type']})"
    return [
        str(output["index"]),
        f"{float(output['max_abs_err']):.3g}",
        f"{float(output['max_rel_err']):.3g}",
        ulp,
        str(output["nan_mismatches"]),
        f"{output['over_tolerance']}/{output['elements']}",
    ]


def plotted(seen: BrowserPage, div_id: str) -> list[dict[str, Any]]:
    """The traces plotly drew into `div_id`, read back from the live page."""
    return seen.page.evaluate(
        "id => document.getElementById(id).data.map(t => ({x: Array.from(t.x), y: Array.from(t.y)}))", div_id
    )


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_browser()
    return tmp_path_factory.mktemp("reports")


def test_compare_report_has_the_json_figures(pages: Path) -> None:
    page = pages / "compare.html"
    result = invoke("compare", MLP, MLP, "--passes", "all", "--numerics", "xla,neuron", "--json", "--html", page)
    assert result.exit_code == 1, result.stderr  # the f32 rewrite moves the outputs past compare's tolerance
    report = json.loads(result.stdout)
    with open_page(page.as_uri()) as seen:
        clean(seen)
        rows = cells(seen, "table.outputs")
        assert [[row[0], *row[4:9]] for row in rows] == [output_cells(o) for o in report["outputs"]]
        for output in report["outputs"]:
            (bars,) = plotted(seen, f"m0-hist-{output['index']}")
            assert sum(bars["y"]) == output["elements"]  # every element in a bin, or a NaN mismatch
            diagonal, points = plotted(seen, f"m0-scatter-{output['index']}")
            assert len(points["x"]) == min(output["elements"], 5000) and len(diagonal["x"]) == 2
        assert seen.page.locator(".js-plotly-plot").count() == 2 * len(report["outputs"])
        embedded = json.loads(seen.page.locator("#hloopt-report").inner_text())
        assert embedded[0]["comparison"] == report
        shot = seen.screenshot(pages / "compare.png")
    assert shot.stat().st_size > 10_000


def test_run_report_per_pass_and_per_layer(pages: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = pages / "run.html"
    monkeypatch.chdir(REPO)  # the page names the module as the README's command line does
    args = ["run", MLP.relative_to(REPO), "--passes", "all", "--verify-numerics", "--per-pass", "--numerics", "neuron"]
    result = invoke(*args, "--html", page)
    assert result.exit_code == 1, result.stderr
    assert f"HTML report: {page}" in result.stderr
    with open_page(page.as_uri(), height=1400) as seen:
        clean(seen)
        report = json.loads(seen.page.locator("#hloopt-report").inner_text())[0]["comparison"]
        per_pass = cells(seen, "table.per-pass")
        assert [row[0] for row in per_pass] == [row["name"] for row in report["per_pass"]]
        for row, figures in zip(per_pass, report["per_pass"]):
            assert row[1:3] == [f"{figures['against_input'][k]:.3g}" for k in ("max_abs_err", "max_rel_err")]
        assert [row[4:9] for row in cells(seen, "table.outputs")] == [output_cells(o)[1:] for o in report["outputs"]]
        changed = seen.page.locator("table.dtypes tr.changed")
        assert changed.count() >= 1
        link = seen.page.locator("table.dtypes a").first
        name = link.inner_text()
        link.click()
        assert f"{name} = " in seen.page.locator(":target").inner_text()
        seen.page.evaluate("window.scrollTo(0, 0)")
        seen.page.mouse.move(0, 0)  # no plot's hover toolbar in the picture
        shot = seen.screenshot(pages / "run.png", full_page=False)
        if os.environ.get("HLOOPT_REGEN_SCREENSHOTS") == "1":
            README_IMAGE.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, README_IMAGE)
    assert README_IMAGE.read_bytes().startswith(b"\x89PNG")  # the README's picture, made by this test


def test_trace_report_links_the_worst_instructions(pages: Path) -> None:
    page = pages / "trace.html"
    result = invoke("trace", MLP, "--passes", "all", "--reference", "f64", "--json", "--html", page)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    with open_page(page.as_uri()) as seen:
        clean(seen)
        links = seen.page.locator("table.worst a").all()
        named = [link.inner_text().removeprefix("%") for link in links]
        assert named == [name for group in report["top"] for name in group["instructions"]]
        for link, name in zip(links, named):
            target = seen.page.locator(link.get_attribute("href") or "")
            assert f"%{name} = " in target.inner_text()
        path = seen.page.locator("ul.paths li").first.inner_text()
        assert path.startswith("output 0: ") and all(f"%{n}" in path for n in report["outputs"][0]["path"])
        seen.screenshot(pages / "trace.png")


def test_batch_index_sorts_by_worst_error(pages: Path, tmp_path: Path) -> None:
    html = pages / "batch"
    report_path = tmp_path / "report.json"
    args = ["run", EXAMPLES, "--passes", "all", "--verify-numerics", "-o", tmp_path / "out", "-j", "1"]
    result = invoke(*args, "--report", report_path, "--html", html)
    assert result.exit_code == 1, result.stderr
    modules = json.loads(report_path.read_text())["modules"]

    def severity(module: dict[str, Any]) -> tuple[int, float, float]:
        """`Drift.of` over the module's outputs, from the --report JSON."""
        outputs = module["numerics"]["outputs"]
        nans = sum(o["nan_mismatches"] for o in outputs)
        return nans, max(float(o["max_rel_err"]) for o in outputs), max(float(o["max_abs_err"]) for o in outputs)

    expected = [m["path"] for m in sorted(modules, key=severity, reverse=True)]
    with open_page((html / "index.html").as_uri()) as seen:
        clean(seen)
        rows = cells(seen, "table.index")
        assert [row[0] for row in rows] == expected
        hrefs = seen.page.locator("table.index a").evaluate_all("links => links.map(a => a.href)")
        seen.screenshot(pages / "index.png")
    assert len(hrefs) == len(modules)
    with open_page(hrefs[0]) as seen:  # the worst module's own page
        clean(seen)
        assert seen.page.locator("table.outputs").count() == 1
