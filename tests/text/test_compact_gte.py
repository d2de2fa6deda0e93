"""XLA 0.11+'s compact get-tuple-element operands (``%while.5#1``), expanded as XLA expands them.

XLA's text dumps since 0.11 write ``%p#1#0`` for "element 0 of element 1 of %p". Its parser
makes one get-tuple-element per distinct path, named ``p_1`` and ``p_1_0`` (uniquified with a
``.N`` suffix), just before its first use, and reuses it after; a later instruction that wants
one of those names is renamed. The expected texts below are jaxlib 0.12's prints of the inputs.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from hlo_text import hlo

from hloopt import parse
from hloopt.errors import HloParseError

CASES = {
    "nested and reused": (
        """
        HloModule m
        ENTRY e {
          p = (f32[2], (s32[], f32[3])) parameter(0)
          a = f32[3] negate(p#1#1)
          b = f32[2] negate(p#0)
          c = f32[3] add(a, p#1#1)
          ROOT t = (f32[3], f32[2], f32[3]) tuple(a, b, c)
        }
        """,
        [
            "%p_1 = (s32[], f32[3]{0}) get-tuple-element(%p), index=1",
            "%p_1_1 = f32[3]{0} get-tuple-element(%p_1), index=1",
            "%a = f32[3]{0} negate(%p_1_1)",
            "%p_0 = f32[2]{0} get-tuple-element(%p), index=0",
            "%c = f32[3]{0} add(%a, %p_1_1)",
        ],
    ),
    "a name already taken gets a suffix": (
        """
        HloModule m
        ENTRY e {
          w.5 = (f32[2], s32[]) parameter(0)
          w.5_1 = f32[7] parameter(1)
          a = s32[] negate(w.5#1)
          ROOT t = (s32[], f32[7]) tuple(a, w.5_1)
        }
        """,
        ["%w.5_1.1 = s32[] get-tuple-element(%w.5), index=1", "%a = s32[] negate(%w.5_1.1)"],
    ),
    "a later instruction is renamed": (
        """
        HloModule m
        ENTRY e {
          p = (f32[2], s32[]) parameter(0)
          ROOT p_0 = f32[2] negate(p#0)
        }
        """,
        ["%p_0 = f32[2]{0} get-tuple-element(%p), index=0", "ROOT %p_0.1 = f32[2]{0} negate(%p_0)"],
    ),
    "a declared operand shape": (
        """
        HloModule m
        ENTRY e {
          p = (f32[2], s32[]) parameter(0)
          ROOT t = (f32[2], s32[]) tuple(p#0, s32[] p#1)
        }
        """,
        ["%p_1 = s32[] get-tuple-element(%p), index=1", "ROOT %t = (f32[2]{0}, s32[]) tuple(%p_0, %p_1)"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_compact_operands_become_get_tuple_elements(name: str) -> None:
    text, lines = CASES[name]
    printed = parse(hlo(text)).to_text()
    for line in lines:
        assert f"  {line}\n" in printed, printed
    assert "#" not in printed


@pytest.mark.skipif(version("jaxlib").startswith("0.10."), reason="jaxlib 0.10 does not read compact operands")
@pytest.mark.parametrize("name", list(CASES))
def test_expansion_is_what_the_installed_jaxlib_makes(name: str) -> None:
    from hloopt.xla.bridge import canonical

    text = hlo(CASES[name][0])
    assert canonical(parse(text).to_text()) == canonical(text)


@pytest.mark.parametrize(
    "operand, message",
    [
        ("p#2", "4:26: GTE index 2 out of bounds for shape: (f32[2], s32[])"),
        ("q#0", "4:26: instruction q#0 does not exist"),
    ],
)
def test_a_bad_compact_operand_is_located(operand: str, message: str) -> None:
    text = hlo(
        f"""
        HloModule m
        ENTRY e {{
          p = (f32[2], s32[]) parameter(0)
          ROOT t = f32[2] negate({operand})
        }}
        """
    )
    with pytest.raises(HloParseError) as caught:
        parse(text)
    found = f"{caught.value.location.line}:{caught.value.location.column}: {caught.value.message}"
    assert found.startswith(message)
