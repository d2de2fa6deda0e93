"""XLA for the pass tests: hloopt.xla.bridge, plus the StableHLO conversion check.

`to_stablehlo` is kept here: the corpus worker uses it as the "XLA accepts" test
(parse + conversion, which runs the shape checks the parser skips) without compiling.
"""

from __future__ import annotations

import numpy as np

from hloopt.xla import bridge as xla_bridge


def to_stablehlo(text: str) -> bytes:
    """Parse and convert to StableHLO: the conversion runs the shape checks the parser skips."""
    import jaxlib._hlo as hlo
    from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]  # jaxlib has no public route to StableHLO

    module = hlo.hlo_module_from_text(text)
    return _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())


def canonical(text: str) -> str:
    """XLA's own print of the module; raises when XLA's parser rejects it."""
    return xla_bridge.canonical(text)


def execute(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Compile `text` for the CPU and run it once on `inputs`."""
    return xla_bridge.execute(text, inputs)


def execute_runnable(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`execute` after cpu-runnable, as ``hloopt exec`` runs a module: a pass's output may hold what XLA's CPU
    runs only so (auto-cast's bf16 × bf16 → f32 dots)."""
    from hloopt.xla.running import with_numerics

    return xla_bridge.execute(with_numerics(text, "xla").text, inputs)
