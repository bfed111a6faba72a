"""controlrl: the shared layer (rollouts, buffers, returns, nets, normalisers, logs)."""
