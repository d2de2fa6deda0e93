"""cpu-runnable, rewrite by rewrite: the text it makes, and what XLA's CPU backend computes from it.

A bitcast's meaning is checked against a numpy model of what it is, independent of the
rewrite: the operand's bytes in its layout's order, read as the result's element type in the
result's layout order. XLA runs the rewritten module in this process (nothing in it crashes
XLA); the original optimised modules, which can crash it, are run in workers in
tests/xla/test_optimised_dumps.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
import xla_helper
from hlo_text import hlo
from pass_testing import run_passes

from hloopt.ir.element_types import numpy_dtype
from hloopt.passes.cpu_runnable import CpuRunnable, NotCpuRunnable, cpu_runnable
from hloopt.text.parser import parse

pytest.importorskip("jax")


def _runnable_text(text: str) -> str:
    """The module after the pass, with the verifier and the strict changed-flag check."""
    module = parse(text, "t")
    run_passes(module, [CpuRunnable()])
    assert CpuRunnable().matches(module) == []
    return module.to_text()


def _body(text: str) -> list[str]:
    """The instruction lines of the entry computation, stripped."""
    entry = text[text.index("ENTRY") :]
    return [line.strip() for line in entry.splitlines()[1:] if line.strip() not in ("", "}")]


# --- fusions ---------------------------------------------------------------------------------------

FUSED = hlo("""
    HloModule m, is_scheduled=true, entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[4]{0})}

    %inner (q0: f32[4], q1: f32[4]) -> f32[4] {
      %q0 = f32[4]{0} parameter(0)
      %q1 = f32[4]{0} parameter(1)
      ROOT %m = f32[4]{0} multiply(%q0, %q1)
    }

    %fused (p0: f32[4], p1: f32[4]) -> (f32[4], f32[4]) {
      %p0 = f32[4]{0} parameter(0)
      %p1 = f32[4]{0} parameter(1)
      %a = f32[4]{0} add(%p0, %p1)
      %n = f32[4]{0} fusion(%a, %p1), kind=kLoop, calls=%inner
      ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%a, %n)
    }

    ENTRY %e (x: f32[4], y: f32[4]) -> (f32[4], f32[4]) {
      %x = f32[4]{0} parameter(0)
      %y = f32[4]{0} parameter(1)
      ROOT %f = (f32[4]{0}, f32[4]{0}) fusion(%x, %y), kind=kCustom, calls=%fused, output_to_operand_aliasing={{0}: (0, {})}, metadata={op_name="jit(f)/add"}, backend_config={"outer_dimension_partitions":[],"fusion_config":{"kind":"__ynn_fusion"}}
    }
""")


def test_a_fusion_becomes_a_call_of_its_computation_nested_fusions_too() -> None:
    text = _runnable_text(FUSED)
    assert "fusion" not in text and "kind=" not in text and "backend_config" not in text
    assert "output_to_operand_aliasing" not in text and "is_scheduled" not in text
    assert (
        'ROOT %call.1 = (f32[4]{0}, f32[4]{0}) call(%x, %y), to_apply=%fused, metadata={op_name="jit(f)/add"}'
        in _body(text)
    )
    assert "%call = f32[4]{0} call(%a, %p1), to_apply=%inner" in text
    x, y = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)
    total, product = xla_helper.execute(text, [x, y])
    np.testing.assert_array_equal(total, x + y)
    np.testing.assert_array_equal(product, (x + y) * y)


def test_the_user_module_is_left_as_it_was() -> None:
    module = parse(FUSED, "t")
    runnable, warnings = cpu_runnable(module)
    assert warnings == ()
    assert module.to_text() == parse(FUSED, "t").to_text()
    assert "fusion" in module.to_text() and "fusion" not in runnable.to_text()
    assert not set(module.instructions()) & set(runnable.instructions())


# --- bitcasts --------------------------------------------------------------------------------------


def _shape(element_type: str, dims: Sequence[int], minor_to_major: Sequence[int]) -> str:
    return f"{element_type}[{','.join(map(str, dims))}]{{{','.join(map(str, minor_to_major))}}}"


def _bare(shape: str) -> str:
    """A shape's text without its layout (a signature's spelling)."""
    return shape.partition("{")[0]


def _bitcast_module(source: tuple[str, tuple[int, ...], tuple[int, ...]], target: str) -> str:
    """A parameter in the default layout, copied into `source`'s layout, bitcast to `target`."""
    element_type, dims, minor_to_major = source
    default = tuple(range(len(dims) - 1, -1, -1))
    return hlo(f"""
        HloModule m

        ENTRY %e (p: {_shape(element_type, dims, default)}) -> {_bare(target)} {{
          %p = {_shape(element_type, dims, default)} parameter(0)
          %c = {_shape(element_type, dims, minor_to_major)} copy(%p)
          ROOT %b = {target} bitcast(%c)
        }}
    """)


