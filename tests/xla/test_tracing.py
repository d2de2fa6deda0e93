"""``trace`` through XLA: planted errors are named where they are made, downstream ones are propagated;
rounds under a memory cap give the same answer; NaN origins; the f64 verdict on the shipped examples."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import sampled
from looping import bf16_scan_rnn, counted_loop

from hloopt.arrays.tracing import TraceReport, moved
from hloopt.ir.element_types import BY_NAME, ROWS, Kind, numpy_dtype
from hloopt.xla.bridge import IsolatedPool
from hloopt.xla.tracing import nan_origin, trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BINARY = ("add", "subtract", "multiply", "maximum")
UNARY = ("tanh", "negate", "sine")


@pytest.fixture(scope="module")
def pool() -> Iterator[IsolatedPool]:
    with IsolatedPool(1) as workers:
        yield workers


def random_module(seed: int, size: int = 12) -> tuple[str, list[str]]:
    """A random f32 module of elementwise ops over two parameters and a constant: its text, and the lines
    of its body (one per instruction) so that a plant can rewrite one."""
    rng = random.Random(seed)
    lines = [
        "p0 = f32[8] parameter(0)",
        "p1 = f32[8] parameter(1)",
        "k = f32[8] constant({1.25, -0.5, 3, 2, 0.75, -1.5, 4, 0.125})",
    ]
    names = ["p0", "p1", "k"]
    for index in range(size):
        name = f"v{index}"
        if rng.random() < 0.7:
            x, y = rng.sample(names, 2)
            lines.append(f"{name} = f32[8] {rng.choice(BINARY)}({x}, {y})")
        else:
            lines.append(f"{name} = f32[8] {rng.choice(UNARY)}({rng.choice(names)})")
        names.append(name)
    return text_of(lines), lines


def text_of(lines: list[str]) -> str:
    body = "\n".join(f"  {'ROOT ' if i == len(lines) - 1 else ''}{line}" for i, line in enumerate(lines))
    return f"HloModule planted\nENTRY main {{\n{body}\n}}\n"


def plant(lines: list[str], seed: int) -> tuple[list[str], str]:
    """One instruction made slightly wrong: the constant one ULP off, a sign (add ↔ subtract), or a
    subtraction's operands swapped; returns the lines and the planted instruction's name."""
    rng = random.Random(seed)
    kinds = ["constant", *(["sign"] * 2), *(["swap"] * 2)]
    planted = list(lines)
    while True:
        kind = rng.choice(kinds)
        if kind == "constant":
            value = np.float32(1.25)
            planted[2] = planted[2].replace("1.25", repr(float(np.nextafter(value, np.float32(2)))), 1)
            return planted, "k"
        candidates = [i for i, line in enumerate(lines) if (" add(" in line or " subtract(" in line) and i > 2]
        if kind == "swap":
            candidates = [i for i in candidates if " subtract(" in lines[i]]
        if not candidates:
            continue
        index = rng.choice(candidates)
        name, _, rest = lines[index].partition(" = f32[8] ")
        opcode, _, operands = rest.partition("(")
        x, y = operands.rstrip(")").split(", ")
        if kind == "sign":
            flipped = "subtract" if opcode == "add" else "add"
            planted[index] = f"{name} = f32[8] {flipped}({x}, {y})"
        else:
            planted[index] = f"{name} = f32[8] subtract({y}, {x})"
        return planted, name


def check_planted(report: TraceReport, name: str) -> None:
    assert report.first is not None and report.first.a == name, report.render()
    assert [t.a for t in report.instructions if t.makes_error] == [name], report.render()
    moved = [t for t in report.instructions if t.propagated.max_abs_err > 0 and t.a != name]
    assert all(t.local is not None and not t.makes_error for t in moved)


@pytest.mark.parametrize("seed", sampled(range(40), 20))
def test_planted_error_is_named_first_and_downstream_is_propagated(seed: int, pool: IsolatedPool) -> None:
    text, lines = random_module(seed)
    planted, name = plant(lines, seed)
    report = trace(text, text_of(planted), pool=pool)
    assert report.matched_by == "names"
    check_planted(report, name)


def test_identical_modules_make_no_error(pool: IsolatedPool) -> None:
    text, _ = random_module(1)
    report = trace(text, pool=pool)
    assert report.ok and report.rounds == 1
    assert all(
        t.propagated.bit_identical and t.local is not None and t.local.bit_identical for t in report.instructions
    )


@pytest.mark.parametrize("seed", sampled([3, 11], 2))
def test_memory_cap_takes_rounds_with_the_same_answer(seed: int, pool: IsolatedPool) -> None:
    text, lines = random_module(seed, size=30)
    planted, _ = plant(lines, seed)
    whole = trace(text, text_of(planted), pool=pool)
    # Two 32-byte inputs per side, then room for only a few instructions a round.
    capped = trace(text, text_of(planted), max_bytes=128 + 400, pool=pool)
    assert whole.rounds == 1 and capped.rounds > 3
    # The same answer: which instructions make error, and the first. (A captured value itself can move by
    # a bit with what else the round outputs: XLA's CPU fusion differs.)
    assert [t.a for t in capped.instructions] == [t.a for t in whole.instructions]
    assert [t.a for t in capped.instructions if t.makes_error] == [t.a for t in whole.instructions if t.makes_error]
    assert capped.first is not None and whole.first is not None and capped.first.a == whole.first.a


def test_a_module_over_the_cap_even_for_its_inputs_is_refused(pool: IsolatedPool) -> None:
    from hloopt.arrays import ExecutionError

    text, _ = random_module(2)
    with pytest.raises(ExecutionError, match="over the limit"):
        trace(text, max_bytes=64, pool=pool)


def test_output_path_leads_back_to_the_plant(pool: IsolatedPool) -> None:
    lines = [
        "p0 = f32[8] parameter(0)",
        "p1 = f32[8] parameter(1)",
        "a = f32[8] multiply(p0, p1)",
        "b = f32[8] subtract(a, p0)",
        "c = f32[8] tanh(b)",
        "d = f32[8] add(c, p1)",
    ]
    planted = [*lines[:3], "b = f32[8] subtract(p0, a)", *lines[4:]]
    report = trace(text_of(lines), text_of(planted), pool=pool)
    (output,) = report.outputs
    assert output.path == ("d", "c", "b")
    assert report.to_dict()["first"] == "b"


def test_nan_origin_of_an_fp8_overflow(pool: IsolatedPool) -> None:
    text = """HloModule overflow
