"""Mercer features and the Nystrom map (claim C6).

``Phi = U Lambda^(1/2)`` must reproduce the matrix it factors within its
stated error bound (on random Grams and on the PSD matrices of the Sylvester
corpus, while the others are refused); the Nystrom map evaluated at the
landmarks gives the Mercer rows, is exact for the linear kernel on new
points, and refuses kernels that return blocks of the wrong shape; messages
name the landmarks and describe the values.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import Gaussian, InvalidArgument, Linear
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck.errors import NumericalFailure
from kernelcheck.psd import Nystrom, Verdict, check_psd, mercer_features
from tests.psd import sylvester

U64 = 2.0**-53


@pytest.mark.parametrize("seed", range(3))
def test_mercer_features_reproduce_K(seed):
    X = np.random.default_rng(seed).standard_normal((15, 4))
    K = Gaussian(1.5)(X)
    F = mercer_features(K)
    assert F.passed and F.phi.shape == (15, F.rank)
    assert np.max(np.abs(F.phi @ F.phi.T - K)) <= F.error_bound


def test_mercer_rank_of_linear_gram_is_d():
    X = np.random.default_rng(1).standard_normal((20, 3))
    F = mercer_features(X @ X.T)
    assert F.rank == 3 and F.passed


def test_mercer_refuses_non_psd():
    with pytest.raises(InvalidArgument, match="not PSD"):
        mercer_features(np.array([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("i", range(len(sylvester.CORPUS)))
def test_mercer_features_reproduce_psd_corpus_and_refuse_the_rest(i):
    K = sylvester.CORPUS[i]
    _, psd = sylvester.pd_psd(K)
    if not psd and check_psd(K).verdict is Verdict.NOT_PSD:
        with pytest.raises(InvalidArgument, match="is not PSD within tol"):
            mercer_features(K)
        return
    F = mercer_features(K)
    assert F.passed and F.residual <= F.error_bound
    assert F.phi.shape == (K.shape[0], F.rank)
    assert np.all(np.diff(F.eigenvalues) <= 0)  # decreasing
    assert F.rank == int((F.eigenvalues > F.threshold.value).sum())
    assert np.allclose(F.gram(), K, atol=F.error_bound + F.residual)
    assert not F.phi.flags.writeable
    assert "Phi" in str(F) and str(F).startswith("verified: ")


def test_mercer_threshold_dropping_and_bound():
    from kernelcheck._src.core.rounding import gamma
    from kernelcheck._src.psd.tolerance import EIGH_P, frobenius

    K = np.diag([1.0, 0.5, 0.25])
    F = mercer_features(K, tol=0.5)
    # "eigenvalues at or below the threshold are treated as zero"
    assert F.rank == 1 and F.threshold.value == 0.5
    assert F.error_bound == 0.5 + 3.0 * gamma(EIGH_P(3)) * frobenius(K)
    assert F.threshold.source.endswith("given by the caller")
    none = mercer_features(np.diag([0.1, 0.2]), tol=0.5)
    assert none.rank == 0 and none.residual == 0.2 and none.phi.shape == (2, 0)
    phi = Nystrom(lambda A, B=None: 0.1 * (A @ (A if B is None else B).T), np.eye(2), tol=0.5)
    assert phi.rank == 0 and phi.projection.shape == (2, 0)
    assert phi(np.ones((3, 2))).shape == (3, 0) and not phi.projection.flags.writeable


def test_mercer_features_str_and_failed_verdict():
    from kernelcheck._src.psd.mercer import MercerFeatures

    F = mercer_features(np.diag([4.0, 1.0, 0.0]))
    assert str(F).startswith("verified: Phi (3 x 2) reproduces K with max residual ")
    assert " <= bound " in str(F)
    failed = MercerFeatures(F.phi, F.rank, F.eigenvalues, Tolerance(0.0, "t"), 1.0, 0.5, False)
    assert str(failed) == "refuted: Phi (3 x 2) reproduces K with max residual 1 > bound 0.5"


def test_mercer_features_refuse_an_overflowing_error_bound():
    """C6: eigenvalues that fit in float64 but ``||K||_F`` (hence the error bound)
    that does not: ``NumericalFailure``, not a verdict with an infinite bound."""
    with pytest.raises(NumericalFailure, match="scale K by a power of two"):
        mercer_features(np.diag([1.5e308, 1.5e308]))


# ---------------------------------------------------------------------------
# Nystrom and MercerFeatures.extend
# ---------------------------------------------------------------------------


def test_nystrom_reproduces_landmarks_and_linear_kernel():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((10, 3))
    Y = rng.standard_normal((4, 3))
    phi = Nystrom(Linear(), X)
    F = mercer_features(Linear()(X))
    # at the landmarks: the Mercer rows, up to the sign of each eigenvector
    assert np.allclose(np.abs(phi(X)), np.abs(F.phi), atol=1e-12)
    # the linear kernel lies in the span: exact on new points (error model: ~ n u |Y||X|)
    assert np.max(np.abs(phi.approximate_kernel(Y, X) - Y @ X.T)) < 1e-12
    ext = F.extend(Linear(), X)
    assert np.allclose(ext(Y) @ ext(X).T, Y @ X.T, atol=1e-12)


def test_nystrom_gaussian_matches_gram_at_landmarks():
    X = np.random.default_rng(4).standard_normal((12, 2))
    G = Gaussian(1.0)
    phi = Nystrom(G, X)
    F = phi.features
    assert np.max(np.abs(phi(X) @ phi(X).T - G(X))) <= F.error_bound + F.residual


def test_extend_refuses_other_landmarks():
    X = np.random.default_rng(5).standard_normal((6, 2))
    F = mercer_features(Gaussian(1.0)(X))
    with pytest.raises(InvalidArgument, match="landmarks"):
        F.extend(Gaussian(1.0), 2.0 * X)  # (a shift would not do: Gaussian is shift-invariant)


def test_nystrom_of_a_rank_zero_kernel_and_default_second_argument():
    """C6: the zero kernel on 3 landmarks in R^2 has rank 0: features of width 0 for
    any points; ``approximate_kernel(Y)`` is ``approximate_kernel(Y, Y)``."""
    X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])

    def zero(A, B=None):
        return np.zeros((A.shape[0], A.shape[0] if B is None else B.shape[0]))

    phi = Nystrom(zero, X)
    Y = np.array([[3.0, -1.0], [0.5, 0.5], [1.0, 2.0], [0.0, 1.0]])
    assert phi.rank == 0 and phi(Y).shape == (4, 0)
    lin = Nystrom(Linear(), X)
    assert np.array_equal(lin.approximate_kernel(Y), lin.approximate_kernel(Y, Y))
    assert np.allclose(lin.approximate_kernel(Y), Y @ Y.T)


def test_nystrom_shape_messages_name_the_expected_and_the_returned_shape():
    """C6: a kernel returning a block of the wrong shape is refused with a message that
    states the shape expected (``(m, n)`` for ``m`` new points and ``n`` landmarks,
    ``(n, n)`` at construction) and describes the shape returned."""
    X = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [2.0, 1.0]])  # n = 4 landmarks, d = 2
    Y = np.array([[3.0, -1.0], [0.5, 0.5], [1.0, 2.0]])  # m = 3

    def wrong_cross(A, B=None):
        if B is None:
            return A @ A.T
        return np.ones((A.shape[0], B.shape[0] + 1))

    with pytest.raises(InvalidArgument) as info:
        Nystrom(wrong_cross, X)(Y)
    msg = str(info.value)
    assert "must have shape (3, 4)" in msg and "(3, 5)" in msg.split("got", 1)[1]

    def wrong_gram(A, B=None):
        return np.ones((A.shape[0], A.shape[0] + 1))

    with pytest.raises(InvalidArgument) as info:
        Nystrom(wrong_gram, X)
    msg = str(info.value)
    assert "(4, 4)" in msg and "(4, 5)" in msg.split("got", 1)[1]


def test_extend_accepts_the_landmarks_the_features_came_from_after_truncation():
    """C6: with ``tol = 0.5`` the eigenvalue 0.3 of ``diag(1, 0.3)`` is dropped, so
    ``Phi Phi^T`` differs from ``K`` by 0.3 (within the bound); ``extend`` on the same
    landmarks must still accept them (their Gram matrix is the decomposed ``K``)."""
    X = np.array([[1.0, 0.0], [0.0, 0.3**0.5]])
    F = mercer_features(Linear()(X), tol=0.5)
    assert F.rank == 1 and F.residual > F.error_bound / 2
    phi = F.extend(Linear(), X)
    assert phi.rank == 1 and np.allclose(phi(X), F.phi)


def test_nystrom_repr_names_kernel_landmarks_and_rank():
    X = np.random.default_rng(0).standard_normal((7, 3))
    ny = Nystrom(Gaussian(1.5), X)
    text = repr(ny)
    assert text.startswith(f"Nystrom({Gaussian(1.5)!r}, ")
    assert f"7 landmarks in R^3, rank {ny.rank})" in text
    assert 1 <= ny.rank <= 7


def test_extend_messages_name_landmarks_and_describe_values():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    F = mercer_features(X @ X.T)
    with pytest.raises(InvalidArgument, match=r"^`landmarks` must be a 2-d array"):
        F.extend(lambda A: A @ A.T, np.ones(3))
    with pytest.raises(InvalidArgument) as info:
        F.extend(lambda A: A @ A.T, X[:2])
    assert str(info.value).endswith("got array of shape (2, 2) and dtype float64")
    with pytest.raises(InvalidArgument) as info:
        F.extend(lambda A: np.ones((2, 2)), X)
    assert str(info.value).endswith("got array of shape (2, 2) and dtype float64")
    phi = F.extend(lambda A, B=None: A @ (A if B is None else B).T, X)
    assert np.allclose(phi(X) @ phi(X).T, X @ X.T)


def test_mercer_features_of_the_symmetric_part_when_asked():
    """``symmetrize=True`` reaches the input check of ``mercer_features`` too: an input
    asymmetric beyond rounding gives features of ``(K + K^T) / 2``, refused without it."""
    from kernelcheck.errors import InvalidArgument
    from kernelcheck.psd import mercer_features

    K = np.array([[2.0, 1.0], [0.0, 2.0]])
    with pytest.raises(InvalidArgument, match="symmetri"):
        mercer_features(K)
    Phi = mercer_features(K, symmetrize=True).phi
    S = np.array([[2.0, 0.5], [0.5, 2.0]])
    # the eigensolver's documented backward error p(n) u ||S||_F, p(n) = 64 (n + 2)
    assert np.max(np.abs(Phi @ Phi.T - S)) <= 64 * (2 + 2) * U64 * float(np.linalg.norm(S))