def _bitcast_model(
    x: np.ndarray,
    minor_to_major: Sequence[int],
    element_type: str,
    dims: Sequence[int],
    out_minor_to_major: Sequence[int],
) -> np.ndarray:
    """What a bitcast is: `x`'s bytes in its layout's order, read as `element_type` laid out as `out_minor_to_major`."""
    stored = np.ascontiguousarray(np.transpose(x, tuple(reversed(minor_to_major)))).tobytes()
    order = list(reversed(out_minor_to_major))
    physical = np.frombuffer(stored, numpy_dtype(element_type)).reshape([dims[d] for d in order])
    return np.transpose(physical, [order.index(d) for d in range(len(dims))])


#: (source type, dims, minor_to_major), (result type, dims, minor_to_major), the opcodes the bitcast becomes.
BITCASTS = [
    (("f32", (2, 3), (1, 0)), ("f32", (2, 3), (1, 0)), []),
    (("f32", (4, 1, 4), (2, 1, 0)), ("f32", (4, 4), (1, 0)), ["reshape"]),
    (("f32", (4, 1), (0, 1)), ("f32", (4,), (0,)), ["reshape"]),
    (("f32", (2, 3), (0, 1)), ("f32", (3, 2), (1, 0)), ["transpose"]),
    (("f32", (2, 3, 4), (0, 1, 2)), ("f32", (4, 6), (1, 0)), ["transpose", "reshape"]),
    (("f32", (2, 3, 4), (1, 2, 0)), ("f32", (2, 12), (1, 0)), ["transpose", "reshape"]),
    (("f32", (6,), (0,)), ("f32", (2, 3), (0, 1)), ["reshape", "transpose"]),
    (("f32", (2, 3), (1, 0)), ("f32", (2, 3), (0, 1)), ["reshape", "transpose"]),
    (("f32", (2, 3, 4), (0, 2, 1)), ("f32", (3, 2, 4), (0, 1, 2)), ["transpose", "reshape", "transpose"]),
    (("f32", (2, 2), (1, 0)), ("s32", (4,), (0,)), ["bitcast-convert", "reshape"]),
    (("f64", (2, 3), (0, 1)), ("s64", (3, 2), (0, 1)), ["transpose", "bitcast-convert", "reshape", "transpose"]),
    (("f32", (2,), (0,)), ("u8", (8,), (0,)), ["bitcast-convert", "reshape"]),
    (("u8", (8,), (0,)), ("f32", (2,), (0,)), ["reshape", "bitcast-convert"]),
    (("f32", (2, 3), (0, 1)), ("s16", (12,), (0,)), ["transpose", "reshape", "bitcast-convert", "reshape"]),
    (
        ("bf16", (4, 2), (0, 1)),
        ("f32", (2, 2), (0, 1)),
        ["transpose", "reshape", "bitcast-convert", "reshape", "transpose"],
    ),
]


@pytest.mark.parametrize(
    ("source", "target", "opcodes"), BITCASTS, ids=[f"{_shape(*a)}->{_shape(*b)}" for a, b, _ in BITCASTS]
)
def test_a_bitcast_becomes_what_its_layouts_say_and_computes_it(
    source: tuple[str, tuple[int, ...], tuple[int, ...]],
    target: tuple[str, tuple[int, ...], tuple[int, ...]],
    opcodes: list[str],
) -> None:
    text = _runnable_text(_bitcast_module(source, _shape(*target)))
    made = [line.split("=", 1)[1].split()[1].split("(")[0] for line in _body(text)]
    assert made == ["parameter", "copy", *opcodes]
    element_type, dims, minor_to_major = source
    x = np.random.default_rng(0).standard_normal(dims).astype(numpy_dtype(element_type))
    if element_type == "u8":
        x = np.arange(8, dtype=np.uint8) * 17
    (result,) = xla_helper.execute(text, [x])
    expected = _bitcast_model(x, minor_to_major, *target)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    assert result.tobytes() == np.ascontiguousarray(expected).tobytes()