ENTRY main {
  x = f32[4] parameter(0)
  big = f32[4] constant({1, 2, 1000, 4})
  m = f32[4] multiply(x, big)
  q = f8e4m3fn[4] convert(m)
  ROOT w = f32[4] convert(q)
}
"""
    origin = nan_origin(text, inputs=[np.ones(4, np.float32)], pool=pool)
    assert origin is not None and (origin.instruction, origin.opcode, origin.index) == ("q", "convert", (2,))
    assert origin.value == "nan" and origin.operands == (("m", "1000.0"),)


def test_nan_origin_of_a_log_of_a_negative_value(pool: IsolatedPool) -> None:
    text = """HloModule logs
ENTRY main {
  x = f32[3] parameter(0)
  one = f32[3] constant({1, 1, 1})
  s = f32[3] subtract(x, one)
  l = f32[3] log(s)
  ROOT t = f32[3] tanh(l)
}
"""
    origin = nan_origin(text, inputs=[np.array([2, 0.5, 3], np.float32)], pool=pool)
    assert origin is not None and (origin.instruction, origin.index, origin.value) == ("l", (1,), "nan")
    assert origin.operands == (("s", "-0.5"),)
    assert nan_origin(text, inputs=[np.array([2, 3, 4], np.float32)], pool=pool) is None


@pytest.mark.slow
def test_upcast_all_on_the_bf16_examples_is_better(pool: IsolatedPool) -> None:
    for name in ("bf16_conv_batchnorm_train.hlo", "fp8_bf16_mlp.hlo"):
        text = (EXAMPLES / name).read_text()
        report = trace(text, passes="upcast-all-to-fp32", reference=True, pool=pool)
        assert report.matched_by == "provenance" and report.reference_error is None
        assert report.verdict == "better", (name, report.render())
        assert report.ok, report.render()


def test_a_planted_wrong_constant_is_suspect(pool: IsolatedPool) -> None:
    text = (EXAMPLES / "bf16_conv_batchnorm_train.hlo").read_text()
    wrong = text.replace("bf16[] constant(0)", "bf16[] constant(0.5)", 1)
    assert wrong != text
    report = trace(text, wrong, reference=True, pool=pool)
    assert report.verdict == "suspect", report.render()
    assert report.first is not None and report.first.a == "zero"


def _jax_program(kind: str) -> str:
    """A bf16 jax program nobody here wrote, lowered by jax to HLO text."""
    import jax
    import jax.numpy as jnp

    def mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> tuple[jax.Array, jax.Array]:
        for w, b in params:
            x = jax.nn.gelu(x @ w + b)
        return jnp.mean(x**2), jax.nn.softmax(x)

    def norm(x: jax.Array) -> jax.Array:
        return (x - x.mean(axis=0)) / jnp.sqrt(x.var(axis=0) + 1e-5)

    if kind == "mlp":
        params = [(jnp.full((16, 16), 0.1, jnp.bfloat16), jnp.zeros((16,), jnp.bfloat16)) for _ in range(3)]
        lowered = jax.jit(mlp).lower(params, jnp.ones((4, 16), jnp.bfloat16))
    else:
        lowered = jax.jit(norm).lower(jnp.ones((8, 16), jnp.bfloat16))
    return lowered.compiler_ir("hlo").as_hlo_text()  # pyright: ignore[reportOptionalMemberAccess]


@pytest.mark.parametrize("kind", sampled(["norm", "mlp"], 2))
def test_on_jax_programs_the_errors_enter_at_rewritten_instructions(kind: str, pool: IsolatedPool) -> None:
    report = trace(_jax_program(kind), passes="all", reference=True, pool=pool)
    assert report.matched_by == "provenance" and report.instructions
    by_a = {t.a: t for t in report.instructions}
    for output in report.outputs:
        assert output.instruction is not None and output.path
        entered = by_a[output.path[-1]]
        if entered.propagated.max_abs_err > 0:
            # Where the error entered, B's instruction is a rewrite: another type or another instruction.
            assert entered.propagated.type_a != entered.propagated.type_b or entered.a != entered.b, report.render()
    assert report.verdict in ("better", "precision"), report.render()


LOOP = counted_loop(
    6,
    """
    half = f32[4] constant({0.5, 0.5, 0.5, 0.5})
    scaled = f32[4] multiply(bv, half)
    bump = f32[4] sine(scaled)
    acc = f32[4] add(bv, bump)
    """,
    """
    p = pred[] parameter(1)
    c = f32[4] conditional(p, wv, wv), true_computation=grow, false_computation=neg
    ROOT out = f32[4] tanh(c)
    """,
    """neg {
  a = f32[4] parameter(0)
  ROOT na = f32[4] negate(a)
}
grow {
  g = f32[4] parameter(0)
  two = f32[4] constant({2, 2, 2, 2})
  ROOT gg = f32[4] multiply(g, two)
}""",
)


@pytest.mark.parametrize(
    ("planted", "first", "cap"),
    [
        (
            ("half = f32[4] constant({0.5, 0.5, 0.5, 0.5})", "half = f32[4] constant({0.5, 0.50000006, 0.5, 0.5})"),
            "half@w#0",
            16,
        ),
        (("acc = f32[4] add(bv, bump)", "acc = f32[4] subtract(bv, bump)"), "acc@w#0", 3),
        (("two = f32[4] constant({2, 2, 2, 2})", "two = f32[4] constant({2, 2, 2.0000002, 2})"), "two@c", 16),
    ],
    ids=["body-constant", "body-sign", "branch-constant"],
)
def test_a_plant_inside_a_loop_body_or_a_branch_is_named_first(
    planted: tuple[str, str], first: str, cap: int, pool: IsolatedPool
) -> None:
    """The body's values are captured per iteration, the taken branch's per call; the plant is named
    first (its first iteration), what follows it only propagates."""
    inputs = [np.array([0.25, -1, 2, 0.5], np.float32), np.array(True)]
    wrong = LOOP.replace(*planted)
    assert wrong != LOOP
    report = trace(LOOP, wrong, inputs=inputs, iterations=cap, pool=pool)
    assert report.first is not None and report.first.origin == first, report.render()
    assert {t.instruction for t in report.instructions if t.makes_error} == {first.partition("#")[0]}
    moved = [
        t for t in report.instructions if t.propagated.max_abs_err > 0 and t.instruction != report.first.instruction
    ]
    assert moved and not any(t.makes_error for t in moved), report.render()
    # Only a value read after the iterations past the cap (a loop, untraced) is not recomputed.
    assert all(t.local is not None or t.iteration == 5 for t in moved), report.render()
    (loop,) = report.loops
    assert (loop.site, loop.iterations_a, loop.iterations_b) == ("w", 6, 6)
    assert loop.traced == ((0, 1, 2, 3, 4, 5) if cap >= 6 else (0, 1, 5))
    (branch,) = report.branches
    assert (branch.site, branch.taken_a, branch.taken_b, branch.not_executed) == ("c", 0, 0, (1,))
    data = report.to_dict()
    assert data["loops"][0]["traced"] == list(loop.traced) and data["branches"][0]["not_executed"] == [1]
    if first.endswith("#0"):
        (worst,) = [each for each in report.iterated() if each.instruction == first[:-2]]
        assert worst.iterations == len(loop.traced) and worst.moved


@pytest.mark.slow
def test_a_jax_fori_loop_body_is_traced_per_iteration(pool: IsolatedPool) -> None:
    """A jax fori_loop (a while whose body calls a closed_call) and a lax.cond, lowered by jax: a constant
    of the body one ULP off is named first in iteration 0; the reduce's computation is covered by it."""
    import jax
    import jax.numpy as jnp

    def f(x: jax.Array) -> jax.Array:
        y = jax.lax.fori_loop(0, 5, lambda i, c: jnp.tanh(c * 1.5 + i), x)
        return jax.lax.cond(y.sum() > 0, lambda v: v * 2, lambda v: v - 1, y)

    text = jax.jit(f).lower(jnp.ones(4, jnp.float32)).compiler_ir("hlo").as_hlo_text()  # pyright: ignore[reportOptionalMemberAccess]
    wrong = text.replace("f32[] constant(1.5)", "f32[] constant(1.5000001)", 1)
    assert wrong != text
    report = trace(text, wrong, pool=pool)
    assert report.first is not None and report.first.iteration == 0 and "@while" in report.first.origin
    assert report.first.origin.startswith("constant"), report.render()
    assert [(loop.iterations_a, loop.iterations_b) for loop in report.loops] == [(5, 5)]
    assert report.covered and all(callers for _, callers in report.covered)


