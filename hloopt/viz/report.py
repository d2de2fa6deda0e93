"""The self-contained HTML report of ``run --verify-numerics``, ``compare`` and ``trace`` (``--html``).

One file that opens offline: plotly.js inlined once in the page, every style inline, a Content-Security-Policy
that forbids any fetch, so the page cannot reach the network even by mistake. It draws what the runs returned
(`CompareReport` with its `ErrorDistribution`s, `TraceReport`, the dtype table's JSON) and runs nothing.
Every text from a module or a path is escaped. A batch gets a page per file and an `index_page`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hloopt.arrays import rendering
from hloopt.arrays.comparing import CompareReport, Drift, OutputComparison
from hloopt.arrays.distribution import SCATTER_CAP, ErrorDistribution, ulp_bin_label
from hloopt.arrays.tracing import TraceReport, error_said
from hloopt.errors import HloError
from hloopt.support.fileio import write_atomic

if TYPE_CHECKING:
    from plotly.graph_objects import Figure

#: The most outputs of one module drawn (worst first); the table lists them all.
PLOTTED_OUTPUTS = 32
#: What the page may load: nothing but itself (inline scripts and styles, data: images plotly makes).
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:"
INSTALL = "pip install 'hloopt[viz]'"

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 2em 3em;color:#1b1f24}
h1{font-size:1.5em;margin:.8em 0 .2em}h2{font-size:1.25em;margin:1.6em 0 .4em;border-bottom:1px solid #ccd}
h3{font-size:1.05em;margin:1.2em 0 .3em}
table{border-collapse:collapse;margin:.4em 0}th,td{border:1px solid #ccd;padding:2px 8px;text-align:left;
vertical-align:top}th{background:#eef1f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.changed td{background:#fff6d6}tr.scope td{background:#f4f6f9;font-weight:600}
.verdict{display:inline-block;padding:2px 10px;border-radius:10px;font-weight:600}
.ok{background:#d7f5dd;color:#135b22}.over{background:#fddcdc;color:#8a1414}
.note{color:#555}.warning{color:#8a5a00}nav a{margin-right:1em}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plot{width:560px;height:380px}
pre.hlo{font:12px/1.35 ui-monospace,monospace;background:#f7f8fa;border:1px solid #dde;padding:.5em 0;
overflow-x:auto}pre.hlo span.line{display:block;padding:0 .8em}pre.hlo span.line:target{background:#ffe58a}
pre.hlo span.line::before{content:attr(data-n);display:inline-block;width:5ch;margin-right:1.5ch;color:#99a;
text-align:right}
"""


def require_plotly() -> None:
    """Refuse early, before anything runs, when the extra that draws the plots is missing."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        raise HloError(f"--html needs plotly, which is not installed: {INSTALL}")


@dataclass(frozen=True)
class ModuleSection:
    """One module's part of a page: what its run found, and the HLO its instruction names link to."""

    label: str
    comparison: CompareReport | None = None
    trace: TraceReport | None = None
    #: ``DtypeTable.to_dict()``: element types per ``op_name`` scope before and after the pipeline.
    dtypes: Mapping[str, Any] | None = None
    #: (caption, HLO text) of each module shown; instruction names link to lines of the first.
    printed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class IndexEntry:
    """One file of a batch: its page (relative to the index), what happened, and its worst error."""

    label: str
    href: str | None
    status: str
    drift: Drift | None = None
    ok: bool | None = None
    error: str | None = None


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], css: str = "", numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(cell)}</th>" for cell in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{_e(cell)}</td>' if i in numeric else f"<td>{_e(cell)}</td>" for i, cell in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _verdict(ok: bool, good: str, bad: str) -> str:
    return f'<span class="verdict {"ok" if ok else "over"}">{_e(good if ok else bad)}</span>'


def _json_script(element_id: str, data: object) -> str:
    """Machine-readable data in the page, safe inside <script> (no ``</`` can close it)."""
    text = json.dumps(data).replace("<", "\\u003c")  # no "</script>" or "<!--" can close or hide it
    return f'<script type="application/json" id="{_e(element_id)}">{text}</script>'


# --- the pieces of a module's section -------------------------------------------------------------------------