def test_chained_bitcasts_are_each_read_under_their_own_layouts() -> None:
    text = _runnable_text(
        hlo("""
            HloModule m

            ENTRY %e (p: f32[2,3]) -> f32[6] {
              %p = f32[2,3]{1,0} parameter(0)
              %c = f32[2,3]{0,1} copy(%p)
              %t = f32[3,2]{1,0} bitcast(%c)
              %u = f32[2,3]{0,1} bitcast(%t)
              ROOT %b = f32[6]{0} bitcast(%u)
            }
        """)
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (result,) = xla_helper.execute(text, [x])
    np.testing.assert_array_equal(result, x.T.reshape(6))


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("f32[10,10]{0,1:T(8,128)}", "f32[10,10]{0,1:T(8,128)}"),
        ("u32[1]{0:T(128)}", "u32[]{:T(128)}"),
        ("f32[12,130]{1,0:T(8,128)S(1)}", "f32[1,1,12,130]{3,2,0,1:T(8,128)}"),
    ],
)
def test_a_bitcast_under_the_same_tiles_is_read_as_if_untiled(source: str, target: str) -> None:
    text = _runnable_text(
        hlo(f"""
            HloModule m

            ENTRY %e (p: {_bare(source)}) -> {_bare(target)} {{
              %p = {source} parameter(0)
              %n = {source} negate(%p)
              ROOT %same = {target} bitcast(%n)
            }}
        """)
    )
    assert "bitcast" not in text and ":T(" not in text
    x = np.arange(math.prod(_dims(source)), dtype=numpy_dtype(source[:3])).reshape(_dims(source))
    (result,) = xla_helper.execute(text, [x])
    assert result.tobytes() == (-x).tobytes() and list(result.shape) == _dims(target)


def _dims(shape: str) -> list[int]:
    inside = shape[shape.index("[") + 1 : shape.index("]")]
    return [int(d) for d in inside.split(",") if d]


@pytest.mark.parametrize(
    ("source", "target", "why"),
    [
        ("f32[8,128]{1,0:T(8,128)}", "f32[1024]{0}", "cannot tell that the two tilings"),
        ("f32[12,130]{1,0:T(8,128)}", "f32[12,1,130]{2,1,0:T(8,128)}", "cannot tell that the two tilings"),
        ("s4[16]{0:E(4)}", "s8[8]{0}", "packs the elements"),
        ("s4[4]{0}", "u4[4]{0}", "sub-byte"),
        ("f32[4]{0}", "f32[3]{0}", "different numbers of bytes"),
    ],
)
def test_a_bitcast_without_a_logical_meaning_is_refused_by_name(source: str, target: str, why: str) -> None:
    text = hlo(f"""
        HloModule m

        ENTRY %e (p: {_bare(source)}) -> {_bare(target)} {{
          %p = {source} parameter(0)
          ROOT %odd = {target} bitcast(%p)
        }}
    """)
    with pytest.raises(NotCpuRunnable, match=rf"%odd \(bitcast\).*{why}"):
        cpu_runnable(parse(text, "t"))


def test_a_copy_between_memory_spaces_is_a_copy() -> None:
    text = _runnable_text(
        hlo("""
            HloModule m, is_scheduled=true

            ENTRY %e (p: f32[4]) -> f32[4] {
              %p = f32[4]{0} parameter(0)
              %start = (f32[4]{0:S(1)}, f32[4]{0}, u32[]) copy-start(%p), cross_program_prefetch_index=0
              %done = f32[4]{0:S(1)} copy-done(%start)
              ROOT %n = f32[4]{0} negate(%done)
            }
        """)
    )
    assert _body(text) == [
        "%p = f32[4]{0} parameter(0)",
        "%copy = f32[4]{0} copy(%p)",
        "ROOT %n = f32[4]{0} negate(%copy)",
    ]
    x = np.arange(4, dtype=np.float32)
    (result,) = xla_helper.execute(text, [x])
    np.testing.assert_array_equal(result, -x)


# --- mixed-precision dots ---------------------------------------------------------------------------

