"""The default tolerances of hloopt's numerics comparisons, each written once.

Here, in a module that imports nothing, because the CLI shows them in ``--help``
without loading numpy, and the library's defaults must be the same numbers.
"""

#: ``exec``/``compare`` and `hloopt.compare`: the same program, or two compilations of it, should agree closely.
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-8
#: ``run --verify-numerics``: the passes change numbers on purpose (bf16 arithmetic done in f32).
VERIFY_RTOL = 1e-2
VERIFY_ATOL = 1e-3

#: ``trace``: how many ULPs of an instruction's own type (the narrower of A's and B's) its local error may
#: reach before it is said to make error. The same instruction on the same operands gives the same bits
#: in XLA's CPU compiler, so 32- and 64-bit floats and integers get none; a rewrite that computes a narrow
#: type in a wider one rounds once more, which is one step of that type: 0.125 near 18 in bf16 is one ULP.
TRACE_ULPS = {"f64": 0, "f32": 0, "c128": 0, "c64": 0}
#: Every float type not in `TRACE_ULPS` (16 bits and fewer).
TRACE_ULPS_NARROW = 1
#: ``trace``: how many instructions the report lists by local error.
TRACE_TOP = 10

#: How many iterations of each while loop ``trace`` captures by default: the first ``TRACE_ITERATIONS - 1`` and
#: the last. Each is a copy of the body in the module that runs, so the cap bounds its size (and compile
#: time); ``--max-bytes`` bounds the values captured at once.
TRACE_ITERATIONS = 16
