"""hloopt: rewrite XLA HLO text the way the Neuron compiler's dtype passes do."""
