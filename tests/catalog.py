"""The example kernels and feature maps every invariant of the test suite runs on.

One list of kernels (:data:`KERNELS`) and one of feature maps
(:data:`FEATURE_MAPS`), in the manner of scikit-learn's
``gaussian_process/tests/test_kernels.py``: an invariant is written once and
parametrized over the catalogue, so a new example is checked by every
invariant that applies to it by being added here, in one line.

Each entry states what the tests may expect of it (finite features, PSD,
built from kernelcheck's own nodes, ...), and ``tests/test_catalog.py``
checks those statements against the library, so a wrong flag fails instead of
silently dropping the entry from an invariant.  An invariant that only holds
for some entries selects them with one of the named predicates below, never
by leaving an entry out of a list.

The tests under ``tests/`` receive the entries through the arguments
declared in ``tests/conftest.py`` (``example_kernel``, ``finite_kernel``,
``exact_feature_map``, ...); ``properties/`` imports the lists from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mpmath
import numpy as np
import pytest

from kernelcheck.features import (
    EXACT_MAP_FORMS,
    HyperbolicRandomFeatures,
    OptimalPositiveRandomFeatures,
    PositiveRandomFeatures,
    TrigonometricRandomFeatures,
)
from kernelcheck.kernels import (
    Constant,
    Exponential,
    Gaussian,
    Kernel,
    Laplacian,
    Linear,
    Polynomial,
    exp,
    kernel_from_function,
)

# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelExample:
    """An example kernel and what the invariants may expect of it.

    finite:
        it has an exact, finite feature map: ``kernel.features()`` works
        (claims C4, C7, C8, C9, C12).
    psd:
        positive semi-definite on every point set (Theorem 1, claim C5).
    builtin:
        built from kernelcheck's own nodes only, so it has a rounding-error
        model (``error_bound``) and ``repr`` is a formula that rebuilds it;
        False for ``kernel_from_function`` kernels.
    mp:
        ``gram_mp`` evaluates it in mpmath (always for built-in nodes).
    distance:
        a function of the distance that decays from 1: ``exp(-r^p / ...)``, with
        values in [0, 1] and exactly 0 for points far apart.
    name:
        the test id; ``repr(kernel)`` when not given.
    """

    kernel: Kernel
    finite: bool
    psd: bool = True
    builtin: bool = True
    mp: bool = True
    distance: bool = False
    name: str | None = None

    @property
    def id(self) -> str:
        return self.name or repr(self.kernel)


# User-function kernels are defined at module level so that they pickle.
def _sqdist_mp(x, y):
    return mpmath.fsum((a - b) ** 2 for a, b in zip(x, y, strict=True))


def _tanh(X, Y):
    return np.tanh((X * Y).sum(-1) - 1.0)


def _tanh_mp(x, y):
    return mpmath.tanh(mpmath.fdot(x, y) - 1)


def _negdist(X, Y):
    return -np.sqrt(((X - Y) ** 2).sum(-1))


def _negdist_mp(x, y):
    return -mpmath.sqrt(_sqdist_mp(x, y))


def _cos(X, Y):
    return np.cos((X * Y).sum(-1))


def _cos_mp(x, y):
    return mpmath.cos(mpmath.fdot(x, y))


def _exp4(X, Y):
    return np.exp(-(((X - Y) ** 2).sum(-1) ** 2))


def _exp4_mp(x, y):
    return mpmath.exp(-(_sqdist_mp(x, y) ** 2))


def _rbf(X, Y):
    return np.exp(-((X - Y) ** 2).sum(-1) / 2)


def _non_kernel(id: str, name: str, f, mp_f, distance: bool = False) -> KernelExample:
    """A user function that is not a kernel (its Grams can have negative eigenvalues)."""
    k = kernel_from_function(f, vectorized=True, mp_function=mp_f, name=name)
    return KernelExample(k, finite=False, psd=False, builtin=False, distance=distance, name=id)


#: Every example kernel.  One line per kernel; the flags say what to expect.
KERNELS = [
    # dot-product kernels with finite features
    KernelExample(Linear(), finite=True),
    KernelExample(Constant(0.5), finite=True),
    KernelExample(Constant(4.0), finite=True),
    KernelExample(Polynomial(2), finite=True),
    KernelExample(Polynomial(3), finite=True),
    KernelExample(Polynomial(3, c=1.0), finite=True),
    KernelExample(Polynomial(2, c=2.0), finite=True),
    KernelExample(Linear() + Constant(1.0), finite=True),
    KernelExample(3.0 * Linear(), finite=True),
    KernelExample(Linear() * Polynomial(2), finite=True),
    KernelExample((Linear() + 1.0) ** 3, finite=True),
    KernelExample((Linear() + Constant(0.5)) ** 2, finite=True),
    KernelExample((Linear() + 1) ** 2 * Linear(), finite=True),
    KernelExample(Linear() ** 0, finite=True),
    KernelExample((Linear() ** 2) ** 2, finite=True),
    KernelExample(exp(Linear(), order=0), finite=True),
    KernelExample(exp(Linear(), order=3), finite=True),
    KernelExample(exp(0.5 * Linear(), order=3), finite=True),
    KernelExample(exp(0.5 * Linear() + 1.0, order=2), finite=True),
    KernelExample(exp(Polynomial(2), order=2), finite=True),
    KernelExample(exp(0.5 * Linear(), order=2) + 0.5 * Polynomial(2), finite=True),
    KernelExample(exp(0.2 * Linear() + 1.0, order=5) * Constant(2.0), finite=True),
    # kernels with infinite feature spaces
    KernelExample(Exponential(), finite=False),
    KernelExample(Exponential(0.5), finite=False),
    KernelExample(exp(Linear()), finite=False),
    KernelExample(Gaussian(), finite=False, distance=True),
    KernelExample(Gaussian(0.7), finite=False, distance=True),
    KernelExample(Gaussian(1.5), finite=False, distance=True),
    KernelExample(Laplacian(), finite=False, distance=True),
    KernelExample(Laplacian(1.3), finite=False, distance=True),
    KernelExample(Laplacian(2.0), finite=False, distance=True),
    KernelExample(2.0 * Gaussian(), finite=False),
    KernelExample(exp(Gaussian()), finite=False),
    KernelExample(Gaussian(1.0) * Linear() + 0.5 * Polynomial(2), finite=False),
    KernelExample(0.5 * Gaussian(0.9) + Laplacian(1.3) * Linear(), finite=False),
    KernelExample((Polynomial(2, c=0.5) + Exponential(0.1)) ** 3, finite=False),
    # a user function that is a kernel, with no mpmath twin and no error model
    KernelExample(
        kernel_from_function(_rbf, vectorized=True, name="rbf"),
        finite=False,
        builtin=False,
        mp=False,
        distance=True,
        name="exp(-||x - y||^2 / 2)",
    ),
    # not kernels: Gram matrices with negative eigenvalues
    KernelExample(-1.0 * Linear() + exp(Gaussian()), finite=False, psd=False),
    _non_kernel("tanh(x.y - 1)", "tanh", _tanh, _tanh_mp),
    _non_kernel("-||x - y||", "negdist", _negdist, _negdist_mp),
    _non_kernel("cos(x.y)", "cos", _cos, _cos_mp),
    _non_kernel("exp(-||x - y||^4)", "exp4", _exp4, _exp4_mp, distance=True),
]


# Named predicates: the views of KERNELS the invariants run on.
def has_error_model(e: KernelExample) -> bool:
    """Built from kernelcheck's nodes: ``error_bound``, ``gram_mp`` and a formula repr."""
    return e.builtin


