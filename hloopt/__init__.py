"""hloopt: rewrite XLA HLO text the way the Neuron compiler's dtype passes do.

    module = hloopt.parse(text)      # HLO text -> typed IR (hloopt.ir)
    text = module.to_text()          # IR -> XLA's canonical text
"""
from hloopt.errors import HloError, HloParseError
from hloopt.ir import Module
from hloopt.parser import parse

__version__ = "0.1.0"

__all__ = ["HloError", "HloParseError", "Module", "parse", "__version__"]
