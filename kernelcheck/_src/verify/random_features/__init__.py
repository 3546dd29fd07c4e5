"""Random-feature attention over redraws: the ratio's bias and its convergence (C15, C16).

``ratio_bias`` (the bias of a ratio of unbiased estimates, fitted in 1/m),
``attention`` (a random-feature attention layer against exact attention),
``attention_stats`` (its asymptotic bias and the tests behind the verdict).
"""
