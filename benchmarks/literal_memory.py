"""Peak memory and time of hloopt on literal-heavy modules, against the input file's size.

    python benchmarks/literal_memory.py [--elements 2000000] [--types f32,bf16] [--xla]

Writes, in a temporary directory, one module per element type: one `T[N]` constant of
`--elements` values (a block of 4,096 random values printed as XLA prints them, repeated)
and a `ROOT` that uses it. Each measurement runs in a fresh interpreter and reports
that process's peak resident memory (`VmHWM`; its children's too, if it starts any):

- "python": the interpreter with hloopt's parser, passes and numpy imported (the floor);
- "parse+print": `hloopt run IN -o OUT`;
- "passes all": `hloopt run IN --passes all -o OUT` (a bf16 constant becomes f32 text);
- "xla parse" (with `--xla`): jaxlib's own parser on the same text.

Prints CPU seconds, peak MB, and the peak against the input file's size. Goal (issue 28):
parse+print and `--passes all` peak at most 3× the input's size for a 1e8-element
literal (`--elements 100000000`: files of about 1.25 GB for f32, 0.75 GB for bf16; the issue measured 25×
and 260 s). Measured at 4e6 elements, before → after reading literals in pieces: f32 parse+print 15.4× → 6.9×,
`--passes all` 15.4× → 6.1×; bf16 parse+print 20.9× → 8.6×, `--passes all` 20.9× → 11.2× (13.5 → 3.4 s
CPU). What was left was copies of the text in the parser, the printer and the file I/O, not of the values.

Then, with a long literal a view of the module's text and `-o FILE` streamed (docs/decisions.md), at 2e7
elements, before → after in the same conditions (× the input, above the floor in brackets; CPU seconds on a
loaded machine): f32 (250 MB) parse+print 6.18× (6.02×) → 3.13× (2.97×), 10.0 → 9.0 s; `--passes all`
5.23× (5.06×) → 3.13× (2.96×), 10.8 → 8.7 s; bf16 (151 MB) parse+print 6.31× (6.03×) → 3.59× (3.32×),
6.6 → 7.0 s; `--passes all` 7.17× (6.89×) → 3.59× (3.32×), 10.0 → 12.3 s.
At 1e8 elements (one run; the issue's 7.4 GB, 25×, 260 s before), stop 34 → stop 35 (Lark's lexer no
longer copies a run; peaks read from VmHWM, which the old ru_maxrss inflated by the benchmark's own peak):
f32 (1,251 MB) parse+print 3.03× → 2.05× (2,441 MB, 30.6 s CPU), `--passes all` 3.03× → 2.05× (30.7 s);
bf16 (753 MB) parse+print 3.38× → 2.08× (1,496 MB, 21.8 s), `--passes all` 3.38× → 2.08× (55.0 s).
What is left is the source and one slice of the computation being read, plus the values a pass decodes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hloopt.ir.element_types import numpy_dtype
from hloopt.ir.literal import format_literal
from hloopt.ir.shape import ArrayShape

#: Runs its argv as hloopt's CLI, or as a small script, and prints its peak RSS (KiB) as it exits.
_MEASURED = """
import atexit, resource, sys
def _peak():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(usage.ru_utime + usage.ru_stime for usage in (own, children))
    # VmHWM, not ru_maxrss: Linux's ru_maxrss keeps the parent's peak from before the exec (the benchmark's own,
    # having just written the module text).
    with open("/proc/self/status") as status:
        own_peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print("PEAK", max(own_peak, children.ru_maxrss), cpu, file=sys.stderr)
atexit.register(_peak)
what = sys.argv.pop(1)
if what == "python":
    import numpy, hloopt.text.parser, hloopt.passes.registry, hloopt.cli.main
elif what == "xla":
    import jaxlib._hlo as hlo
    with open(sys.argv[1]) as f:
        hlo.hlo_module_from_text(f.read())
else:
    from hloopt.cli.main import main
    sys.argv[0] = "hloopt"
    main()
"""

#: Distinct values in each module (repeated to fill the constant).
_BLOCK = 4096


def module_text(element_type: str, elements: int, seed: int = 0) -> str:
    """A module with one `element_type[elements]` constant, values as XLA prints them."""
    rng = np.random.default_rng(seed)
    block = (rng.standard_normal(_BLOCK) * 4).astype(numpy_dtype(element_type))
    row = format_literal(block, ArrayShape(element_type, (_BLOCK,)))[1:-1]
    whole, rest = divmod(elements, _BLOCK)
    values = ", ".join([row] * whole + row.split(", ")[:rest])
    shape = f"{element_type}[{elements}]"
    return (
        f"HloModule literal_memory_{element_type}\n\nENTRY main {{\n"
        f"  c = {shape}{{0}} constant({{{values}}})\n"
        f"  ROOT n = {shape}{{0}} negate(c)\n}}\n\n"
    )


def measure(what: list[str]) -> tuple[float, int]:
    """(CPU seconds, peak KiB) of one fresh interpreter running `what` (CPU time: the machine may be shared)."""
    result = subprocess.run([sys.executable, "-c", _MEASURED, *what], capture_output=True, text=True, check=False)
    peaks = [line.split() for line in result.stderr.splitlines() if line.startswith("PEAK ")]
    if result.returncode != 0 or not peaks:
        raise SystemExit(f"{' '.join(what)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return float(peaks[-1][2]), int(peaks[-1][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=float, default=2_000_000, help="elements per constant (1e8 allowed)")
    parser.add_argument("--types", default="f32,bf16", help="comma-separated element types, one module each")
    parser.add_argument("--xla", action="store_true", help="also measure jaxlib's parser on the same text")
    args = parser.parse_args()
    elements = int(args.elements)
    _, floor = measure(["python"])
    print(f"python with hloopt imported: {floor / 1024:.0f} MB")
    with tempfile.TemporaryDirectory() as scratch:
        for element_type in args.types.split(","):
            source = Path(scratch) / f"{element_type}.hlo"
            source.write_text(module_text(element_type, elements))
            size = source.stat().st_size
            print(f"{element_type}[{elements}]: input {size / 1e6:.0f} MB")
            runs = {
                "parse+print": ["cli", "run", str(source), "-o", str(Path(scratch) / "out.hlo")],
                "passes all": ["cli", "run", str(source), "--passes", "all", "-o", str(Path(scratch) / "out-all.hlo")],
            }
            if args.xla:
                runs["xla parse"] = ["xla", str(source)]
            for label, what in runs.items():
                seconds, peak = measure(what)
                print(
                    f"  {label:12s} {seconds:7.1f} s CPU  peak {peak / 1024:7.0f} MB  "
                    f"{peak * 1024 / size:5.2f}× the input  ({(peak - floor) * 1024 / size:5.2f}× above the floor)"
                )
            source.unlink()


if __name__ == "__main__":
    main()
