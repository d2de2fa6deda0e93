"""A batch output's name says the format written into it (`named_for`), for every extension and format."""

from __future__ import annotations

import pytest

from hloopt.support.formats import Format, named_for

#: Input name → what its output is named when written as HLO text, a proto and StableHLO text.
EXPECTED = {
    "a.hlo": ("a.hlo", "a.pb", "a.mlir"),
    "a.txt": ("a.txt", "a.pb", "a.mlir"),
    "a.pb": ("a.hlo", "a.pb", "a.mlir"),
    "a.hlo_module.pb": ("a.hlo_module.hlo", "a.hlo_module.pb", "a.hlo_module.mlir"),
    "a.hlo.pb": ("a.hlo.hlo", "a.hlo.pb", "a.hlo.mlir"),
    "a.mlir": ("a.hlo", "a.pb", "a.mlir"),
    "a.mlirbc": ("a.hlo", "a.pb", "a.mlir"),
    "module": ("module", "module.pb", "module.mlir"),
    "a.v2": ("a.v2", "a.v2.pb", "a.v2.mlir"),
    "dir.d/a": ("dir.d/a", "dir.d/a.pb", "dir.d/a.mlir"),
}


@pytest.mark.parametrize("name", EXPECTED)
def test_each_name_is_kept_or_given_the_extension_of_its_format(name: str) -> None:
    written = tuple(named_for(name, fmt) for fmt in (Format.HLO, Format.PROTO, Format.STABLEHLO))
    assert written == EXPECTED[name]


def test_a_name_already_right_is_kept_byte_for_byte() -> None:
    assert named_for("./out//x.pb", Format.PROTO) == "./out//x.pb"
