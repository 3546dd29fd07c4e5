"""Exact kernelized attention (claim C10): form, bound, cost, reference specification."""
