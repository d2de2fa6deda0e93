"""A `.pb` whose config holds bytes that are not UTF-8: read with those bytes kept, never a UnicodeDecodeError.

A proto's backend_config is bytes. XLA prints a JSON-like one raw (``backend_config={…}``), so its
print is not UTF-8; hloopt writes that config as a quoted string, C-escaped, which XLA's parser
reads back as the same bytes, so text and `.pb` outputs carry the config unchanged.
"""

from __future__ import annotations

from pathlib import Path

import jaxlib._hlo as hlo
import pytest
from conftest import sampled

from hloopt.xla import formats
from hloopt.xla.formats import print_options
from tests.cli_invoke import invoke

_CONFIGS = ["{QQQ}", '{"a": 1, QQQ}', '{"s": "x}", QQQ, {"n": {}}}', "QQQ", '{"a": "QQQ"}']


def _module(config: str) -> str:
    quoted = '"' + config.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return (
        "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n"
        f'  ROOT c = f32[2] custom-call(p), custom_call_target="foo", backend_config={quoted}\n}}\n'
    )


def _proto_with(config: str, bad: bytes) -> bytes:
    """The module's proto with QQQ in its config replaced by `bad` (of the same length)."""
    data = hlo.hlo_module_from_text(_module(config)).as_serialized_hlo_module_proto()
    assert data.count(b"QQQ") == 1 and len(bad) == 3
    return data.replace(b"QQQ", bad)


def _normalised(module: object) -> str:
    """XLA's print of `module`, its raw configs that are not UTF-8 quoted (what hloopt reads)."""
    return formats._printed(module, "<test>")


@pytest.mark.parametrize("config", _CONFIGS)
@pytest.mark.parametrize("bad", sampled([b"Q\xffQ", b"\x80\x80\x80", b"\xc3Q\xa9", b"Q\x00\xfe"], 4))
def test_a_config_with_bytes_that_are_not_utf8_is_kept_through_text_and_pb(
    tmp_path: Path, config: str, bad: bytes
) -> None:
    source = tmp_path / "in.pb"
    source.write_bytes(_proto_with(config, bad))
    text_out, pb_out = tmp_path / "out.hlo", tmp_path / "out.pb"
    for out in (text_out, pb_out):
        result = invoke("run", source, "-o", out)
        assert result.exit_code == 0, result.stderr
    expected = hlo.HloModule.from_serialized_hlo_module_proto(source.read_bytes())
    for proto in (hlo.hlo_module_from_text(text_out.read_text()).as_serialized_hlo_module_proto(), pb_out.read_bytes()):
        assert bad in proto
        again = hlo.HloModule.from_serialized_hlo_module_proto(proto)
        assert _normalised(again) == _normalised(expected)


def test_a_json_config_of_valid_utf8_is_still_printed_raw() -> None:
    module = hlo.hlo_module_from_text(_module('{"a": "é"}'))
    assert 'backend_config={"a": "é"}' in str(module.to_string(print_options()))
    assert formats._printed(module, "<test>") == str(module.to_string(print_options()))
