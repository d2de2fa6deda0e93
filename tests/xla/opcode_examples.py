"""One minimal module per HLO opcode (and a few async sugar spellings) that XLA's parser accepts.

Every module shares one prelude: helper computations and an ENTRY whose parameters and
token feed the instruction under test, which is the ENTRY's ROOT and carries exactly the
attributes its opcode requires. `tests/text/test_accept_like_xla.py` derives its variants
from these: each attribute removed, each known attribute added, each one doubled.
"""

from __future__ import annotations

from dataclasses import dataclass

PRELUDE = """HloModule m

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %r = f32[] add(%x, %y)
}

%less (x: f32[], y: f32[]) -> pred[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %r = pred[] compare(%x, %y), direction=LT
}

%cond (x: s32[]) -> pred[] {
  %x = s32[] parameter(0)
  %z = s32[] constant(10)
  ROOT %r = pred[] compare(%x, %z), direction=LT
}

%body (x: s32[]) -> s32[] {
  %x = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %r = s32[] add(%x, %one)
}

%called (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] negate(%x)
}

%fused (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] negate(%x)
}

%wrapped (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] negate(%x)
}

%branch0 (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] negate(%x)
}

%branch1 (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %r = f32[4] abs(%x)
}

%combine (carry: f32[4], slice: f32[4]) -> (f32[4], f32[4]) {
  %carry = f32[4] parameter(0)
  %slice = f32[4] parameter(1)
  %sum = f32[4] add(%carry, %slice)
  ROOT %t = (f32[4], f32[4]) tuple(%sum, %sum)
}

ENTRY %e {
  %p = f32[4] parameter(0)
  %q = f32[4] parameter(1)
  %s = f32[] parameter(2)
  %i = s32[4] parameter(3)
  %j = s32[] parameter(4)
  %b = pred[] parameter(5)
  %c = c64[4] parameter(6)
  %m = f32[2,4] parameter(7)
  %n = f32[4,3] parameter(8)
  %u = u32[4] parameter(9)
  %ix = s32[2,1] parameter(10)
  %r3 = f32[1,4,3] parameter(11)
  %gs = s32[1] parameter(12)
  %st = u64[2] parameter(13)
  %bp = pred[4] parameter(14)
  %sq = f32[2,2] parameter(15)
  %x3 = f32[1,4,1] parameter(16)
  %k3 = f32[1,1,1] parameter(17)
  %tok = token[] after-all()
"""


@dataclass(frozen=True)
class Example:
    """A minimal module for `opcode`: the prelude, `lines` (helpers), then ``ROOT %root = `root```."""

    opcode: str
    root: str
    lines: tuple[str, ...] = ()

    def text(self, root: str | None = None) -> str:
        """The module, with `root` in place of the tested instruction's right-hand side if given."""
        body = "".join(f"  {line}\n" for line in self.lines)
        return f"{PRELUDE}{body}  ROOT %root = {self.root if root is None else root}\n}}\n"


def _ex(opcode: str, root: str, *lines: str) -> Example:
    return Example(opcode, root, lines)


_UNARY_F32 = [
    "abs",
    "ceil",
    "floor",
    "negate",
    "sign",
    "round-nearest-afz",
    "round-nearest-even",
    "copy",
    "opt-barrier",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atanh",
    "cbrt",
    "cosine",
    "cosh",
    "erf",
    "exponential",
    "exp2",
    "exponential-minus-one",
    "log",
    "log-plus-one",
    "log2",
    "logistic",
    "rsqrt",
    "sine",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
]
_BINARY_F32 = ["add", "atan2", "divide", "maximum", "minimum", "multiply", "power", "remainder", "subtract"]
_UNARY_S32 = ["count-leading-zeros", "not", "popcnt"]
_BINARY_S32 = ["and", "or", "xor", "mulhi", "shift-left", "shift-right-arithmetic", "shift-right-logical"]

