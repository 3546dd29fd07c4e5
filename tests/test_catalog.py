"""The catalogues of tests/catalog.py say true things about their entries, and cover the library.

A flag that is wrong would silently take an entry out of the invariants that
filter on it (or put it under one that cannot hold), so every flag is checked
here against the library: ``finite`` against ``has_finite_features`` and
``features()``, ``builtin`` against the existence of an error model, ``mp``
against ``supports_mp``, ``distance`` against the Gram's values (in [0, 1],
the identity for two points far apart), and
``positive`` / ``paired`` of the random maps against their features.
``psd`` is checked by the counterexample search over the catalogue
(``tests/verify/test_kernel.py``: no PSD entry is flagged, every other one
is).  Coverage: every public node class of ``kernelcheck.kernels`` and every
random feature class of ``kernelcheck.features.ESTIMATORS`` has an entry.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import kernels as K
from kernelcheck.errors import InfiniteFeatureSpace, InvalidArgument
from kernelcheck.features import ESTIMATORS, EXACT_MAP_FORMS
from tests import catalog
from tests.conftest import CATALOGUE_ARGUMENTS, KNOWN_LIBRARY_BUGS

X = np.random.default_rng(5).normal(size=(6, 3)) * 0.5
ENTRIES = catalog.kernels()


def _nodes(k):
    """The node classes of a kernel tree."""
    yield type(k)
    for attr in ("left", "right", "kernel"):
        child = getattr(k, attr, None)
        if isinstance(child, K.Kernel):
            yield from _nodes(child)


def test_ids_are_unique_and_kernels_distinct():
    ids = [e.id for e in ENTRIES]
    assert len(ids) == len(set(ids))
    kernels = [e.kernel for e in ENTRIES]
    assert all(a != b for i, a in enumerate(kernels) for b in kernels[i + 1 :])
    map_ids = [e.id for e in catalog.feature_maps()]
    assert len(map_ids) == len(set(map_ids))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_kernel_flags_agree_with_the_library(entry):
    k = entry.kernel
    assert k.has_finite_features is entry.finite
    if entry.finite:
        assert k.features().kernel == k
    else:
        with pytest.raises(InfiniteFeatureSpace):
            k.features()
    assert k.supports_mp is entry.mp
    assert isinstance(k, K.FunctionKernel) is not entry.builtin
    if entry.builtin:
        assert np.all(k.error_bound(X) >= 0)
    else:
        with pytest.raises(InvalidArgument, match="no rounding-error model"):
            k.error_bound(X)
    G = k(X)
    in_unit_interval = bool(np.all((G >= 0) & (G <= 1)))
    far_apart = np.array([[1e10], [-1e10]])
    assert (in_unit_interval and np.array_equal(k(far_apart), np.eye(2))) is entry.distance


def test_every_public_kernel_node_has_an_example():
    public = {
        obj
        for name in K.__all__
        if inspect.isclass(obj := getattr(K, name)) and issubclass(obj, K.Kernel)
    }
    public.discard(K.Kernel)  # the abstract base
    seen = {cls for e in ENTRIES for cls in _nodes(e.kernel)}
    assert public - seen == set()


def test_feature_maps_are_every_exact_map_and_every_random_class():
    exact = [e.value for e in catalog.feature_maps(catalog.is_exact_map)]
    assert exact == [(e.kernel, form) for e in ENTRIES if e.finite for form in EXACT_MAP_FORMS]
    random = [e.value for e in catalog.feature_maps(catalog.is_random_map)]
    assert random == list(ESTIMATORS.values())


@pytest.mark.parametrize(
    "entry",
    catalog.feature_maps(catalog.is_random_map),
    ids=[e.id for e in catalog.feature_maps(catalog.is_random_map)],
)
def test_random_map_flags_agree_with_the_maps(entry):
    phi = entry.cls(3, 5, seed=0)
    F = phi(X)
    assert F.shape == (6, 10 if entry.paired else 5) == (6, phi.output_dim(3))
    assert bool(np.all(F > 0)) is entry.positive
    assert hasattr(phi, "log_features") is entry.positive
    assert entry.mse_source


def test_every_catalogue_argument_has_entries():
    """An argument whose view is empty would make its tests vanish, not fail."""
    for name, params in CATALOGUE_ARGUMENTS.items():
        assert params, name


def test_known_library_bugs_name_existing_tests_and_entries():
    """A stale KNOWN_LIBRARY_BUGS line (renamed test or entry) would mark nothing."""
    ids = {p.id for params in CATALOGUE_ARGUMENTS.values() for p in params}
    assert {e.id for e in catalog.kernels()} | {e.id for e in catalog.feature_maps()} <= ids
    root = Path(__file__).resolve().parents[1]
    for nodeid, entry in KNOWN_LIBRARY_BUGS:
        path, name = nodeid.split("::")
        assert f"def {name}(" in (root / path).read_text(), nodeid
        assert entry in ids, entry
