"""neuron-auto-cast beside upcast-all-to-fp32 on the same 100,000-instruction module, in one run.

The module is a stack of layers as a jax MLP lowers them (an f32 dot, a bias broadcast and add, a
ReLU, a row sum through a shared reducer, and a bf16 detour: convert, multiply, convert back), so
both passes have work: upcast retypes the bf16 values, auto-cast the dots (``matmult``) or every f32
op (``all``; tf32 under ``all`` writes each rounding as ~15 instructions of bit arithmetic and is left out).
Each pass runs `--repeat` times on a fresh copy of the parsed module (the copy is not
timed), interleaved; the best times are compared. Issue 25's goal: a pass of neuron-auto-cast costs
at most what upcast-all-to-fp32 costs on the module (ratio ≤ 1).

How far the ratio depends on what each pass has to change, ``--module`` shows: ``mlp`` (the default,
above), ``mlp-f32`` (no bf16 detour, an ``exponential`` in its place: upcast has nothing to change),
``jax-step`` (parse_print.py's compiled jax training step, copied to about `--instructions`) and
``chain`` (large_modules.py's generated bf16 chains: ``all`` has little to change).
benchmarks/auto_cast_floor.py measures what ``all`` cannot do without on ``mlp``. Usage:

    python benchmarks/auto_cast.py [--instructions 100000] [--repeat 5] [--module mlp|mlp-f32|jax-step|chain]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hloopt.ir.module import Module
from hloopt.passes.base import HloPass
from hloopt.passes.registry import lookup
from hloopt.support.gcpause import paused_gc
from hloopt.text.parser import parse

GOAL = 1.0
#: Instructions one layer adds (see `layer`).
PER_LAYER = 11


def layer(i: int, x: str, detour: bool = True) -> tuple[list[str], str]:
    lines = [
        f"  w{i} = f32[64,64]{{1,0}} parameter({i + 1})",
        f"  d{i} = f32[16,64]{{1,0}} dot({x}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
        f"  bb{i} = f32[16,64]{{1,0}} broadcast(bias), dimensions={{1}}",
        f"  a{i} = f32[16,64]{{1,0}} add(d{i}, bb{i})",
        f"  r{i} = f32[16,64]{{1,0}} maximum(a{i}, zeros)",
        f"  rs{i} = f32[16]{{0}} reduce(r{i}, zero), dimensions={{1}}, to_apply=sum",
        *(
            [
                f"  hb{i} = bf16[16,64]{{1,0}} convert(r{i})",
                f"  mb{i} = bf16[16,64]{{1,0}} multiply(hb{i}, hb{i})",
                f"  nf{i} = f32[16,64]{{1,0}} convert(mb{i})",
            ]
            if detour
            else [f"  nf{i} = f32[16,64]{{1,0}} exponential(r{i})"]
        ),
        f"  sb{i} = f32[16,64]{{1,0}} broadcast(rs{i}), dimensions={{0}}",
        f"  o{i} = f32[16,64]{{1,0}} subtract(nf{i}, sb{i})",
    ]
    return lines, f"o{i}"


def module_text(instructions: int, detour: bool = True) -> str:
    layers = max(1, instructions // (PER_LAYER if detour else PER_LAYER - 2))
    body = [
        "  x = f32[16,64]{1,0} parameter(0)",
        "  bias = f32[64]{0} constant({...})",
        "  zero = f32[] constant(0)",
        "  zeros = f32[16,64]{1,0} broadcast(zero), dimensions={}",
    ]
    x = "x"
    for i in range(layers):
        lines, x = layer(i, x, detour)
        body += lines
    body.append(f"  ROOT out = f32[16,64]{{1,0}} negate({x})")
    reducer = "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n\n"
    return "HloModule mlp\n\n" + reducer + "ENTRY main {\n" + "\n".join(body) + "\n}\n"


def chosen_module(name: str, instructions: int) -> str:
    """The text of the module `--module` names, of about `instructions` instructions."""
    if name in ("mlp", "mlp-f32"):
        return module_text(instructions, detour=name == "mlp")
    if name == "chain":
        from large_modules import generated_chain

        return generated_chain(instructions)
    from parse_print import compiled_jax_step, replicate  # jax, only for this module

    step = compiled_jax_step()
    return replicate(step, max(1, round(instructions / step.count(" = "))))


def seconds(work: Callable[[Module], object], parsed: Module) -> float:
    """One timed run of `work` on a fresh copy of `parsed` (the copy is not timed), the collector paused."""
    copy = parsed.clone()
    gc.collect()
    with paused_gc():
        start = time.perf_counter()
        work(copy)
        return time.perf_counter() - start


def best_seconds(runs: dict[str, Callable[[Module], object]], parsed: Module, repeat: int) -> dict[str, float]:
    """Each run's best time over `repeat` rounds, the runs interleaved within a round."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, work in runs.items():
            best[name] = min(best[name], seconds(work, parsed))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--instructions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--module", choices=("mlp", "mlp-f32", "jax-step", "chain"), default="mlp")
    args = parser.parse_args()
    parsed = parse(chosen_module(args.module, args.instructions), f"{args.module}.hlo")
    count = sum(len(c.instructions) for c in parsed.computations)
    passes: dict[str, HloPass] = {"upcast-all-to-fp32": lookup("upcast-all-to-fp32").create()}
    for mode in ("none", "matmult", "all"):
        passes[f"neuron-auto-cast{{mode={mode}}}"] = lookup("neuron-auto-cast").create({"mode": mode})
    best = best_seconds({name: hlo_pass.run for name, hlo_pass in passes.items()}, parsed, args.repeat)
    reference = best["upcast-all-to-fp32"]
    print(f"{count} instructions; best of {args.repeat}; goal: ratio to upcast-all-to-fp32 <= {GOAL}")
    failed = False
    for name, value in best.items():
        ratio = value / reference
        failed |= ratio > GOAL
        print(f"  {name:42} {value * 1000:9.1f} ms  ratio {ratio:5.2f}{'' if ratio <= GOAL else '  (over the goal)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