#: Two values every element type of its kind holds exactly, floats more than one ULP apart (e8m0 has no zero;
#: s1 is -1 and 0).
_TWO = {Kind.PRED: (True, False), Kind.SIGNED: (-1, 0), Kind.UNSIGNED: (1, 0), Kind.FLOAT: (1, 4), Kind.COMPLEX: (1, 4)}
_TYPES = [row for row in ROWS if row.kind not in (Kind.TOKEN, Kind.OPAQUE)]


def _typed(name: str) -> tuple[str, str, list[np.ndarray]]:
    """A module whose values are all of `name` (a select of two), the same with the select's operands
    swapped, and its inputs: given as `name` or, where numpy has no such type (s1, u1), as s8 or u8 (and
    the output that `run` reads too)."""
    row = BY_NAME[name]
    given = "s8" if name == "s1" else "u8" if name == "u1" else name
    first, second = _TWO[row.kind]
    dtype = numpy_dtype(given)
    inputs = [np.array([first, second] * 4).astype(dtype), np.array([second, first] * 4).astype(dtype)]
    text = f"""HloModule typed
ENTRY main {{
  p = {given}[8] parameter(0)
  q = {given}[8] parameter(1)
  x = {name}[8] convert(p)
  y = {name}[8] convert(q)
  k = pred[8] constant({{1, 0, 1, 1, 0, 0, 1, 0}})
  s = {name}[8] select(k, x, y)
  c = {name}[8] copy(s)
  back = {given}[8] convert(c)
  ROOT out = ({given}[8], {given}[8]) tuple(back, p)
}}
"""
    return text, text.replace("select(k, x, y)", "select(k, y, x)"), inputs


