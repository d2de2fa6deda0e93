"""The arrays of XLA runs, without jax: how two runs' outputs differ (`comparing`), that comparison as
a table or JSON (`rendering`), and npz files of inputs and outputs (`npz`).

`hloopt.xla.running` runs the modules; what it hands back needs only numpy to measure, print and store,
so that work lives here, below the one layer that imports jax.
"""

from hloopt.errors import HloError


class ExecutionError(HloError):
    """Inputs or outputs that cannot be used as asked (the XLA side was fine)."""
