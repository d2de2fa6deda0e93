"""The generic instruction attributes passes edit: metadata, frontend attributes.

The parser reads both into typed values (`attribute_values`); these add an entry to one, whatever
the instruction had (nothing, or a value), without disturbing the rest.
"""

from __future__ import annotations

from hloopt.ir.attribute_values import FrontendAttributes, Metadata
from hloopt.ir.module import AttributeValue


class MapSyntaxError(ValueError):
    """A ``{key=value …}`` attribute the parser kept as text, which no typed operation can edit (the IR
    cannot raise HloError: ir/ imports nothing else of hloopt; passes turn this into one naming the
    instruction)."""


def with_frontend_attribute(value: AttributeValue | None, key: str, text: str) -> FrontendAttributes:
    """Frontend attributes `value` (None: none yet) with ``key="text"`` added; an entry already there is kept."""
    if value is None:
        return FrontendAttributes().with_entry(key, text)
    if not isinstance(value, FrontendAttributes):
        raise MapSyntaxError(f"expects '{{key=value, …}}', got {value!r}")
    return value.with_entry(key, text)


def with_op_name_suffix(value: AttributeValue | None, suffix: str) -> Metadata:
    """Metadata `value` (None: none yet) with `suffix` appended to ``op_name`` (made when missing)."""
    if value is None:
        return Metadata().with_op_name_suffix(suffix)
    if not isinstance(value, Metadata):
        raise MapSyntaxError(f"expects '{{key=value …}}', got {value!r}")
    return value.with_op_name_suffix(suffix)
