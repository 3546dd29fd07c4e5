"""Claims C5 (Theorem 1: kernels are PSD) and C6 (Theorem 2: PSD matrices have features).

Each property relates two computations: check_psd's verdict against the
kernel's own rounding-error model and an independent rational elimination;
Mercer features against the matrix they factor; the Nystrom map against the
Mercer rows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from kernelcheck import Linear
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.psd.tolerance import default_tolerance, frobenius
from kernelcheck.errors import NumericalFailure
from kernelcheck.psd import Verdict, check_psd, mercer_features
from kernelcheck.strategies import kernels, point_sets
from tests.psd.oracle import exact_kind


def _reference_kind(K: np.ndarray) -> str:
    """Exact rational symmetric elimination (independent of kernelcheck's exact rung)."""
    return exact_kind(K.tolist())


_KIND = {
    "pd": Verdict.POSITIVE_DEFINITE,
    "psd": Verdict.POSITIVE_SEMIDEFINITE,
    "not_psd": Verdict.NOT_PSD,
}


def _gram(k, X) -> np.ndarray:
    """The Gram, rejecting point sets where the kernel overflows float64 (not a C5 question)."""
    try:
        return k(X)
    except NumericalFailure:
        assume(False)
        raise  # pragma: no cover


def _kernel_tol(k, X, G) -> Tolerance:
    """||k.error_bound(X)||_F (bounds ||G_computed - G_exact||_2) plus the float resolution."""
    eb = frobenius(k.error_bound(X))
    base = default_tolerance(G)
    return Tolerance(eb + base.value, f"||error_bound||_F = {eb:.3g} + {base.source}")


@given(kernels(max_depth=3, finite=False), point_sets(max_points=8, max_dim=4, max_norm=1.5))
def test_c05_gram_of_every_kernel_is_psd_within_its_error_model(k, X):
    """C5: the Gram matrix of any kernel of the algebra is PSD within the kernel's rounding.

    And ``tol=0`` decides the stored matrix exactly: the verdict agrees with
    exact rational elimination, and any NOT_PSD witness is negative in exact
    arithmetic by no more than the rounding bound allows.
    """
    G = _gram(k, X)
    tol = _kernel_tol(k, X, G)
    r = check_psd(G, tol=tol)
    assert r.is_psd, (repr(k), str(r))
    exact = check_psd(G, tol=0)
    assert exact.certified and exact.verdict is _KIND[_reference_kind(G)]
    if exact.verdict is Verdict.NOT_PSD:
        assert -exact.witness_value <= tol.value


@given(point_sets(min_points=4, max_points=12, max_dim=3), st.integers(0, 3))
def test_c05_rank_deficient_linear_gram(X, extra):
    """C5: a linear-kernel Gram with n > d (singular) is PSD within tol.

    And tol=0 decides the stored (rounded) matrix exactly, agreeing with rational elimination.
    """
    X = np.vstack([X, X[: extra + 1] * 0.5])  # more points than dimensions
    G = Linear()(X)
    assert check_psd(G, tol=_kernel_tol(Linear(), X, G)).is_psd
    exact = check_psd(G, tol=0)
    assert exact.certified and exact.verdict is _KIND[_reference_kind(G)]


@given(kernels(max_depth=3, finite=False), point_sets(min_points=2, max_points=10, max_dim=4))
def test_c06_mercer_features_reproduce_the_gram(k, X):
    """C6: Phi = U Lambda^(1/2) gives Phi Phi^T = K within the stated error bound,
    and the Nystrom map evaluated at the landmarks gives the same inner products."""
    G = _gram(k, X)
    F = mercer_features(G)
    assert F.passed, str(F)
    assert np.max(np.abs(F.phi @ F.phi.T - G)) <= F.error_bound
    N = F.extend(k, X)
    P = N(X)
    assert (
        np.max(np.abs(P @ P.T - G)) <= 4 * (F.error_bound + F.residual) + np.max(np.abs(G)) * 1e-12
    )
