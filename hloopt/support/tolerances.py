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
