"""Small helpers every layer may use: atomic file writes, pausing the garbage collector."""
