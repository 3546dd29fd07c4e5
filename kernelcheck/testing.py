"""pytest assertions: each verifier's twin raises ``AssertionError`` with its report.

The message says what failed, where, by how much and against what tolerance
(and where that tolerance came from).
"""

from kernelcheck._src.verify_features import assert_feature_map

__all__ = ["assert_feature_map"]
