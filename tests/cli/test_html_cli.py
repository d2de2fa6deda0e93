"""``--html`` refused before anything runs: a page that cannot be written, plotly missing, or beside an option
it cannot draw (exit 2, no traceback, nothing written)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from cli_invoke import invoke

INT8 = Path(__file__).resolve().parents[2] / "examples" / "int8_matmul.hlo"

COMMANDS = {
    "run": ["run", INT8, "--passes", "all", "--verify-numerics"],
    "compare": ["compare", INT8, INT8],
    "trace": ["trace", INT8, "--passes", "all"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_page_in_a_missing_directory_is_refused_first(command: str, tmp_path: Path) -> None:
    page = tmp_path / "missing" / "r.html"
    result = invoke(*COMMANDS[command], "--html", page)
    assert result.exit_code == 2
    assert f"hloopt: error: {page}" in result.stderr
    assert not page.parent.exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_without_plotly_the_error_names_the_extra(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a))
    result = invoke(*COMMANDS[command], "--html", tmp_path / "r.html")
    assert result.exit_code == 2
    assert "hloopt: error: --html needs plotly, which is not installed: pip install 'hloopt[viz]'" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["--nan", "--bisect"])
def test_trace_draws_neither_nan_nor_bisect(flag: str, tmp_path: Path) -> None:
    result = invoke("trace", INT8, "--passes", "all", flag, "--html", tmp_path / "r.html")
    assert result.exit_code == 2 and "--html draws the trace" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_batch_html_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "m.hlo").write_text(INT8.read_text())
    taken = tmp_path / "taken"
    taken.write_text("")
    result = invoke("run", tmp_path / "in", "--passes", "all", "--verify-numerics", "--check", "--html", taken)
    assert result.exit_code == 2 and f"hloopt: error: {taken}" in result.stderr
    assert taken.read_text() == ""


@pytest.mark.slow
def test_a_split_file_is_one_page_with_a_section_per_chunk(tmp_path: Path) -> None:
    module = tmp_path / "two.hlo"
    module.write_text(INT8.read_text() + "\n// -----\n\n" + INT8.read_text())
    page = tmp_path / "r.html"
    args = ["run", module, "--split-input-file", "--passes", "all", "--verify-numerics", "--html", page]
    result = invoke(*args, "-o", tmp_path / "out.hlo")
    assert result.exit_code == 0, result.stderr
    text = page.read_text()
    assert text.count('<table class="outputs">') == 2 and text.count('<section class="module"') == 2
    assert f'<a href="#m0">{module}:' in text and f'<a href="#m1">{module}:' in text  # a link per chunk


def test_a_batch_member_s_page_is_its_path_below_the_html_directory() -> None:
    from pathlib import PurePosixPath

    from hloopt.driver.batch import html_page
    from hloopt.driver.flow import Job

    assert html_page(Job("in/a/b.hlo", PurePosixPath("a/b.hlo")), "pages") == str(Path("pages/a/b.hlo.html"))
    assert html_page(Job("../x/m.pb"), "pages") == str(Path("pages/__/x/m.pb.html"))  # a file INPUT, kept inside
    assert html_page(Job("m.hlo"), None) is None


@pytest.mark.slow
def test_a_snapshot_against_its_recorded_result(jax_snapshots: dict[str, Path], tmp_path: Path) -> None:
    """``compare SNAPSHOT --html``: the plots come from the recorded result and the run, in the worker."""
    page = tmp_path / "r.html"
    result = invoke("compare", jax_snapshots["bf16_matmul"], "--passes", "all", "--json", "--html", page)
    assert result.exit_code in (0, 1), result.stderr
    text = page.read_text()
    for output in json.loads(result.stdout)["outputs"]:
        assert f'id="m0-hist-{output["index"]}"' in text and f'id="m0-scatter-{output["index"]}"' in text
    assert "(recorded) against" in text


def test_compare_with_passes_shows_b_as_it_ran(tmp_path: Path) -> None:
    """B as written does not show what --passes did to it: the page holds B's text as XLA ran it too."""
    page = tmp_path / "r.html"
    result = invoke("compare", INT8, INT8, "--passes", "all", "--html", page)
    assert result.exit_code in (0, 1), result.stderr  # 1: the F32 dot of s8 values is not exact at every K
    text = page.read_text()
    assert "B as run: after all, made runnable on XLA&#x27;s CPU" in text
    assert "Downcast for int support" in text and "Downcast for int support" not in INT8.read_text()
    plain = tmp_path / "plain.html"
    assert invoke("compare", INT8, INT8, "--html", plain).exit_code == 0  # the same module: equal
    assert "B as run" not in plain.read_text()  # without passes, B ran as written
