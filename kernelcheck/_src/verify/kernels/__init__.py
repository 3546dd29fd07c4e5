"""``verify.kernel`` and ``verify.feature_map``: is this a kernel, does this map reproduce it?

``kernel`` (PSD evidence on point sets and counterexample search, C5, C6),
``precision`` (the ladder of precisions that tells rounding from a real
violation), ``domain`` (where points are drawn), ``feature_map`` (a feature
map against its kernel, C4, C7-C9, C12).
"""
