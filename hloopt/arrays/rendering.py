"""A comparison in words: the table ``exec``/``compare``/``--verify-numerics`` print, the per-pass table,
and the JSON of ``--json`` and ``--report`` (non-finite floats spelled as strings, which JSON lacks)."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hloopt.arrays.comparing import CompareReport, Drift, OutputComparison

#: The comparison table's columns (`output_cells`).
OUTPUT_COLUMNS = (
    "output",
    "shape",
    "type",
    "bit-identical",
    "max abs",
    "max rel",
    "max ulp",
    "nan",
    "over tol",
    "worst",
)
#: The per-pass table's columns for each of its two comparisons (`drift_cells`).
DRIFT_COLUMNS = ("max abs", "max rel", "max ulp", "nan", "worst")


def report_dict(report: CompareReport) -> dict[str, Any]:
    """JSON-ready: non-finite floats become the strings "inf", "-inf", "nan"."""
    outputs = [
        {**asdict(output), "within_tolerance": output.within_tolerance, "elements": output.elements}
        for output in report.outputs
    ]
    return _json_safe(
        {
            "ok": report.ok,
            "bit_identical": report.bit_identical,
            "rtol": report.rtol,
            "atol": report.atol,
            "seed": report.seed,
            "outputs": outputs,
            "warnings": list(report.warnings),
            "per_pass": None if report.per_pass is None else [asdict(row) for row in report.per_pass],
        }
    )


def table(report: CompareReport) -> str:
    """A table for people: one row per output, then the verdict. Errors are measured where both
    sides are numbers; "nan" counts the elements that are NaN on one side only."""
    header = OUTPUT_COLUMNS
    rows = [header] + [output_cells(output) for output in report.outputs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    over = sum(not output.within_tolerance for output in report.outputs)
    inputs = "given inputs" if report.seed is None else f"seed={report.seed}"
    verdict = "all outputs within tolerance" if over == 0 else f"{over} of {len(report.outputs)} outputs over tolerance"
    lines.append(f"{verdict} (rtol={report.rtol:g}, atol={report.atol:g}, {inputs})")
    return "\n".join(lines)


def per_pass_table(report: CompareReport) -> str:
    """The per-pass table: which pass moved the numbers, and by how much."""
    if not report.per_pass:
        return "per pass: no pass changed the module"
    metrics = DRIFT_COLUMNS
    rows = [("pass", *metrics, *metrics)]
    rows += [(row.name, *drift_cells(row.against_input), *drift_cells(row.against_previous)) for row in report.per_pass]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    group = sum(widths[1:6]) + 2 * 4
    title = "".ljust(widths[0]) + "  " + "against the input".ljust(group) + "  against the previous stage"
    lines = [title] + ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def drift_cells(drift: Drift) -> tuple[str, ...]:
    """A drift's cells of the per-pass table (max abs, max rel, max ulp, nan, worst), for text and HTML alike."""
    ulp = "-" if drift.max_ulp is None else f"{drift.max_ulp} ({drift.ulp_type})"
    worst = "-" if drift.worst_output is None else f"output {drift.worst_output}"
    return f"{drift.max_abs_err:.3g}", f"{drift.max_rel_err:.3g}", ulp, str(drift.nan_mismatches), worst


def output_cells(output: OutputComparison) -> tuple[str, ...]:
    """An output's cells of the comparison table (`table`'s header), for text and HTML alike."""
    types = output.type_a if output.type_a == output.type_b else f"{output.type_a}->{output.type_b}"
    ulp = "-" if output.max_ulp is None else f"{output.max_ulp} ({output.ulp_type})"
    worst = "-" if output.worst_index is None else f"{list(output.worst_index)}: {output.worst_a} vs {output.worst_b}"
    return (
        str(output.index),
        str(list(output.shape)),
        types,
        "yes" if output.bit_identical else "no",
        f"{output.max_abs_err:.3g}",
        f"{output.max_rel_err:.3g}",
        ulp,
        str(output.nan_mismatches),
        f"{output.over_tolerance}/{output.elements}",
        worst,
    )


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value
