"""The `xla` profile (placeholder until written)."""
