"""The one scanner of bracketed HLO text: where a string, a ``{…}``, ``(…)`` or ``[…]`` group ends, and
the top-level pieces of a comma list.

Typed attribute values are read once, at parse time; what still scans text (the readers of those
values, validation's refusals in XLA's words, the ``--passes`` option syntax) goes through here, so
strings and nesting are handled alike everywhere.
"""

from __future__ import annotations

_OPEN = "{(["
_CLOSE = "})]"


class BracketError(ValueError):
    """Text whose brackets or strings do not close."""


def string_end(text: str, start: int) -> int:
    """The index after the ``"…"`` string opening at `start` (backslash escapes skipped)."""
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        else:
            i += 1
    raise BracketError("unterminated string")


def group_end(text: str, start: int) -> int:
    """The index after the bracketed group opening at `start`, strings inside kept whole."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = string_end(text, i)
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise BracketError(f"unbalanced {text[start]!r}")


def value_end(text: str, start: int, stops: str = " ,}") -> int:
    """The end of the value at `start`: a string, a bracketed group, or a bare token up to a `stops` character."""
    if start < len(text):
        if text[start] == '"':
            return string_end(text, start)
        if text[start] in _OPEN:
            return group_end(text, start)
    i = start
    while i < len(text) and text[i] not in stops:
        i += 1
    return i


def split_top(text: str, separators: str = ",", strict: bool = False) -> list[str]:
    """`text` split at the `separators` outside brackets and strings. An unclosed group runs to the end;
    `strict`: it is a `BracketError`, and so is a closing bracket that closes nothing."""
    parts: list[str] = []
    begin = i = 0
    while i < len(text):
        ch = text[i]
        if ch in separators:
            parts.append(text[begin:i])
            begin = i = i + 1
        elif ch == '"' or ch in _OPEN:
            try:
                i = value_end(text, i)
            except BracketError:
                if strict:
                    raise BracketError(f"unclosed {ch!r}") from None
                break
        elif strict and ch in _CLOSE:
            raise BracketError(f"unbalanced {ch!r}")
        else:
            i += 1
    parts.append(text[begin:])
    return parts