NARROW_DOT = hlo("""
    HloModule m

    ENTRY %e (a: f32[4,8], b: f32[8,3]) -> f32[3,4] {
      %a = f32[4,8]{1,0} parameter(0)
      %na = NARROW[4,8]{1,0} convert(%a)
      %b = f32[8,3]{1,0} parameter(1)
      %nb = NARROW[8,3]{1,0} convert(%b)
      %d = f32[4,3]{1,0} dot(%na, %nb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT %t = f32[3,4]{0,1} transpose(%d), dimensions={1,0}
    }
""")


@pytest.mark.parametrize("narrow", ["bf16", "f16", "f8e4m3", "f8e4m3fn", "f8e5m2"])
def test_a_dot_of_narrow_floats_into_f32_reads_them_widened(narrow: str) -> None:
    """XLA's CPU refuses a bf16 x bf16 -> f32 dot fused with a transpose (DotThunk); widened it runs, exactly."""
    text = NARROW_DOT.replace("NARROW", narrow)
    if narrow == "bf16":
        with pytest.raises(Exception, match="DotThunk"):
            xla_helper.execute(text, [np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)])
    runnable = _runnable_text(text)
    assert _body(runnable)[1:5] == [
        f"%na = {narrow}[4,8]{{1,0}} convert(%a)",
        "%convert = f32[4,8]{1,0} convert(%na)",
        "%b = f32[8,3]{1,0} parameter(1)",
        f"%nb = {narrow}[8,3]{{1,0}} convert(%b)",
    ]
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-2, 2, (4, 8)).astype(np.float32), rng.uniform(-2, 2, (8, 3)).astype(np.float32)
    (result,) = xla_helper.execute(runnable, [a, b])
    dtype = numpy_dtype(narrow)
    wide = [x.astype(dtype).astype(np.float64) for x in (a, b)]
    exact = (wide[0] @ wide[1]).T  # products of narrow values are exact in f64; 8 of them sum with one rounding
    np.testing.assert_allclose(result, exact.astype(np.float32), rtol=2**-20, atol=2**-20)


def test_a_dot_of_f32_operands_and_an_integer_dot_are_left_alone() -> None:
    text = NARROW_DOT.replace("NARROW", "f32")
    assert not [i for i in CpuRunnable().matches(parse(text, "t")) if i.opcode in ("dot", "convert")]
    integer = NARROW_DOT.replace("NARROW", "s8").replace("f32[4,3]{1,0} dot", "s32[4,3]{1,0} dot")
    integer = integer.replace("ROOT %t = f32[3,4]{0,1}", "ROOT %t = s32[3,4]{0,1}").replace(
        "-> f32[3,4]", "-> s32[3,4]"
    )
    assert "%convert" not in _runnable_text(integer)


# --- layouts and configs ---------------------------------------------------------------------------

CONFIGURED = hlo("""
    HloModule m, entry_computation_layout={(f32[2,3]{0,1:S(1)}, f32[3,4]{1,0})->f32[2,4]{0,1}}

    ENTRY %e (a: f32[2,3], b: f32[3,4]) -> f32[2,4] {
      %a = f32[2,3]{0,1:S(1)} parameter(0)
      %b = f32[3,4]{1,0} parameter(1)
      %k = f32[] constant(2)
      %m = f32[2,3]{0,1} broadcast(%k), dimensions={}
      %s = f32[2,3]{0,1} multiply(%a, %m), backend_config={"operation_queue_id":"0","wait_on_operation_queues":[]}
      %q = f32[3,3]{0,1} custom-call(%s), custom_call_target="ProbablyLapack", operand_layout_constraints={f32[2,3]{0,1}}, backend_config="opaque config"
      ROOT %d = f32[2,4]{0,1} dot(%s, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"outer_dimension_partitions":["2"]}
    }
""")


def test_layouts_become_the_default_and_backend_configs_go_but_custom_calls_keep_theirs() -> None:
    text = _runnable_text(CONFIGURED)
    assert "entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->f32[2,4]{1,0}}" in text
    body = _body(text)
    assert "%a = f32[2,3]{1,0} parameter(0)" in body
    assert "%s = f32[2,3]{1,0} multiply(%a, %m)" in body
    assert "ROOT %d = f32[2,4]{1,0} dot(%s, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}" in body
    assert (
        '%q = f32[3,3]{0,1} custom-call(%s), custom_call_target="ProbablyLapack", '
        'operand_layout_constraints={f32[2,3]{0,1}}, backend_config="opaque config"'
    ) in body


