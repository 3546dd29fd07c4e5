"""The delta rule, DeltaNet (claim C22): forms, bound, cost, gradient, reference specification."""
