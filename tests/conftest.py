"""The catalogues of example kernels and feature maps, as test arguments.

A test under ``tests/`` that declares one of the arguments below runs once per
matching entry of ``tests/catalog.py`` (or of the attention registry,
``attention_family`` and ``attention_form``), with the entry's id as test id::

    def test_gram_is_symmetric(builtin_kernel): ...   # every built-in example kernel
    def test_map_reproduces(exact_feature_map):       # (kernel, form) of every exact map
        k, form = exact_feature_map

The arguments are filled in by :func:`pytest_generate_tests` (a direct
parametrization, not a fixture), so they work with ``@given`` too.  A new
example goes into ``tests/catalog.py``; a new view of the catalogue is one
line here.
"""

from __future__ import annotations

import pytest

from kernelcheck._src.attention.registry import FAMILIES
from tests import catalog

#: Argument name -> the catalogue entries it runs over.
CATALOGUE_ARGUMENTS = {
    # kernels (the value is the kernel)
    "example_kernel": catalog.kernel_params(),
    "builtin_kernel": catalog.kernel_params(catalog.has_error_model),
    "finite_kernel": catalog.kernel_params(catalog.has_finite_features),
    "infinite_kernel": catalog.kernel_params(catalog.has_infinite_features),
    "psd_kernel": catalog.kernel_params(catalog.is_psd),
    "non_kernel": catalog.kernel_params(catalog.is_not_a_kernel),
    "distance_kernel": catalog.kernel_params(catalog.is_distance_kernel),
    # feature maps (the value is (kernel, form) for an exact map, the class for a random one)
    "exact_feature_map": catalog.feature_map_params(catalog.is_exact_map),
    "random_feature_map": catalog.feature_map_params(catalog.is_random_map),
    "positive_random_feature_map": catalog.feature_map_params(catalog.is_positive_random_map),
    # the attention registry (the value is the Family; for forms (Family, Form))
    "attention_family": [pytest.param(fam, id=fam.name) for fam in FAMILIES],
    "attention_form": [pytest.param((fam, f), id=f.name) for fam in FAMILIES for f in fam.forms],
    "attention_state_form": [
        pytest.param((fam, f), id=f.name)
        for fam in FAMILIES
        for f in fam.forms
        if {"initial_state", "return_state"} <= set(f.options)
    ],
}


#: (test node id, catalogue id) -> why the case fails.  Cases the catalogue found that
#: fail because of a library bug, not because the invariant does not apply: they still
#: run, as ``xfail`` (not strict: the failing inputs are drawn by Hypothesis), and show up
#: as XPASS in the summary once the bug is fixed -- then delete the line.  (A bug that can
#: hit any entry is recognised inside its test instead.)
KNOWN_LIBRARY_BUGS: dict[tuple[str, str], str] = {}


def pytest_generate_tests(metafunc):
    for name, params in CATALOGUE_ARGUMENTS.items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, [_mark_known_bugs(metafunc, p) for p in params])


def _mark_known_bugs(metafunc, param):
    reason = KNOWN_LIBRARY_BUGS.get((metafunc.definition.nodeid, param.id))
    if reason is None:
        return param
    return pytest.param(*param.values, id=param.id, marks=pytest.mark.xfail(reason=reason))
