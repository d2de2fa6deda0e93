"""`HloParseError.render`: a long source line is clipped around the caret, which stays under its character."""

from __future__ import annotations

from pathlib import Path

import pytest

from hloopt.errors import SHOWN_WIDTH, parse_error_at
from tests.cli_invoke import invoke


def _shown_and_caret(rendered: str) -> tuple[str, int]:
    """The quoted line and the caret's column in it (both without their two-space indent)."""
    _, line, caret = rendered.split("\n")
    return line[2:], caret.index("^") - 2


@pytest.mark.parametrize("column", [0, 1, 50, 99, 100, 101, 500, 5_000, 9_998, 9_999, 10_000])
def test_a_long_line_is_clipped_around_the_caret(column: int) -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    error = parse_error_at(line, column, "f.hlo", "bad")
    shown, caret = _shown_and_caret(error.render())
    assert len(shown.strip("…")) <= SHOWN_WIDTH
    assert shown.startswith("…") == (column > 100)
    assert shown.endswith("…") == (column < 10_000 - 60)
    if column < len(line):
        assert shown[caret] == line[column]  # the caret is under the character it names
    else:
        assert caret == len(shown)  # just after the line's end
    assert error.render().startswith(f"f.hlo:1:{column + 1}: bad\n")


def test_a_short_line_is_shown_whole_and_unprintables_keep_the_caret_aligned() -> None:
    text = "a\x1bbc = f32[] bogus(x)"
    error = parse_error_at(text, text.index("bogus"), "f.hlo", "bad")
    shown, caret = _shown_and_caret(error.render())
    assert shown == "a\\x1bbc = f32[] bogus(x)"
    assert shown[caret:].startswith("bogus")


def test_a_long_line_with_unprintables_is_clipped_by_characters_and_stays_aligned() -> None:
    line = "\x01" * 5_000 + "X" + "\x02" * 5_000
    shown, caret = _shown_and_caret(parse_error_at(line, 5_000, "f.hlo", "bad").render())
    assert shown[caret] == "X"
    assert len(shown) < 4 * SHOWN_WIDTH + 2


def test_an_error_on_a_one_megabyte_line_prints_a_few_hundred_bytes(tmp_path: Path) -> None:
    literal = ", ".join(["1"] * 350_000)  # about 1 MB on one line, with an error at its end
    module = tmp_path / "big.hlo"
    module.write_text(f"HloModule m\n\nENTRY e {{\n  ROOT c = f32[350000] constant({{{literal}, x}})\n}}\n")
    assert module.stat().st_size > 1_000_000
    result = invoke("run", module)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"hloopt: error: {module}:4:")
    assert len(result.stderr) < 1_000
    shown, caret = _shown_and_caret(result.stderr.rstrip("\n").removeprefix("hloopt: error: "))
    assert shown[caret] == "x"
