"""Facts derived from the IR: shape inference and the verifier that runs after each pass."""
