"""XLA through jaxlib, for the differential tests (hloopt.xla_bridge is not in the tree yet).

The calls are those of /work/shared/recipes/xla_reference.py.
"""
from __future__ import annotations

import numpy as np


def canonical(text: str) -> str:
    """XLA's own print of the module; raises when XLA's parser rejects it."""
    import jaxlib._hlo as hlo

    return hlo.hlo_module_from_text(text).to_string()


def to_stablehlo(text: str) -> bytes:
    """Parse and convert to StableHLO: the conversion runs the shape checks the parser skips."""
    import jaxlib._hlo as hlo
    from jax._src.lib import _jax

    module = hlo.hlo_module_from_text(text)
    return _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())


def execute(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Compile `text` for the CPU and run it once on `inputs`."""
    import jax
    import jax.extend
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir

    stablehlo = to_stablehlo(text)
    backend = jax.extend.backend.get_backend("cpu")
    device = backend.devices()[0]
    with jax_mlir.make_ir_context():
        executable = backend.compile_and_load(ir.Module.parse(stablehlo), _jax.DeviceList((device,)))
        results = executable.execute_sharded([jax.device_put(x, device) for x in inputs])
    return [np.asarray(shards[0]) for shards in results.disassemble_into_single_device_arrays()]
