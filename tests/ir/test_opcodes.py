"""The opcode table against XLA: every opcode jaxlib's parser knows has exactly one row, spelled and sized as XLA does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path

import pytest

from hloopt.ir import opcodes
from hloopt.ir.opcodes import JAXLIB_SINCE, ROWS, AsyncForm, Elementwise, allowed_attributes, base_opcode

#: Enumerators whose text is not the kebab-case of their name (hlo-text-grammar.md §4.1).
_RENAMED = {
    "kClz": "count-leading-zeros",
    "kCos": "cosine",
    "kExp": "exponential",
    "kExpm1": "exponential-minus-one",
    "kLog1p": "log-plus-one",
    "kOptimizationBarrier": "opt-barrier",
    "kPopulationCount": "popcnt",
    "kSin": "sine",
    "kTopK": "topk",
}
#: Opcodes whose arity XLA changed after jaxlib 0.12: variadic at HEAD (sparse convolution), 2 in jaxlib 0.10 to 0.12.
_JAXLIB_ARITY = {"convolution": 2}

#: Parses ``ROOT c = f32[] OPCODE()`` for each opcode on stdin in a forked child (some abort jaxlib) and prints
#: the error text, "" when it parses, or "crashed".
_PROBE = textwrap.dedent(
    """
    import json, os, sys
    from jaxlib import _hlo

    def probe(opcode):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            try:
                _hlo.hlo_module_from_text(f"HloModule m\\nENTRY e {{\\n  ROOT c = f32[] {opcode}()\\n}}\\n")
                message = ""
            except Exception as err:
                message = str(err)
            os.write(write, message.encode())
            os._exit(0)
        os.close(write)
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        return b"".join(chunks).decode() if os.WIFEXITED(status) else "crashed"

    print(json.dumps({name: probe(name) for name in json.loads(sys.stdin.read())}))
    """
)


@cache
def _parser_says() -> dict[str, str]:
    """What jaxlib's HLO parser says about each row's opcode used with no operands, plus a made-up one."""
    pytest.importorskip("jaxlib")
    names = [row.name for row in ROWS] + ["not-an-opcode"]
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        input=json.dumps(names),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=Path(__file__).parent,
    )
    said: dict[str, str] = json.loads(result.stdout)
    return said


def _newer_than_jaxlib() -> list[str]:
    """The opcodes the installed jaxlib is too old for, by `JAXLIB_SINCE` (none on the newest)."""
    from hloopt.xla.bridge import jaxlib_version

    return sorted(row.name for row in ROWS if JAXLIB_SINCE.get(row.name, (0, 0)) > jaxlib_version())


def test_every_opcode_xla_knows_has_one_row_and_no_other() -> None:
    """The rows are the newest jaxlib's: an older one lacks exactly the opcodes `JAXLIB_SINCE` dates later."""
    hlo = pytest.importorskip("jaxlib._hlo")
    known = set(hlo.HloOpcode.__members__)
    rows = {row.enum for row in ROWS}
    assert sorted(known - rows) == []
    assert sorted(opcodes.BY_NAME[name].enum for name in _newer_than_jaxlib()) == sorted(rows - known)
    assert len(ROWS) == len(rows) == len(opcodes.OPCODES) == 137


def test_spelling_is_the_enumerator_in_kebab_case_or_a_known_rename() -> None:
    for row in ROWS:
        kebab = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", row.enum[1:]).lower()
        assert row.name == _RENAMED.get(row.enum, kebab), row.enum


def test_xla_parser_knows_every_spelling() -> None:
    said = _parser_says()
    assert "Unknown opcode: not-an-opcode" in said["not-an-opcode"]  # the probe can tell
    assert sorted(name for name in opcodes.OPCODES if "Unknown opcode" in said[name]) == _newer_than_jaxlib()


def test_fixed_arities_match_the_xla_parser() -> None:
    for name, message in _parser_says().items():
        match = re.search(r"expects (\d+) operands, but has 0", message)
        if match is not None:
            assert int(match.group(1)) == _JAXLIB_ARITY.get(name, opcodes.BY_NAME[name].arity), name


