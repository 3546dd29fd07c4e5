"""``verify.unbiased``: is a random-feature estimator unbiased, and how noisy (C13, C16-C18)?

``api`` (the public call and its pytest twin), ``trials`` (the Monte Carlo
trials), ``stats`` (the tests and their power), ``results`` (the result
objects), ``writer`` (the report folder), ``command`` (what the
``kernelcheck unbiased`` command runs).
"""
