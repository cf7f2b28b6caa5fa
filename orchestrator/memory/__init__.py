"""Memory budget: per-GPU weights, KV cache and overheads, with and without speculation.

Pure functions only (no I/O beyond reading the packaged GPU catalog); see `budget.estimate_memory`.
"""