_ELEMENTWISE_ARITY = {
    Elementwise.UNARY_SAME: {1},
    Elementwise.UNARY_TO_REAL: {1},
    Elementwise.BINARY_SAME: {2},
    Elementwise.PREDICATE: {1, 2},
    Elementwise.SELECT: {3},
    Elementwise.COMPLEX: {2},
    Elementwise.CONVERT: {1, 2},
}


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_row_is_consistent(row: opcodes.Opcode) -> None:
    if row.elementwise is not Elementwise.NONE:
        assert row.arity in _ELEMENTWISE_ARITY[row.elementwise]
    assert set(row.callees) <= row.attributes  # a callee is an attribute the parser takes
    assert row.result_from is None or row.result_from in row.callees
    assert not row.attributes & opcodes.GENERIC_ATTRIBUTES
    if row.async_form is AsyncForm.WRAPPER:
        assert row.name.startswith("async-") and row.callees == ("calls",)
    if row.async_form is AsyncForm.NATIVE:
        halves = {f"{row.name}-start", f"{row.name}-done"} & opcodes.OPCODES
        assert halves, "a native async opcode has its own start or done opcode"
        assert all(opcodes.BY_NAME[half].async_form is AsyncForm.SUGAR for half in halves)
    if "result_accuracy" in row.attributes:
        assert row.elementwise is Elementwise.UNARY_SAME


def test_derived_sets() -> None:
    assert sorted(opcodes.NATIVE_ASYNC) == ["all-gather", "all-reduce", "collective-permute", "copy", "recv", "send"]
    assert opcodes.RESULT_FROM == {"call": "to_apply", "fusion": "calls", "while": "body"}
    assert sorted(opcodes.COMPUTATION_ATTRIBUTES) == sorted(
        {
            "to_apply",
            "calls",
            "condition",
            "body",
            "select",
            "scatter",
            "true_computation",
            "false_computation",
        }
    )
    assert {"parameter", "custom-call", "while", "send", "all-reduce-done"} <= opcodes.SIDE_EFFECT_OPCODES
    assert not {"add", "constant", "copy-start", "fusion", "map"} & opcodes.SIDE_EFFECT_OPCODES
    assert sorted(opcodes.UNARY_TO_REAL) == ["abs", "imag", "real"]
    assert sorted(opcodes.PREDICATES) == ["compare", "is-finite"]
    assert opcodes.ELEMENTWISE_INFERRED <= opcodes.ELEMENTWISE
    assert sorted(opcodes.ELEMENTWISE - opcodes.ELEMENTWISE_INFERRED) == ["convert", "stochastic-convert"]
    assert not {"broadcast", "map", "reduce", "bitcast-convert"} & opcodes.ELEMENTWISE


@pytest.mark.parametrize(
    ("opcode", "split"),
    [
        ("add", ("add", None)),
        ("all-reduce-start", ("all-reduce-start", None)),  # a native half, not sugar
        ("custom-call-start", ("custom-call", "-start")),
        ("fusion-update", ("fusion", "-update")),
        ("all-reduce-start-done", ("all-reduce-start", "-done")),  # XLA's parser takes sugar on a native half too
    ],
)
def test_base_opcode(opcode: str, split: tuple[str, str | None]) -> None:
    assert base_opcode(opcode) == split


@pytest.mark.parametrize("opcode", ["copy-update", "send-start", "async-start-done", "frobnicate", "add-later"])
def test_base_opcode_refuses(opcode: str) -> None:
    with pytest.raises(KeyError):
        base_opcode(opcode)


def test_allowed_attributes_of_sugar() -> None:
    start = allowed_attributes("custom-call-start")
    assert {"custom_call_target", "async_execution_thread", "output_to_operand_aliasing"} <= start
    assert allowed_attributes("custom-call-done") == opcodes.GENERIC_ATTRIBUTES | {"async_execution_thread"}
    assert "result_accuracy" in allowed_attributes("sine")
    assert "result_accuracy" not in allowed_attributes("negate")


def test_tables_import_no_numpy() -> None:
    """The CLI reads the tables while starting: they must not pull in numpy (issue #10 §1)."""
    ir = Path(opcodes.__file__).parent
    code = textwrap.dedent(
        f"""
        import importlib.util, sys
        for name in ("opcodes", "element_types"):
            spec = importlib.util.spec_from_file_location(name, {str(ir)!r} + "/" + name + ".py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        assert "numpy" not in sys.modules, "numpy imported"
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
