"""While-loop modules for the trace's tests (tests/xla and tests/cli): a counted loop over an f32[4] state."""

from __future__ import annotations


def counted_loop(steps: int, body: str, after: str, computations: str = "") -> str:
    """A module whose entry runs `body` `steps` times on an f32[4] state from parameter ``x`` (the body's
    lines read the state as ``bv`` and make the next one, ``acc``; the loop is ``w``), then `after` (lines
    reading the final state ``wv``, the last one the ROOT). `computations` are written before the entry."""
    indented = "\n".join(f"  {line.strip()}" for line in body.strip().splitlines())
    tail = "\n".join(f"  {line.strip()}" for line in after.strip().splitlines())
    return f"""HloModule loop
cond {{
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant({steps})
  ROOT lt = pred[] compare(ci, n), direction=LT
}}
body {{
  bp = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  next = s32[] add(bi, one)
{indented}
  ROOT bt = (s32[], f32[4]) tuple(next, acc)
}}
{computations}
ENTRY main {{
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  wv = f32[4] get-tuple-element(w), index=1
{tail}
}}
"""


def bf16_scan_rnn(steps: int, width: int) -> str:
    """A bf16 recurrent cell run by ``jax.lax.scan`` over `steps` steps (a while loop in HLO), as jax lowers it:
    the loop-carrying real program of the trace's test and of benchmarks/trace.py."""
    import jax
    import jax.numpy as jnp

    def rnn(w: jax.Array, xs: jax.Array) -> jax.Array:
        def cell(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            h = jnp.tanh(h @ w + x)
            return h, h.sum()

        h, sums = jax.lax.scan(cell, jnp.zeros((8, width), jnp.bfloat16), xs)
        return h.mean() + sums.mean()

    lowered = jax.jit(rnn).lower(jnp.ones((width, width), jnp.bfloat16), jnp.ones((steps, 8, width), jnp.bfloat16))
    return lowered.compiler_ir("hlo").as_hlo_text()  # pyright: ignore[reportOptionalMemberAccess]
