"""hloopt: rewrite XLA HLO text the way the Neuron compiler's dtype passes do.

module = hloopt.parse(text)      # HLO text -> typed IR (hloopt.ir)
text = module.to_text()          # IR -> XLA's canonical text
hloopt.execute(module, inputs)   # run on the CPU through XLA
hloopt.compare(a, b)             # run two modules on the same inputs, compare
hloopt.compare(m, m, numerics="xla,neuron")   # how far XLA is from the Neuron device on m
with hloopt.IsolatedPool(1) as pool:           # one XLA worker process for many runs
    hloopt.execute(module, inputs, pool=pool)
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from hloopt.errors import HloError, HloParseError

if TYPE_CHECKING:
    from hloopt.ir import Module
    from hloopt.text.parser import parse
    from hloopt.xla.bridge import IsolatedPool
    from hloopt.xla.running import compare, execute

__version__ = "0.1.0"

__all__ = ["HloError", "HloParseError", "IsolatedPool", "Module", "__version__", "compare", "execute", "parse"]

#: Names loaded on first use, so `hloopt --version` and `hloopt passes` start without numpy, lark or jax.
_LAZY = {
    "parse": "hloopt.text.parser",
    "Module": "hloopt.ir",
    "execute": "hloopt.xla.running",
    "compare": "hloopt.xla.running",
    "IsolatedPool": "hloopt.xla.bridge",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hloopt' has no attribute {name!r}")
