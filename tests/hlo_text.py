"""HLO text in tests, written the way it reads: ``hlo(\"\"\"...\"\"\")`` instead of ``"HloModule m\\nENTRY e {\\n..."``."""

from __future__ import annotations

import textwrap


def hlo(text: str) -> str:
    """`text` dedented, without the newline after the opening quotes; the rest is kept byte for byte.

    The closing quotes go on a line of their own, so the module ends with one newline, as a file does.
    """
    return textwrap.dedent(text).removeprefix("\n")
