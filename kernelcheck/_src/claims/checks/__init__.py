"""The claim checks, one module per group of the essay; each exposes ``CHECKS``."""
