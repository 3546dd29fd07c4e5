"""Gated linear attention (claim C20): forms, bound, cost, reference specification."""