def _summary(comparison: CompareReport) -> str:
    over = sum(not output.within_tolerance for output in comparison.outputs)
    said = (
        "all outputs within tolerance" if over == 0 else f"{over} of {len(comparison.outputs)} outputs over tolerance"
    )
    inputs = "given inputs" if comparison.seed is None else f"seed={comparison.seed}"
    tolerance = f"rtol={comparison.rtol:g}, atol={comparison.atol:g}, {inputs}"
    warnings = "".join(f'<li class="warning">{_e(w)}</li>' for w in comparison.warnings)
    rows = [rendering.output_cells(output) for output in comparison.outputs]
    table = _table(rendering.OUTPUT_COLUMNS, rows, "outputs", numeric=(0, 4, 5, 6, 7, 8))
    return (
        f'<p class="summary">{_verdict(comparison.ok, said, said)} <span class="note">{_e(tolerance)}</span></p>'
        + (f"<ul>{warnings}</ul>" if warnings else "")
        + table
    )


def _per_pass(comparison: CompareReport) -> str:
    if comparison.per_pass is None:
        return ""
    if not comparison.per_pass:
        return '<h3>Per pass</h3><p class="note">no pass changed the module</p>'
    columns = rendering.DRIFT_COLUMNS
    header = ["pass", *(f"{c} (vs input)" for c in columns), *(f"{c} (vs previous)" for c in columns)]
    rows = [
        (row.name, *rendering.drift_cells(row.against_input), *rendering.drift_cells(row.against_previous))
        for row in comparison.per_pass
    ]
    return "<h3>Per pass</h3>" + _table(header, rows, "per-pass", numeric=(1, 2, 3, 4, 6, 7, 8, 9))