@pytest.mark.parametrize(
    "name",
    [pytest.param(row.name, marks=() if row.name in ("s1", "u2") else pytest.mark.slow) for row in _TYPES],
)
def test_every_element_type_is_captured_and_recomputed(name: str, pool: IsolatedPool) -> None:
    """Exhaustive over the element-type table: a value of each type is captured, and fed back to the
    recomputation as a parameter (s1 through s8); the swapped select is named first, its copy propagates.
    A type XLA's CPU cannot run at all (the module alone is refused) is refused by the trace the same way."""
    from hloopt.xla.bridge import XlaError
    from hloopt.xla.running import run

    text, wrong, inputs = _typed(name)
    try:
        run(text, inputs=inputs, pool=pool)
    except XlaError as refused:
        with pytest.raises(XlaError) as raised:
            trace(text, wrong, inputs=inputs, pool=pool)
        assert raised.value.stage == refused.stage
        assert name in ("u1", "f6e3m2fn", "f6e2m3fn"), refused  # what jaxlib 0.10's CPU cannot run
        return
    report = trace(text, wrong, inputs=inputs, pool=pool)
    assert report.first is not None and report.first.a == "s", report.render()
    by_a = {t.a: t for t in report.instructions}
    assert set(by_a) >= {"x", "y", "s", "c"}
    assert [t.a for t in report.instructions if t.makes_error] == ["s"]
    assert by_a["c"].local is not None and not by_a["c"].makes_error and moved(by_a["c"].propagated)


