"""XLA itself, through jaxlib: canonical print, compile, execute, crash-isolating workers, round trips (the only users of jax)."""
