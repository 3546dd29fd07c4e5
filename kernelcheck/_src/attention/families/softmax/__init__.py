"""Exact softmax attention (claims C1, C2): forms, bound, cost, VJP, reference specification."""