def has_finite_features(e: KernelExample) -> bool:
    """``kernel.features()`` gives an exact finite map."""
    return e.finite


def has_infinite_features(e: KernelExample) -> bool:
    """A kernel (PSD) with no finite feature map: features() says how to approximate one."""
    return e.psd and not e.finite


def is_psd(e: KernelExample) -> bool:
    return e.psd


def is_not_a_kernel(e: KernelExample) -> bool:
    """Not PSD, and evaluable in mpmath (so a witness can be re-checked independently)."""
    return not e.psd and e.mp


def is_distance_kernel(e: KernelExample) -> bool:
    """kernelcheck's kernels of the distance that decay from 1 to 0: Gaussian, Laplacian."""
    return e.distance and e.psd and e.builtin


def kernels(where: Callable[[KernelExample], bool] | None = None) -> list[KernelExample]:
    """The entries of :data:`KERNELS` that satisfy ``where`` (all of them by default)."""
    return [e for e in KERNELS if where is None or where(e)]


def kernel(id: str) -> Kernel:
    """The example kernel with this id (for tests about one particular example)."""
    (k,) = [e.kernel for e in KERNELS if e.id == id]
    return k


def kernel_params(where=None) -> list:
    """``pytest.param(kernel, id=...)`` for each entry of :func:`kernels`."""
    return [pytest.param(e.kernel, id=e.id) for e in kernels(where)]


