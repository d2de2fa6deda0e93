"""``--split-input-file``: a text file of several modules, one per ``// -----`` chunk.

The separator is mlir-opt's, ``// -----``, here a line of its own: at the start of the line,
trailing blanks allowed. Any other line that opens with ``//`` and three or more dashes
(``// ---``, ``// ------``, ``//-----``, an indented separator, ``// ----- text``) is a near miss
and an error (mlir-opt only warns), so a mistyped separator never glues two modules together
silently. Outputs rejoin the chunks with ``// -----`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hloopt.errors import HloError, parse_error_at
from hloopt.support.formats import Format

if TYPE_CHECKING:
    from hloopt.xla.formats import Loaded

SEPARATOR = "// -----"
_SEPARATOR_LINE = re.compile(r"^// -----[ \t\r]*$", re.M)
_NEAR_MISS = re.compile(r"^[ \t]*(//[ \t]*-{3,}[^\n]*)", re.M)
#: What a format other than HLO text is called when --split-input-file refuses it.
_ONE_MODULE_FORMATS = {
    Format.PROTO: "a serialized HloModuleProto",
    Format.PROTO_WRAPPER: "an HloProto dump",
    Format.SNAPSHOT: "an HloSnapshot",
    Format.STABLEHLO: "StableHLO",
    Format.STABLEHLO_BYTECODE: "MLIR bytecode",
}


@dataclass(frozen=True)
class Place:
    """Where a chunk is in its file: its index (counting from 1) and the line it starts on."""

    index: int
    line: int


def label(path: str, chunk: Place | None) -> str:
    """A module as messages name it: its file, and for a chunk the line it starts on and its index."""
    return path if chunk is None else f"{path}:{chunk.line} (chunk {chunk.index})"


def in_chunk(err: HloError, where: str, *paths: str) -> HloError:
    """A chunk's error as it is shown: one located in its file (``FILE:LINE:COL: …``) stands as it
    is; any other is named after the chunk, `where`, rather than only after the file."""
    message = str(err)
    if any(re.match(rf"{re.escape(path)}:\d+:\d+: ", message) for path in paths):
        return err
    for path in paths:
        message = message.removeprefix(f"{path}: ")
    return HloError(f"{where}: {message}")


@dataclass(frozen=True)
class Chunk:
    """One module of a split file and its text."""

    place: Place
    text: str

    @property
    def located(self) -> str:
        """The chunk at its place in the file (blank lines stand for the lines above it), so every
        parser's line numbers, hloopt's and XLA's, are the file's."""
        return "\n" * (self.place.line - 1) + self.text


def split(text: str, name: str) -> list[Chunk]:
    """The chunks of `text` (read from `name`); a near-miss separator or an empty chunk is a located error."""
    for near in _NEAR_MISS.finditer(text):
        if not _SEPARATOR_LINE.match(text, near.start()):
            found = near.group(1).rstrip()
            raise parse_error_at(
                text,
                near.start(1),
                name,
                f"expected the chunk separator `{SEPARATOR}` alone on its line, found `{found}`",
            )
    separators = list(_SEPARATOR_LINE.finditer(text))
    starts = [0, *(m.end() + 1 for m in separators)]
    ends = [*(m.start() for m in separators), len(text)]
    chunks = [
        Chunk(Place(index, text.count("\n", 0, start) + 1), text[start:end])
        for index, (start, end) in enumerate(zip(starts, ends), 1)
    ]
    if len(chunks) > 1:
        for chunk, end in zip(chunks, ends):
            if not chunk.text.strip():
                # The separator after an empty chunk, or for the last one the separator before it.
                at, where = (end, "before") if end < len(text) else (separators[-1].start(), "after")
                raise parse_error_at(text, at, name, f"empty chunk: expected an HLO module {where} this `{SEPARATOR}`")
    return chunks


def split_loaded(loaded: Loaded, name: str) -> list[Chunk]:
    """The chunks of a module file as `hloopt.xla.formats.load` read it; only HLO text has chunks."""
    if loaded.format is not Format.HLO:
        raise HloError(
            f"{name}: --split-input-file splits HLO text at `{SEPARATOR}` lines; this file is "
            f"{_ONE_MODULE_FORMATS[loaded.format]}, which holds one module"
        )
    return split(loaded.text, name)


def as_file(text: str) -> str:
    """A module's text as a file holds it, ending in exactly one newline.

    XLA's printer (and so stdout) ends a module with a blank line, which pre-commit's
    end-of-file-fixer and most editors remove; files written and compared in this form
    let `hloopt-format` and end-of-file-fixer agree (docs/decisions.md, issue 23).
    """
    return text.rstrip("\n") + "\n"


def join(texts: Sequence[str]) -> str:
    """The chunks' texts as one file, each ending in a newline, a separator line between two."""
    return f"{SEPARATOR}\n".join(text if text.endswith("\n") else text + "\n" for text in texts)
