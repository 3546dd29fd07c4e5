"""Gated DeltaNet (claims C22, C23): forms, bound, cost, gradient, reference specification."""