# ---------------------------------------------------------------------------
# Feature maps
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureMapExample:
    """An example feature map and what the invariants may expect of it.

    An exact map is ``kernel.features(form)`` of a finite example kernel, and
    is passed to tests as the pair ``(kernel, form)`` so that the test builds
    the map itself.  A random map is a class of :mod:`kernelcheck.features`,
    drawn by each test with its own ``(dim, num_features, seed=...)``.

    positive:
        every feature is > 0 (``log_features`` exists; estimates are > 0, C13).
    paired:
        two features per projection row: ``output_dim(d) == 2 * num_features``.
    mse_source:
        where the closed-form MSE of ``theoretical_mse`` comes from.
    """

    name: str
    kernel: Kernel | None = None
    form: str | None = None
    cls: type | None = None
    positive: bool = False
    paired: bool = False
    mse_source: str = ""

    @property
    def id(self) -> str:
        return self.name

    @property
    def exact(self) -> bool:
        return self.cls is None

    @property
    def value(self):
        """What a test receives: ``(kernel, form)`` for an exact map, the class for a random one."""
        return (self.kernel, self.form) if self.exact else self.cls


def _random(cls, **flags) -> FeatureMapExample:
    return FeatureMapExample(cls.__name__, cls=cls, **flags)


#: Every example feature map: the exact maps of the finite example kernels, in
#: both forms, and the random maps of the exponential kernel.
FEATURE_MAPS = [
    FeatureMapExample(f"{form}-{e.id}", kernel=e.kernel, form=form)
    for e in KERNELS
    if e.finite
    for form in EXACT_MAP_FORMS
] + [
    _random(PositiveRandomFeatures, positive=True, mse_source="Choromanski et al. 2021, Lemma 2"),
    _random(
        TrigonometricRandomFeatures, paired=True, mse_source="Choromanski et al. 2021, Lemma 2"
    ),
    _random(
        HyperbolicRandomFeatures,
        positive=True,
        paired=True,
        mse_source="Choromanski et al. 2021, Sec. 2.4",
    ),
    _random(OptimalPositiveRandomFeatures, positive=True, mse_source="Likhosherstov et al. 2022"),
]


def is_exact_map(e: FeatureMapExample) -> bool:
    return e.exact


def is_random_map(e: FeatureMapExample) -> bool:
    return not e.exact


def is_positive_random_map(e: FeatureMapExample) -> bool:
    return not e.exact and e.positive


def has_performer_paper_mse(e: FeatureMapExample) -> bool:
    """Random maps whose MSE Choromanski et al. 2021 state (Lemma 2, Sec. 2.4)."""
    return not e.exact and e.mse_source.startswith("Choromanski et al. 2021")


def feature_maps(where=None) -> list[FeatureMapExample]:
    """The entries of :data:`FEATURE_MAPS` that satisfy ``where`` (all of them by default)."""
    return [e for e in FEATURE_MAPS if where is None or where(e)]


def feature_map_params(where=None) -> list:
    """``pytest.param(value, id=...)`` for each entry of :func:`feature_maps`."""
    return [pytest.param(e.value, id=e.id) for e in feature_maps(where)]
