"""MLIR's diagnostics as jaxlib 0.10 and 0.12 word them, read by the one reader the bridge and the formats share."""

from __future__ import annotations

import pytest

from hloopt.xla import bridge, formats
from hloopt.xla.bridge import XlaError
from hloopt.xla.diagnostics import Diagnostic, mlir_errors

#: The StableHLO generic line of each jaxlib (0.10.2 has StableHLO v1.17.0, 0.12.0.1 v1.22.0).
GENERIC = (
    "<unknown>:0: error: Failed to parse using StableHLO v{}, this could indicate forward incompatibility, "
    ">12w old unsupported plugin, or a portable artifact that needs to be further downgraded.\n"
)
VERSIONS = [("1.17.0", "23"), ("1.22.0", "24")]

#: jaxlib's refusal of StableHLO text (``mlir_module_to_xla_computation``), word for word.
UNDECLARED = "UNKNOWN: -:3:12: error: use of undeclared SSA value name\n" + GENERIC
DIALECT = (
    "UNKNOWN: -:3:10: error: operation being parsed with an unregistered dialect. If this is intended, please use "
    "-allow-unregistered-dialect with the MLIR tool used\n" + GENERIC
)
TRUNCATED = "UNKNOWN: -:0:0: error: attempting to parse 8 bytes when only 7 remain\n" + GENERIC
#: The verifier's refusal of a converted module (``ir.Module.parse``): errors and notes on the instruction's name.
SLICE = (
    "Unable to parse module assembly:\n"
    "error: \"s\": 'stablehlo.slice' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of "
    "operation 'tensor<2xf32>'\n"
    ' note: "s": in bytecode version 6 produced by: MLIR{}.0.0git\n'
    "error: \"s\": 'stablehlo.slice' op failed to infer returned types\n"
    ' note: "s": see current operation: %0 = "stablehlo.slice"(%arg0) <{{limit_indices = array<i64: 3>, '
    "start_indices = array<i64: 0>, strides = array<i64: 1>}}> : (tensor<4xf32>) -> tensor<2xf32>\n"
    ' note: "s": in bytecode version 6 produced by: MLIR{}.0.0git'
)
ADD = (
    "Unable to parse module assembly:\n"
    "error: \"c\": 'stablehlo.add' op requires the same shape for all operands and results\n"
    ' note: "c": see current operation: %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<8xf32>) -> '
    "tensor<4xf32>\n"
    ' note: "c": in bytecode version 6 produced by: MLIR{}.0.0git'
)
SLICE_TYPES = (
    "'stablehlo.slice' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation "
    "'tensor<2xf32>'"
)


@pytest.mark.parametrize(("stablehlo", "mlir"), VERSIONS, ids=["jaxlib 0.10", "jaxlib 0.12"])
def test_every_real_message_reads_to_its_errors(stablehlo: str, mlir: str) -> None:
    """Status code and generic line off, the buffer's position kept, the verifier's instruction named."""
    generic = GENERIC.format(stablehlo)
    assert mlir_errors(UNDECLARED.format(stablehlo)) == [
        Diagnostic("-", 3, 12, None, "use of undeclared SSA value name")
    ]
    assert mlir_errors(DIALECT.format(stablehlo))[0].message.startswith("operation being parsed with an unregistered")
    assert mlir_errors(TRUNCATED.format(stablehlo)) == [
        Diagnostic("-", 0, 0, None, "attempting to parse 8 bytes when only 7 remain")
    ]
    assert mlir_errors(generic) == [Diagnostic("<unknown>", 0, 0, None, generic.split(": ", 2)[2].strip())]
    assert mlir_errors(SLICE.format(mlir, mlir)) == [
        Diagnostic("", 0, 0, "s", SLICE_TYPES),
        Diagnostic("", 0, 0, "s", "'stablehlo.slice' op failed to infer returned types"),
    ]
    assert mlir_errors(ADD.format(mlir)) == [
        Diagnostic("", 0, 0, "c", "'stablehlo.add' op requires the same shape for all operands and results")
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"model.py":4:2: error: bad op', Diagnostic("model.py", 4, 2, None, "bad op")),
        ("INVALID_ARGUMENT: <unknown>:7: error: no column", Diagnostic("<unknown>", 7, 0, None, "no column")),
        ('-:1:5: error: "x": named too', Diagnostic("-", 1, 5, "x", "named too")),
        ("-:1:5: note: a note only", None),
        ("INTERNAL: no diagnostic here", None),
        ("", None),
    ],
    ids=["quoted buffer", "status, no column", "position and name", "a note", "no diagnostic", "empty"],
)
def test_each_form_of_location(text: str, expected: Diagnostic | None) -> None:
    assert mlir_errors(text) == ([expected] if expected else [])


def test_the_bridge_and_the_formats_read_the_same_errors() -> None:
    """The one-line message joins the errors (``%name: message``); the formats keep the first."""
    assert bridge._one_line(UNDECLARED.format("1.22.0")) == ("use of undeclared SSA value name", None)
    assert bridge._one_line(SLICE.format("23", "23")) == (
        f"%s: {SLICE_TYPES}; %s: 'stablehlo.slice' op failed to infer returned types",
        "s",
    )
    assert formats.mlir_diagnostic(RuntimeError(ADD.format("24"))) == mlir_errors(ADD.format("24"))[0]
    assert bridge._one_line("INTERNAL: something\n  else") == ("INTERNAL: something else", None)


def test_the_installed_jaxlib_says_what_the_reader_expects() -> None:
    """Live, not transcribed: the verifier's refusal of a shape mismatch names its instruction, one line."""
    with pytest.raises(XlaError) as caught:
        bridge.compile_cpu(
            "HloModule m\nENTRY main {\n  a = f32[4] parameter(0)\n  b = f32[8] parameter(1)\n"
            "  ROOT c = f32[4] add(a, b)\n}\n"
        )
    assert (caught.value.stage, caught.value.instruction) == ("convert", "c")
    assert caught.value.message == "%c: 'stablehlo.add' op requires the same shape for all operands and results"
    data = (
        b"module @m {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    return %b : tensor<2xf32>\n  }\n}\n"
    )
    with pytest.raises(Exception, match=r"m\.mlir:3:12: use of undeclared SSA value name\n"):
        formats.stablehlo_to_text(data, "m.mlir")