def test_a_constant_keeps_its_values_in_the_default_layout() -> None:
    text = _runnable_text(
        hlo("""
            HloModule m

            ENTRY %e () -> f32[2,3] {
              %c = f32[2,3]{0,1} constant({ { 1, 2, 3 }, { 4, 5, 6 } })
              ROOT %n = f32[2,3]{0,1} negate(%c)
            }
        """)
    )
    assert "%c = f32[2,3]{1,0} constant({ { 1, 2, 3 }, { 4, 5, 6 } })" in text
    (result,) = xla_helper.execute(text, [])
    np.testing.assert_array_equal(result, -np.arange(1, 7, dtype=np.float32).reshape(2, 3))


def test_a_module_with_nothing_to_rewrite_is_unchanged() -> None:
    text = hlo("""
        HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

        ENTRY %e (x: f32[4]) -> f32[4] {
          %x = f32[4]{0} parameter(0)
          ROOT %t = f32[4]{0} tanh(%x)
        }
    """)
    module = parse(text, "t")
    report = run_passes(module, [CpuRunnable()])
    assert not report.changed
    assert module.to_text() == parse(text, "t").to_text()


# --- refusals --------------------------------------------------------------------------------------


ACCELERATOR = "which only a GPU or TPU implements: XLA's CPU backend cannot run it"
HOST_CALLBACK = "a jax host callback: it calls a Python function by its index in a list that jax hands only to"
#: Every spelling of jax's host-callback targets (plain and FFI, partitioned, buffer, CPU, GPU or either).
HOST_CALLBACKS = [
    f"xla{ffi}{partitioned}{buffer}_python_{platform}callback"
    for ffi in ("", "_ffi")
    for partitioned in ("", "_partitioned")
    for buffer in ("", "_buffer")
    for platform in ("", "cpu_", "gpu_")
]


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("__cublas$gemm", ACCELERATOR),
        ("__cublas$lt$matmul", ACCELERATOR),
        ("__cudnn$convForward", ACCELERATOR),
        ("__triton", ACCELERATOR),
        ("tpu_custom_call", ACCELERATOR),
        ("te_fused_attn_fwd_ffi", ACCELERATOR),
        *((target, HOST_CALLBACK) for target in HOST_CALLBACKS),
    ],
)
def test_a_custom_call_the_cpu_cannot_run_is_refused_by_name(target: str, reason: str) -> None:
    text = hlo(f"""
        HloModule m

        %fused (p: f32[4,4]) -> f32[4,4] {{
          %p = f32[4,4]{{1,0}} parameter(0)
          ROOT %gemm.7 = f32[4,4]{{1,0}} custom-call(%p, %p), custom_call_target="{target}"
        }}

        ENTRY %e (x: f32[4,4]) -> f32[4,4] {{
          %x = f32[4,4]{{1,0}} parameter(0)
          ROOT %f = f32[4,4]{{1,0}} fusion(%x), kind=kCustom, calls=%fused
        }}
    """)
    module = parse(text, "t")
    with pytest.raises(NotCpuRunnable) as caught:
        cpu_runnable(module)
    message = str(caught.value)
    assert message.startswith(f"%gemm.7 (custom-call) in %fused calls {target}, {reason}")


@pytest.mark.parametrize("target", ["TopK", "te_op", "lapack_sgetrf_ffi", "xla_python_callback_helper"])
def test_other_custom_calls_are_kept(target: str) -> None:
    text = hlo(f"""
        HloModule m

        ENTRY %e (x: f32[4,8]) -> (f32[4,2], s32[4,2]) {{
          %x = f32[4,8]{{1,0}} parameter(0)
          ROOT %top = (f32[4,2]{{1,0}}, s32[4,2]{{1,0}}) custom-call(%x), custom_call_target="{target}"
        }}
    """)
    assert _runnable_text(text) == parse(text, "t").to_text()


def test_a_constant_printed_without_its_value_is_a_warning_that_names_it() -> None:
    text = hlo("""
        HloModule m

        ENTRY %e () -> f32[64] {
          ROOT %weights.3 = f32[64]{0} constant({...})
        }
    """)
    _, warnings = cpu_runnable(parse(text, "t"))
    (warning,) = warnings
    assert warning.startswith("%weights.3 (constant) in %e was printed without its value ({...}); XLA runs it")