EXAMPLES: tuple[Example, ...] = (
    *(_ex(op, f"f32[4] {op}(%p)") for op in _UNARY_F32),
    *(_ex(op, f"f32[4] {op}(%p, %q)") for op in _BINARY_F32),
    *(_ex(op, f"s32[4] {op}(%i)") for op in _UNARY_S32),
    *(_ex(op, f"s32[4] {op}(%i, %i)") for op in _BINARY_S32),
    _ex("add-dependency", "f32[4] add-dependency(%p, %tok)"),
    _ex("after-all", "token[] after-all(%tok)"),
    _ex("all-gather", "f32[8] all-gather(%p), dimensions={0}"),
    _ex("all-gather-start", "(f32[4], f32[8]) all-gather-start(%p), dimensions={0}"),
    _ex(
        "all-gather-done",
        "f32[8] all-gather-done(%ags)",
        "%ags = (f32[4], f32[8]) all-gather-start(%p), dimensions={0}",
    ),
    _ex("all-reduce", "f32[4] all-reduce(%p), to_apply=%add"),
    _ex("all-reduce-start", "f32[4] all-reduce-start(%p), to_apply=%add"),
    _ex("all-reduce-done", "f32[4] all-reduce-done(%ars)", "%ars = f32[4] all-reduce-start(%p), to_apply=%add"),
    _ex("all-to-all", "f32[4] all-to-all(%p)"),
    _ex("async-start", "((f32[4]), f32[4], s32[]) async-start(%p), calls=%wrapped"),
    _ex(
        "async-update",
        "((f32[4]), f32[4], s32[]) async-update(%as)",
        "%as = ((f32[4]), f32[4], s32[]) async-start(%p), calls=%wrapped",
    ),
    _ex("async-done", "f32[4] async-done(%as)", "%as = ((f32[4]), f32[4], s32[]) async-start(%p), calls=%wrapped"),
    _ex(
        "batch-norm-grad",
        "(f32[2,4], f32[4], f32[4]) batch-norm-grad(%m, %p, %p, %p, %m), epsilon=0.001, feature_index=1",
    ),
    _ex("batch-norm-inference", "f32[2,4] batch-norm-inference(%m, %p, %p, %p, %p), epsilon=0.001, feature_index=1"),
    _ex(
        "batch-norm-training",
        "(f32[2,4], f32[4], f32[4]) batch-norm-training(%m, %p, %p), epsilon=0.001, feature_index=1",
    ),
    _ex("bitcast", "f32[2,2] bitcast(%p)"),
    _ex("bitcast-convert", "s32[4] bitcast-convert(%p)"),
    _ex("broadcast", "f32[2,4] broadcast(%p), dimensions={1}"),
    _ex("call", "f32[4] call(%p), to_apply=%called"),
    _ex("cholesky", "f32[2,2] cholesky(%sq)"),
    _ex("clamp", "f32[4] clamp(%p, %q, %p)"),
    _ex("collective-broadcast", "f32[4] collective-broadcast(%p), replica_groups={{0}}"),
    _ex("collective-permute", "f32[4] collective-permute(%p), source_target_pairs={{0,1}}"),
    _ex("collective-permute-start", "(f32[4], f32[4]) collective-permute-start(%p), source_target_pairs={{0,1}}"),
    _ex(
        "collective-permute-done",
        "f32[4] collective-permute-done(%cps)",
        "%cps = (f32[4], f32[4]) collective-permute-start(%p), source_target_pairs={{0,1}}",
    ),
    _ex("collective-reduce", "f32[4] collective-reduce(%p), to_apply=%add"),
    _ex("compare", "pred[4] compare(%p, %q), direction=LT"),
    _ex("complex", "c64[4] complex(%p, %q)"),
    _ex("concatenate", "f32[8] concatenate(%p, %q), dimensions={0}"),
    _ex("conditional", "f32[4] conditional(%b, %p, %q), true_computation=%branch0, false_computation=%branch1"),
    _ex("constant", "f32[4] constant({1, 2, 3, 4})"),
    _ex("convert", "s32[4] convert(%p)"),
    _ex("convolution", "f32[1,4,1] convolution(%x3, %k3), window={size=1}, dim_labels=b0f_0io->b0f"),
    _ex("copy-start", "(f32[4], f32[4], u32[]) copy-start(%p)"),
    _ex("copy-done", "f32[4] copy-done(%cs)", "%cs = (f32[4], f32[4], u32[]) copy-start(%p)"),
    _ex("custom-call", 'f32[4] custom-call(%p), custom_call_target="foo"'),
    _ex("domain", 'f32[4] domain(%p), domain={kind="sharding", entry={replicated}, exit={maximal device=0}}'),
    _ex("dot", "f32[2,3] dot(%m, %n), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    _ex("dynamic-reshape", "f32[4] dynamic-reshape(%p, %j)"),
    _ex("dynamic-slice", "f32[2] dynamic-slice(%p, %j), dynamic_slice_sizes={2}"),
    _ex("dynamic-update-slice", "f32[4] dynamic-update-slice(%p, %q, %j)"),
    _ex("fft", "c64[4] fft(%c), fft_type=FFT, fft_length={4}"),
    _ex("fusion", "f32[4] fusion(%p), kind=kLoop, calls=%fused"),
    _ex(
        "gather",
        "f32[2,4] gather(%m, %ix), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,4}",
    ),
    _ex("get-dimension-size", "s32[] get-dimension-size(%p), dimensions={0}"),
    _ex("get-tuple-element", "f32[4] get-tuple-element(%tu), index=0", "%tu = (f32[4], f32[]) tuple(%p, %s)"),
    _ex("imag", "f32[4] imag(%c)"),
    _ex("real", "f32[4] real(%c)"),
    _ex("infeed", "(f32[4], token[]) infeed(%tok)"),
    _ex("iota", "s32[4] iota(), iota_dimension=0"),
    _ex("is-finite", "pred[4] is-finite(%p)"),
    _ex("map", "f32[4] map(%p, %q), to_apply=%add"),
    _ex("outfeed", "token[] outfeed(%p, %tok)"),
    _ex("pad", "f32[6] pad(%p, %s), padding=1_1"),
    _ex("parameter", "f32[4] parameter(18)"),
    _ex("partition-id", "u32[] partition-id()"),
    _ex("replica-id", "u32[] replica-id()"),
    _ex("ragged-all-to-all", "f32[4] ragged-all-to-all(%p, %q, %i, %i, %i, %i), replica_groups={{0}}"),
    _ex(
        "ragged-dot",
        "f32[2,3] ragged-dot(%m, %r3, %gs), lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
        "lhs_ragged_dims={0}, rhs_group_dims={0}",
    ),
    _ex("recv", "(f32[4], u32[], token[]) recv(%tok), channel_id=1"),
    _ex(
        "recv-done",
        "(f32[4], token[]) recv-done(%rv), channel_id=1",
        "%rv = (f32[4], u32[], token[]) recv(%tok), channel_id=1",
    ),
    _ex("reduce", "f32[] reduce(%p, %s), dimensions={0}, to_apply=%add"),
    _ex("reduce-precision", "f32[4] reduce-precision(%p), exponent_bits=5, mantissa_bits=10"),
    _ex("reduce-scatter", "f32[2] reduce-scatter(%p), dimensions={0}, to_apply=%add"),
    _ex("reduce-window", "f32[4] reduce-window(%p, %s), window={size=1}, to_apply=%add"),
    _ex("reshape", "f32[2,2] reshape(%p)"),
    _ex("reverse", "f32[4] reverse(%p), dimensions={0}"),
    _ex("rng", "f32[4] rng(%s, %s), distribution=rng_uniform"),
    _ex("rng-bit-generator", "(u64[2], u32[4]) rng-bit-generator(%st), algorithm=rng_default"),
    _ex("rng-get-and-update-state", "u64[2] rng-get-and-update-state(), delta=1"),
    _ex("scaled-dot", "f32[2,3] scaled-dot(%m, %m, %n, %n), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    _ex("scan", "(f32[2,4], f32[4]) scan(%m, %p), dimensions={0}, num_carries=1, to_apply=%combine"),
    _ex(
        "scatter",
        "f32[2,4] scatter(%m, %ix, %m), update_window_dims={1}, inserted_window_dims={0}, "
        "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add",
    ),
    _ex("select", "f32[4] select(%bp, %p, %q)"),
    _ex("select-and-scatter", "f32[4] select-and-scatter(%p, %p, %s), window={size=1}, select=%less, scatter=%add"),
    _ex("send", "(f32[4], u32[], token[]) send(%p, %tok), channel_id=1"),
    _ex(
        "send-done",
        "token[] send-done(%sd), channel_id=1",
        "%sd = (f32[4], u32[], token[]) send(%p, %tok), channel_id=1",
    ),
    _ex("set-dimension-size", "f32[<=4] set-dimension-size(%p, %j), dimensions={0}"),
    _ex("shuffle", "f32[4] shuffle(%p), dimensions={0}, mode=rotate, shifts={1}"),  # rotate needs its shifts
    _ex("slice", "f32[2] slice(%p), slice={[0:2]}"),
    _ex("sort", "f32[4] sort(%p), dimensions={0}, to_apply=%less"),
    _ex("stochastic-convert", "bf16[4] stochastic-convert(%p, %u)"),
    _ex("topk", "(f32[2], s32[2]) topk(%p), k=2"),
    _ex("transpose", "f32[4,2] transpose(%m), dimensions={1,0}"),
    _ex("triangular-solve", "f32[2,2] triangular-solve(%sq, %sq)"),
    _ex("tuple", "(f32[4], f32[]) tuple(%p, %s)"),
    _ex("while", "s32[] while(%j), condition=%cond, body=%body"),
    # Async sugar: the start takes the wrapped opcode's attributes, the done none of them.
    _ex("negate-start", "((f32[4]), f32[4]) negate-start(%p)"),
    _ex("negate-done", "f32[4] negate-done(%ns)", "%ns = ((f32[4]), f32[4]) negate-start(%p)"),
    _ex("custom-call-start", '((f32[4]), f32[4]) custom-call-start(%p), custom_call_target="foo"'),
    _ex(
        "custom-call-done",
        "f32[4] custom-call-done(%ccs)",
        '%ccs = ((f32[4]), f32[4]) custom-call-start(%p), custom_call_target="foo"',
    ),
    _ex(
        "dot-start",
        "((f32[2,4], f32[4,3]), f32[2,3]) dot-start(%m, %n), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    ),
)
