"""The generic instruction attributes passes edit: metadata, frontend attributes, their order.

Their values stay raw text in the IR; these helpers read and write just enough
of ``metadata={…}`` and ``frontend_attributes={…}`` to add an entry without
disturbing the rest, and print them the way XLA does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # module.py imports this file; the type is only needed for annotations
    from hloopt.ir.module import AttributeValue

_Value = TypeVar("_Value", bound="AttributeValue")


class MapSyntaxError(ValueError):
    """A ``{key=value …}`` map the readers here cannot take apart (the IR cannot raise HloError:
    ir/ imports nothing else of hloopt; passes turn this into one naming the instruction)."""


#: Where XLA prints the generic attributes, after the opcode-specific ones
#: (``HloInstruction::PrintExtraAttributes`` then ``PrintWithCanonicalNameMap``).
GENERIC_ORDER = ("sharding", "frontend_attributes", "control-predecessors", "metadata", "origin", "backend_config")


def canonical_order(attributes: dict[str, _Value]) -> dict[str, _Value]:
    """Opcode-specific attributes first (as they were), then the generic ones in XLA's order."""
    specific = {k: v for k, v in attributes.items() if k not in GENERIC_ORDER}
    generic = {k: attributes[k] for k in GENERIC_ORDER if k in attributes}
    return specific | generic


def _scan_value(text: str, start: int) -> int:
    """End index of the value at `start`: a quoted string, a ``{…}`` blob or a bare token."""
    if start >= len(text):
        raise MapSyntaxError("expects a value after '='")
    if text[start] == '"':
        i = start + 1
        while i < len(text) and text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        if i >= len(text):
            raise MapSyntaxError("unterminated string")
        return i + 1
    if text[start] == "{":
        depth, i = 0, start
        while True:
            if i >= len(text):
                raise MapSyntaxError("unbalanced '{'")
            ch = text[i]
            if ch == '"':
                i = _scan_value(text, i)
                continue
            depth += ch == "{"
            depth -= ch == "}"
            i += 1
            if depth == 0:
                return i
    i = start
    while i < len(text) and text[i] not in " ,}":
        i += 1
    return i


def parse_map(text: str | None) -> dict[str, str]:
    """``{a="1",b={…}}`` or ``{op_type="x" source_line=3}`` → {key: raw value text}.

    Raises `MapSyntaxError` for text that is not such a map (``{oops}``); the parser
    is expected to have refused it already, this is the backstop.
    """
    if not text:
        return {}
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        raise MapSyntaxError(f"expects '{{key=value, …}}', got {text!r}")
    body = stripped[1:-1]
    entries: dict[str, str] = {}
    i = 0
    while i < len(body):
        if body[i] in " ,\n\t":
            i += 1
            continue
        name_end = i
        while name_end < len(body) and body[name_end] not in '= ,\n\t{}"':
            name_end += 1
        if name_end == i or name_end >= len(body) or body[name_end] != "=":
            raise MapSyntaxError(f"expects attribute name (key=value) in {text!r}")
        key = body[i:name_end]
        start = name_end + 1
        while start < len(body) and body[start] in " \n\t":  # XLA allows blanks after the '='
            start += 1
        if start == len(body):
            raise MapSyntaxError(f"expects a value after {key}= in {text!r}")
        end = _scan_value(body, start)
        entries[key] = body[start:end]
        i = end
    return entries


def with_frontend_attribute(text: str | None, key: str, quoted_value: str) -> str:
    """Add ``key=value`` to frontend attributes, keeping every existing entry as it is.

    XLA prints the map sorted by key, comma-separated without spaces.
    """
    entries = parse_map(text)
    entries.setdefault(key, quoted_value)
    return "{" + ",".join(f"{k}={entries[k]}" for k in sorted(entries)) + "}"


def with_op_name_suffix(text: str | None, suffix: str) -> str:
    """Metadata with `suffix` appended to ``op_name`` (created, after ``op_type``, when missing)."""
    entries = parse_map(text)
    name = entries.get("op_name", '""')[1:-1] + suffix.replace("\\", "\\\\").replace('"', '\\"')
    ordered: dict[str, str] = {}
    if "op_type" in entries:
        ordered["op_type"] = entries["op_type"]
    ordered["op_name"] = f'"{name}"'
    ordered |= {k: v for k, v in entries.items() if k not in ordered}
    return "{" + " ".join(f"{k}={v}" for k, v in ordered.items()) + "}"
