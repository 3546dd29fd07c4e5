"""Kimi Delta Attention (claims C22, C23): forms, bound, cost, gradient, reference specification."""
