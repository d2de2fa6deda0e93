"""hloopt's HLO passes: the Neuron compiler's three dtype passes and literal folding."""
