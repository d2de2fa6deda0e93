"""hloopt: rewrite XLA HLO text the way the Neuron compiler's dtype passes do.

module = hloopt.parse(text)      # HLO text -> typed IR (hloopt.ir)
text = module.to_text()          # IR -> XLA's canonical text
hloopt.execute(module, inputs)   # run on the CPU through XLA
hloopt.compare(a, b)             # run two modules on the same inputs, compare
"""

from typing import TYPE_CHECKING, Any

from hloopt.errors import HloError, HloParseError
from hloopt.ir import Module
from hloopt.text.parser import parse

if TYPE_CHECKING:  # loaded on first use by __getattr__ below
    from hloopt.xla.execution import compare, execute

__version__ = "0.1.0"

__all__ = ["HloError", "HloParseError", "Module", "__version__", "compare", "execute", "parse"]


def __getattr__(name: str) -> Any:
    """`execute` and `compare` load XLA's bridge only when first used."""
    if name in ("execute", "compare"):
        from hloopt.xla import execution

        return getattr(execution, name)
    raise AttributeError(f"module 'hloopt' has no attribute {name!r}")