def test_nan_origin_inside_a_loop_body_is_named_with_its_iteration(pool: IsolatedPool) -> None:
    """The state falls by one an iteration: its log is the first NaN, in the iteration where it goes negative."""
    text = counted_loop(
        4,
        """
        step = f32[4] constant({1, 1, 1, 1})
        acc = f32[4] subtract(bv, step)
        l = f32[4] log(acc)
        """,
        "ROOT out = f32[4] copy(wv)",
    )
    origin = nan_origin(text, inputs=[np.array([10, 20, 2.5, 40], np.float32)], pool=pool)
    assert origin is not None and (origin.instruction, origin.index, origin.value) == ("l@w#2", (2,), "nan")
    assert origin.operands == (("acc@w#2", "-0.5"),)
    # Traced iterations 0 and 3 only: iteration 2 ran in the untraced middle, 3 is the first seen.
    capped = nan_origin(text, inputs=[np.array([10, 20, 2.5, 40], np.float32)], iterations=2, pool=pool)
    assert capped is not None and (capped.instruction, capped.operands) == ("l@w#3", (("acc@w#3", "-1.5"),))


def test_an_endless_loop_is_refused_not_run_forever(pool: IsolatedPool) -> None:
    """A while whose condition is constant true: the probe stops it and the trace says so."""
    from hloopt.arrays import ExecutionError

    text = counted_loop(1, "acc = f32[4] negate(bv)", "ROOT out = f32[4] copy(wv)").replace(
        "ROOT lt = pred[] compare(ci, n), direction=LT",
        "lt = pred[] compare(ci, n), direction=LT\n  ROOT yes = pred[] constant(true)",
    )
    assert "constant(true)" in text
    with pytest.raises(ExecutionError, match=r"while %w did not end within 1048576 iterations"):
        trace(text, pool=pool)


@pytest.mark.slow
def test_a_bf16_scan_after_upcast_all_is_matched_inside_its_body_by_provenance(pool: IsolatedPool) -> None:
    """A bf16 jax scan and its upcast-all-to-fp32 rewrite: the body's instructions of each traced iteration
    are matched by provenance (the pass rewrote them inside the body), and the f64 verdict is better."""
    text = bf16_scan_rnn(20, 16)
    report = trace(text, passes="upcast-all-to-fp32", reference=True, iterations=4, pool=pool)
    (loop,) = report.loops
    assert (loop.iterations_a, loop.iterations_b, loop.traced) == (20, 20, (0, 1, 2, 19))
    inside = [t for t in report.instructions if t.iteration is not None]
    assert {t.iteration for t in inside} == {0, 1, 2, 19}
    assert any(t.propagated.type_a == "bf16" and t.propagated.type_b == "f32" for t in inside)
    assert report.ok and report.verdict == "better", report.render()


def test_a_fused_computation_called_twice_is_traced_per_call_site(pool: IsolatedPool) -> None:
    """Two fusions of one computation (calls once made CPU-runnable): its instructions are traced at each
    call site, named by the fusion's own name (the call the preparation made stands for it)."""
    text = """HloModule f
fused {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  m = f32[4] multiply(a, b)
  ROOT t = f32[4] tanh(m)
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  f1 = f32[4] fusion(x, y), kind=kLoop, calls=fused
  f2 = f32[4] fusion(f1, y), kind=kLoop, calls=fused
  ROOT r = f32[4] add(f1, f2)
}
"""
    report = trace(text, text.replace("multiply(a, b)", "subtract(a, b)"), pool=pool)
    assert {t.origin for t in report.instructions} >= {"m@f1", "t@f1", "m@f2", "t@f2"}
    assert report.first is not None and report.first.origin == "m@f1"
    assert [t.origin for t in report.instructions if t.makes_error] == ["m@f1", "m@f2"]
    assert {t.site for t in report.instructions if "@" in t.origin} == {"f1", "f2"}
