"""Hypothesis strategies: point sets, kernels as random expression trees, feature maps.

Importing this module registers kernelcheck's Hypothesis profiles
(``kernelcheck-ci``, ``kernelcheck-dev``, ``kernelcheck-thorough``; see
:func:`register_profiles`), so a test module or ``conftest.py`` can load one
with ``hypothesis.settings.load_profile``.

Examples
--------
>>> from hypothesis import given
>>> from kernelcheck.strategies import kernels, point_sets
>>> @given(kernels(max_depth=3), point_sets(dim=2))
... def test_gram_is_symmetric(k, X):
...     G = k(X)
...     assert (G == G.T).all() or abs(G - G.T).max() <= 1e-12 * abs(G).max()
"""

from kernelcheck._src.testing.attention_strategies import AttentionInputs, attention_inputs
from kernelcheck._src.testing.profiles import PROFILES, register_profiles
from kernelcheck._src.testing.strategies import feature_maps, kernels, point_set_pairs, point_sets

__all__ = [
    "point_sets",
    "point_set_pairs",
    "kernels",
    "feature_maps",
    "attention_inputs",
    "AttentionInputs",
    "register_profiles",
    "PROFILES",
]

register_profiles()
