"""``metadata={…}`` and ``frontend_attributes={…}`` are read at parse time, as XLA reads them.

The refused forms are the cases of tests/errors/generic_attribute_maps.hlo; here are the
near misses XLA's parser accepts (each checked against jaxlib's), which must keep parsing,
and the CLI's report of the bad map that used to surface only when a pass read it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hloopt import parse
from hloopt.ir.attribute_values import FrontendAttributes, Metadata

_DOT = """HloModule m
ENTRY e {{
  a = s32[2,2] parameter(0)
  ROOT d = s32[2,2] dot(a, a), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, {attribute}
}}
"""

ACCEPTED = [
    "metadata={}",
    'metadata={op_type="x" op_name="y"}',
    'metadata={op_type="x",op_name="y"}',
    'metadata={,op_type="x"}',
    'metadata={ op_type="x"\top_name="y" }',
    'metadata={op_type= "x"}',
    'metadata={op_name="a\\"b" source_file="/a/b.py" deduplicated_name="d" scheduling_name="s"}',
    "metadata={source_line=-2147483648 source_end_line=2147483647 source_column=1 source_end_column=2}",
    "metadata={stack_frame_id=1}",
    "metadata={profile_type={}}",
    "metadata={profile_type={0,1,2,3}}",
    'metadata={metadata_payload="p"}',
    "frontend_attributes={}",
    'frontend_attributes={a=""}',
    'frontend_attributes={ a="1" , b="2" }',
    'frontend_attributes={a= "1",a="2"}',
    'frontend_attributes={a.b-c="1",_d="2"}',
    'frontend_attributes={a={"k": {"j": "}"}}, b="2"}',
    "frontend_attributes={a={oops}}",
]


@pytest.mark.parametrize("attribute", ACCEPTED)
def test_xla_accepted_map_parses(attribute: str) -> None:
    root = parse(_DOT.format(attribute=attribute)).entry.root
    key, _, text = attribute.partition("=")
    assert root is not None
    value = root.attributes[key]
    assert isinstance(value, (Metadata, FrontendAttributes)) and value.to_text() == text


def test_module_frontend_attributes_parse() -> None:
    module = parse('HloModule m, frontend_attributes={a="1",b={"k": 2}}\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n')
    value = module.attributes["frontend_attributes"]
    assert value == FrontendAttributes((("a", '"1"'), ("b", '{"k": 2}')))
    assert value.to_text() == '{a="1",b={"k": 2}}'  # type: ignore[union-attr]


def test_cli_reports_bad_metadata_located(tmp_path: Path) -> None:
    source = tmp_path / "oops.hlo"
    source.write_text(_DOT.format(attribute="metadata={oops}"))
    result = subprocess.run(
        [sys.executable, "-m", "hloopt", "run", str(source), "--passes", "all"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    message = "error parsing attribute metadata: expects attribute name but sees oops"
    assert result.stderr.splitlines()[0] == f"hloopt: error: {source}:4:84: {message}"
    assert "Traceback" not in result.stderr
