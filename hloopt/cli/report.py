"""``hloopt report merge``: the shards' ``--report`` files as the report of the whole run."""

from __future__ import annotations

import sys

import click

from hloopt.cli.main import reports_errors, same_file
from hloopt.driver import report
from hloopt.errors import HloError
from hloopt.support.fileio import check_output, write_atomic


@click.group("report")
def report_group() -> None:
    """Work with the JSON reports of 'hloopt run --report'."""


@report_group.command("merge")
@click.argument("paths", metavar="REPORT.json...", nargs=-1, required=True)
@click.option("-o", "--output", metavar="FILE", help="Write the merged report here (atomically) instead of stdout.")
@reports_errors
def merge_command(paths: tuple[str, ...], output: str | None) -> None:
    """Merge the --report files of 'hloopt run --shard K/N', one per shard, into the run's report.

    The summary goes to stderr as the run prints it. Exit 0 when every module is
    fine, 1 when a shard had a failure (or, with --check, a module that would
    change), 2 when the reports are not the shards of one run.
    """
    if output is not None and output != "-":
        check_output(output)
        for path in paths:
            if same_file(path, output):
                raise HloError(f"{output}: is one of the reports being merged; write the merge elsewhere")
    merged = report.merge([(path, report.read(path)) for path in paths])
    if output is None or output == "-":
        click.echo(report.to_json(merged), nl=False)
    else:
        write_atomic(output, report.to_json(merged))
    for line in report.summary_lines(merged):
        click.echo(line, err=True)
    sys.exit(0 if report.report_ok(merged) else 1)