def _dtypes(table: Mapping[str, Any], anchors: Mapping[str, str]) -> str:
    """The element types per layer: a heading row per scope, the rows whose types changed marked."""
    header = ("kind", "instruction", "before", "after", "auto-cast")
    body: list[str] = []
    changed = 0
    for scope in table["scopes"]:
        body.append(f'<tr class="scope"><td colspan="5">{_e(scope["scope"])}</td></tr>')
        for row in scope["rows"]:
            names = row["instructions"]
            what = _link(names[0], anchors) if len(names) == 1 else _e(f"{len(names)}× {','.join(row['opcodes'])}")
            note = f"skipped: {row['skipped']}" if row["skipped"] else row["auto_cast"] or ""
            moved = row["before"] != row["after"]
            changed += moved
            cells = [_e(row["kind"]), what, _e(row["before"]), _e(row["after"]), _e(note)]
            body.append(f"<tr{' class=changed' if moved else ''}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    coverage = table["dots_and_convolutions"]
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    return (
        "<h3>Element types per layer</h3>"
        f'<p class="note">after {_e(table["pipeline"] or "no passes")}: {changed} rows changed type (marked); '
        f"dots and convolutions: {coverage['listed']} of {coverage['total']} listed</p>"
        f'<table class="dtypes"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _link(name: str, anchors: Mapping[str, str]) -> str:
    """`%name`, linked to its line of the printed module when it is there."""
    target = anchors.get(name)
    text = _e(f"%{name}")
    return f'<a href="#{_e(target)}">{text}</a>' if target else text


def _trace(trace: TraceReport, anchors: Mapping[str, str]) -> str:
    first = trace.first
    lines = [
        f'<p class="summary">{_verdict(trace.ok, "no local error over tolerance", "local error over tolerance")} '
        f'<span class="note">matched {len(trace.instructions)} instructions by {_e(trace.matched_by)}; '
        f"{trace.rounds} rounds, {trace.executions} executions</span></p>"
    ]
    if first is not None:
        lines.append(
            f"<p>first local error over tolerance: {_link(first.origin, anchors)}: {_e(error_said(first.local))}</p>"
        )
    rows: list[str] = []
    for scope, members in trace.ranked():
        rows.append(f'<tr class="scope"><td colspan="5">{_e(scope or "(no op_name)")}</td></tr>')
        for t in members:
            cells = [_link(t.origin, anchors), _e(error_said(t.local)), _e(error_said(t.propagated))]
            cells += [_e("yes" if t.makes_error else "no"), _e(t.verdict or "-")]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if rows:
        head = "".join(f"<th>{h}</th>" for h in ("instruction", "local", "propagated", "over tolerance", "verdict"))
        lines.append(f"<h3>Worst instructions (top {trace.top}, by op_name scope)</h3>")
        lines.append(f'<table class="worst"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    paths = []
    for output in trace.outputs:
        if output.instruction is None:
            paths.append(f"<li>output {output.index}: not an instruction of the entry (not traced)</li>")
            continue
        chain = " &larr; ".join(_link(name, anchors) for name in output.path)
        verdict = f" [{_e(output.verdict)}]" if output.verdict else ""
        paths.append(f"<li>output {output.index}: {chain}{verdict}</li>")
    lines.append("<h3>Where each output's error entered</h3><ul class=paths>" + "".join(paths) + "</ul>")
    if trace.reference_error:
        lines.append(f"<p>no f64 reference: {_e(trace.reference_error)}</p>")
    elif trace.verdict is not None:
        lines.append(f"<p>verdict against {_e(trace.reference)}: {_e(trace.verdict)}</p>")
    return "".join(lines)


def _histogram(spread: ErrorDistribution, output: OutputComparison) -> Figure:
    import plotly.graph_objects as go

    labels = [ulp_bin_label(i) for i in range(len(spread.ulp_counts))]
    counts = list(spread.ulp_counts)
    if output.nan_mismatches:
        labels.append("NaN mismatch")
        counts.append(output.nan_mismatches)
    figure = go.Figure(go.Bar(x=labels, y=counts, text=counts, textposition="auto", marker_color="#4c72b0"))
    unit = f"ULPs of {spread.ulp_type}" if spread.ulp_type else "ULPs"
    figure.update_layout(
        title=f"output {output.index}: error in {unit} ({spread.elements} elements)",
        xaxis={"title": unit, "type": "category"},
        yaxis={"title": "elements"},
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return figure


def _scatter(spread: ErrorDistribution, output: OutputComparison) -> Figure:
    import plotly.graph_objects as go

    xs, ys = list(spread.sample_a), list(spread.sample_b)
    low, high = (min(xs + ys), max(xs + ys)) if xs else (0.0, 1.0)
    figure = go.Figure(
        [
            go.Scatter(x=[low, high], y=[low, high], mode="lines", name="B = A", line={"color": "#aaa", "dash": "dot"}),
            go.Scatter(x=xs, y=ys, mode="markers", name="elements", marker={"size": 4, "color": "#c44e52"}),
        ]
    )
    sample = f"every {spread.stride}th element" if spread.sampled else "every element"
    figure.update_layout(
        title=f"output {output.index}: B against A ({sample}, at most {SCATTER_CAP})",
        xaxis={"title": f"A ({output.type_a})"},
        yaxis={"title": f"B ({output.type_b})"},
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        showlegend=False,
    )
    return figure


def _plots(comparison: CompareReport, prefix: str) -> str:
    """A histogram and a scatter plot per output, the worst `PLOTTED_OUTPUTS` of them."""
    if not comparison.distributions:
        return ""
    import plotly.io as pio

    by_index = {output.index: output for output in comparison.outputs}
    ranked = sorted(
        comparison.distributions,
        key=lambda d: (by_index[d.index].nan_mismatches, by_index[d.index].max_rel_err, -d.index),
        reverse=True,
    )
    shown = sorted(ranked[:PLOTTED_OUTPUTS], key=lambda d: d.index)
    parts = ["<h3>Error per output</h3>"]
    if len(ranked) > PLOTTED_OUTPUTS:
        parts.append(f'<p class="note">the {PLOTTED_OUTPUTS} worst of {len(ranked)} outputs are drawn</p>')
    config = {"displaylogo": False, "responsive": True}
    for spread in shown:
        output = by_index[spread.index]
        parts.append(f'<div class="plots" id="{prefix}-output-{spread.index}">')
        for kind, figure in (("hist", _histogram(spread, output)), ("scatter", _scatter(spread, output))):
            div_id = f"{prefix}-{kind}-{spread.index}"
            drawn = pio.to_html(figure, full_html=False, include_plotlyjs=False, div_id=div_id, config=config)
            parts.append(f'<div class="plot {kind}">{drawn}</div>')
        parts.append("</div>")
    return "".join(parts)


_DEFINED = re.compile(r"^\s*(?:ROOT\s+)?%?([^\s=%]+)\s*=", re.MULTILINE)


def _printed(printed: Sequence[tuple[str, str]], prefix: str) -> tuple[str, dict[str, str]]:
    """The modules with an anchor per line, and the anchor of each instruction defined in the first."""
    anchors: dict[str, str] = {}
    parts: list[str] = []
    for number, (caption, text) in enumerate(printed):
        lines = text.splitlines()
        ids = [f"{prefix}-p{number}-L{n}" for n in range(1, len(lines) + 1)]
        if number == 0:
            for n, line in enumerate(lines):
                found = _DEFINED.match(line)
                if found and not line.lstrip().startswith(("HloModule", "//")):
                    anchors.setdefault(found.group(1), ids[n])
        body = "".join(
            f'<span class="line" id="{i}" data-n="{n}">{_e(line)}</span>'
            for n, (i, line) in enumerate(zip(ids, lines), 1)
        )
        parts.append(f"<h3>{_e(caption)}</h3><pre class=hlo>{body}</pre>")
    return "".join(parts), anchors


def _section(section: ModuleSection, number: int, headed: bool) -> str:
    prefix = f"m{number}"
    printed, anchors = _printed(section.printed, prefix)
    parts = [f'<section class="module" id="{prefix}">' + (f"<h2>{_e(section.label)}</h2>" if headed else "")]
    if section.comparison is not None:
        parts += [_summary(section.comparison), _per_pass(section.comparison)]
    if section.dtypes is not None:
        parts.append(_dtypes(section.dtypes, anchors))
    if section.comparison is not None:
        parts.append(_plots(section.comparison, prefix))
    if section.trace is not None:
        parts.append(_trace(section.trace, anchors))
    parts += [printed, "</section>"]
    return "".join(parts)


def _data(section: ModuleSection) -> dict[str, Any]:
    return {
        "label": section.label,
        "comparison": None if section.comparison is None else section.comparison.to_dict(),
        "trace": None if section.trace is None else section.trace.to_dict(),
        "dtypes": section.dtypes,
    }


def _page(title: str, body: str, scripts: str = "") -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width"><title>{_e(title)}</title>'
        f"<style>{STYLE}</style>{scripts}</head><body>{body}</body></html>\n"
    )


def report_page(title: str, sections: Sequence[ModuleSection], command: str | None = None) -> str:
    """The page of one file (a section per module: a split file has several), with plotly.js inline when it has
    plots. Its JSON (the ``--json`` forms of the reports) is in the page too, as ``#hloopt-report``."""
    body = [f"<h1>{_e(title)}</h1>"]
    if command:
        body.append(f'<p class="note">{_e(command)}</p>')
    if len(sections) > 1:
        body.append("<nav>" + "".join(f'<a href="#m{i}">{_e(s.label)}</a>' for i, s in enumerate(sections)) + "</nav>")
    body += [_section(section, number, len(sections) > 1) for number, section in enumerate(sections)]
    body.append(_json_script("hloopt-report", [_data(section) for section in sections]))
    plotted = any(s.comparison is not None and s.comparison.distributions for s in sections)
    scripts = ""
    if plotted:
        from plotly.offline import get_plotlyjs

        scripts = f'<script type="text/javascript">{get_plotlyjs()}</script>'
    return _page(title, "".join(body), scripts)


def write_report(path: str, title: str, sections: Sequence[ModuleSection], command: str | None = None) -> None:
    """`report_page` written whole at `path` (the project's one writer), or not at all."""
    write_atomic(path, report_page(title, sections, command))


def worst_first(entries: Sequence[IndexEntry]) -> list[IndexEntry]:
    """A batch's files by their worst error: failed ones first, then those over tolerance and within it by NaN
    mismatches, max rel and max abs (`Drift`'s order), then those not compared; by name within each."""

    def key(entry: IndexEntry) -> tuple[int, float, float, float, str]:
        if entry.error is not None:
            return (0, 0.0, 0.0, 0.0, entry.label)
        if entry.drift is None:
            return (2, 0.0, 0.0, 0.0, entry.label)
        nans, rel, abs_ = entry.drift.severity
        return (1, -float(nans), -rel, -abs_, entry.label)

    return sorted(entries, key=key)


def index_page(title: str, entries: Sequence[IndexEntry]) -> str:
    """A batch's index: a row per file, worst first (`worst_first`), each linked to its page."""
    header = ("module", "status", "verdict", "max ulp", "max rel", "max abs", "nan", "worst")
    rows: list[str] = []
    for entry in worst_first(entries):
        name = f'<a href="{_e(entry.href)}">{_e(entry.label)}</a>' if entry.href else _e(entry.label)
        if entry.error is not None:
            cells = [_e(entry.status), _verdict(False, "", "error"), f'<span class="note">{_e(entry.error)}</span>']
            rows.append(f"<tr><td>{name}</td>" + "".join(f"<td>{c}</td>" for c in cells) + '<td colspan="5"></td></tr>')
            continue
        if entry.drift is None:
            rows.append(
                f'<tr><td>{name}</td><td>{_e(entry.status)}</td><td colspan="6" class="note">not compared</td></tr>'
            )
            continue
        said = rendering.drift_cells(entry.drift)
        ok = bool(entry.ok)
        cells = [_e(entry.status), _verdict(ok, "within tolerance", "over tolerance")]
        numbers = [said[2], said[1], said[0], said[3]]
        rows.append(
            f"<tr><td>{name}</td>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "".join(f'<td class="num">{_e(c)}</td>' for c in numbers)
            + f"<td>{_e(said[4])}</td></tr>"
        )
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = (
        f"<h1>{_e(title)}</h1><p class=note>{len(entries)} files, worst error first</p>"
        f'<table class="index"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    return _page(title, body)
