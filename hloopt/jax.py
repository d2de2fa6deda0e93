"""jax functions through hloopt: ``hloopt.jax.module(fn, x)`` and ``hloopt.jax.jit(fn, passes="all")``.

A thin public name for `hloopt.xla.jax_functions`, where jax is imported (only `hloopt.xla` may).
"""

from __future__ import annotations

from hloopt.xla.jax_functions import Jitted, hlo_text, jit, module

__all__ = ["Jitted", "hlo_text", "jit", "module"]
