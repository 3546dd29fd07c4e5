"""More unit tests of check_psd / mercer_features (claims C5, C6), chosen by mutation testing.

The reference is independent of the ladder: for n <= 4, Sylvester's
criterion on *all* principal minors (computed as exact fractions by cofactor
expansion) decides PSD, and the leading principal minors decide PD.  Every
rung and every tolerance is compared with it, and every witness is re-checked
here with its own exact Rayleigh quotient.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.psd.exact import exact_decision, quadratic_form, to_int_matrix, vector_to_ints
from kernelcheck._src.psd.ladder import MPMATH_PRECISIONS, default_tolerance
from kernelcheck.errors import InvalidArgument
from kernelcheck.psd import Nystrom, Verdict, check_psd, mercer_features
from kernelcheck.testing import assert_psd

RUNGS = {"diagonal", "cholesky", "minor", "eigh", "cholesky+tol", "mpmath", "exact"}


def _det(M):
    n = len(M)
    if n == 0:
        return Fraction(1)
    if n == 1:
        return M[0][0]
    return sum(
        (-1) ** j * M[0][j] * _det([row[:j] + row[j + 1 :] for row in M[1:]]) for j in range(n)
    )


def _exact(K, shift=Fraction(0)):
    n = K.shape[0]
    M = [[Fraction(float(K[i, j])) + (shift if i == j else 0) for j in range(n)] for i in range(n)]
    psd = all(
        _det([[M[i][j] for j in S] for i in S]) >= 0
        for r in range(1, n + 1)
        for S in itertools.combinations(range(n), r)
    )
    pd = all(_det([row[:r] for row in M[:r]]) > 0 for r in range(1, n + 1))
    return pd, psd


def _rayleigh(K, v):
    vv = [Fraction(x) if not isinstance(x, (int, np.integer)) else Fraction(int(x)) for x in v]
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        vv = [Fraction(float(x)) for x in v]
    n = len(vv)
    q = sum(vv[i] * Fraction(float(K[i, j])) * vv[j] for i in range(n) for j in range(n))
    return q / sum(x * x for x in vv)


def _corpus():
    rng = np.random.default_rng(0)
    out = [
        np.array([[2.0, 1.0], [1.0, 2.0]]),  # PD
        np.array([[1.0, 2.0], [2.0, 1.0]]),  # indefinite
        np.array([[1.0, 1.0], [1.0, 1.0]]),  # singular PSD
        np.array([[0.0, 1.0], [1.0, 0.0]]),  # zero diagonal, non-zero row
        np.array([[-1.0, 0.0], [0.0, 3.0]]),  # negative diagonal
        np.array([[0.0, 0.0], [0.0, 0.0]]),  # zero matrix
        np.array([[4.0, 2.0, 2.0], [2.0, 1.0, 1.0], [2.0, 1.0, 1.0]]),  # rank 1
        np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]]),  # zero row
        np.array([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]),  # PD tridiagonal
        np.array([[1.0, 0.9, 0.0], [0.9, 1.0, 0.9], [0.0, 0.9, 1.0]]),  # indefinite, PD minors
        np.array([[5.0]]),
        np.array([[-2.0]]),
        np.array([[0.0]]),
        np.array([[1e-300, 0.0], [0.0, 1e300]]),  # badly scaled PD
        np.array([[1.0, 1 + 2.0**-40], [1 + 2.0**-40, 1.0]]),  # barely indefinite
    ]
    for _ in range(6):
        B = rng.integers(-3, 4, size=(4, 2)).astype(float)
        out.append(B @ B.T)  # rank <= 2 PSD
        A = rng.integers(-3, 4, size=(4, 4)).astype(float) / 4
        out.append(A + A.T)  # mostly indefinite
        C = rng.normal(size=(3, 3))
        out.append(C @ C.T + 0.01 * np.eye(3))  # PD
    return out


CORPUS = _corpus()


def _check_result(K, r, tol_value):
    pd, psd = _exact(K)
    _, psd_t = _exact(K, Fraction(tol_value))
    assert r.n == K.shape[0]
    assert set(r.rungs) <= RUNGS and r.reason
    assert r.is_psd == (r.verdict in (Verdict.POSITIVE_DEFINITE, Verdict.POSITIVE_SEMIDEFINITE))
    assert bool(r) == r.is_psd == r.passed
    if r.verdict is Verdict.POSITIVE_DEFINITE:
        assert r.certified and pd
        low, _ = r.eigenvalue_interval()
        assert low >= 0.0 or np.isnan(r.min_eigenvalue)
    elif r.verdict is Verdict.NOT_PSD:
        assert r.certified and not psd_t
        q = _rayleigh(K, r.witness)
        assert q < -Fraction(tol_value)
        assert r.witness_value == float(q)
        assert r.witness_value_exact == f"{q.numerator}/{q.denominator}"
        assert r.eigenvalue_interval()[1] <= r.witness_value or np.isnan(r.min_eigenvalue)
    elif r.verdict is Verdict.POSITIVE_SEMIDEFINITE:
        if r.certified:
            assert psd_t
    else:
        assert not r.certified and not r.is_psd
    if r.verdict is not Verdict.NOT_PSD:
        assert r.witness is None and r.witness_value is None


@pytest.mark.parametrize("i", range(len(CORPUS)))
@pytest.mark.parametrize("tol", [0.0, None, 0.25])
@pytest.mark.parametrize("method", ["auto", "cholesky", "eigh", "mpmath", "exact"])
def test_every_rung_agrees_with_sylvester(i, tol, method):
    K = CORPUS[i]
    r = check_psd(K, tol=tol, method=method)
    t = default_tolerance(K).value if tol is None else tol
    assert r.tol.value == t
    _check_result(K, r, t)
    if method != "auto" and r.verdict is not Verdict.INCONCLUSIVE:
        assert r.method in (method, "diagonal") or (method == "cholesky" and r.method == "cholesky")
    if method == "exact" and K.shape[0] <= 64:
        assert r.verdict is not Verdict.INCONCLUSIVE and r.certified  # exact always decides
    if method == "auto" and tol == 0.0:
        # the exact question is always decided for small n, with a certificate
        assert r.certified and r.verdict is not Verdict.INCONCLUSIVE
        pd, psd = _exact(K)
        assert r.is_psd == psd and (r.verdict is Verdict.POSITIVE_DEFINITE) == pd


def test_ladder_order_decides_cheap_cases_first():
    r = check_psd(np.array([[-1.0, 0.0], [0.0, 3.0]]), tol=0)
    assert (r.method, r.rungs) == ("diagonal", ("diagonal",))
    assert list(np.asarray(r.witness, dtype=float)) in ([1.0, 0.0], [-1.0, 0.0])
    z = check_psd(np.array([[0.0, 1.0], [1.0, 0.0]]), tol=0)
    assert (z.method, z.rungs) == ("diagonal", ("diagonal",))
    # the zero-diagonal witness is only tried for the exact question
    z2 = check_psd(np.array([[0.0, 1.0], [1.0, 0.0]]), tol=1e-3)
    assert z2.method != "diagonal" and z2.verdict is Verdict.NOT_PSD
    pd = check_psd(np.eye(3))
    assert (pd.method, pd.rungs) == ("cholesky", ("diagonal", "cholesky"))
    # PSD but singular with a positive tolerance: certified by Cholesky of K + tol I
    s = check_psd(np.array([[1.0, 1.0], [1.0, 1.0]]), tol=0.25)
    assert s.verdict is Verdict.POSITIVE_SEMIDEFINITE and s.certified and s.method == "cholesky"
    assert s.rungs[-1] == "cholesky+tol" and "eigh" in s.rungs


def test_symmetrize_uses_the_mean_and_records_the_asymmetry():
    K = np.array([[2.0, 3.0], [1.0, 2.0]])
    r = check_psd(K, symmetrize=True)
    ref = check_psd((K + K.T) / 2)
    assert r.symmetrized and r.asymmetry == 2.0
    assert (r.verdict, r.min_eigenvalue) == (ref.verdict, ref.min_eigenvalue)
    plain = check_psd(np.eye(2), symmetrize=True)
    assert not plain.symmetrized and plain.asymmetry == 0.0
    with pytest.raises(InvalidArgument) as info:
        check_psd(K)
    assert (
        "max |K - K^T| = 2 at index (0, 1) (0.667 relative to max |K| = 3); pass symmetrize=True "
        "to test (K + K^T) / 2 instead (the result records it)"
    ) in str(info.value)


@pytest.mark.parametrize(
    "kwargs, start",
    [
        ({"K": np.ones((2, 3))}, "`K` must be a square 2-d matrix"),
        ({"K": np.eye(2), "method": "lu"}, "`method` must be one of 'auto', 'cholesky'"),
        ({"K": np.eye(2), "max_exact_n": -1}, "`max_exact_n` must be >= 0, got -1"),
        (
            {"K": np.eye(2), "symmetrize": "yes"},
            "`symmetrize` must be True or False, got str 'yes'",
        ),
        ({"K": np.eye(2), "tol": -1.0}, "`tol` must be >= 0, got -1.0"),
    ],
)
def test_argument_messages(kwargs, start):
    kwargs = dict(kwargs)  # the parameter dict is shared between runs: do not mutate it
    K = kwargs.pop("K")
    with pytest.raises(InvalidArgument) as info:
        check_psd(K, **kwargs)
    assert str(info.value).startswith(start)


def test_tolerance_objects_are_validated_and_kept():
    from kernelcheck._src.core.rounding import Tolerance

    t = Tolerance(0.5, "from my error model")
    r = check_psd(np.eye(2), tol=t)
    assert r.tol is t
    with pytest.raises(InvalidArgument, match="^`tol` must be >= 0"):
        check_psd(np.eye(2), tol=Tolerance(-1.0, "bad"))
    assert check_psd(np.eye(2), tol=0).tol.source != check_psd(np.eye(2), tol=0.5).tol.source


def test_max_exact_n_zero_and_limits_reported():
    K = np.array([[1.0, 1.0], [1.0, 1.0]])
    r = check_psd(K, tol=0, max_exact_n=0, method="exact")
    assert r.verdict is Verdict.INCONCLUSIVE and "max_exact_n = 0" in r.reason
    auto = check_psd(K, tol=0, max_exact_n=0)
    assert auto.verdict is not Verdict.NOT_PSD  # mpmath decides or leaves it open, never refutes


def test_float32_input_is_judged_at_float32_resolution():
    K = np.array([[1.0, 0.5], [0.5, 1.0]], dtype=np.float32)
    r = check_psd(K)
    assert r.tol.value == default_tolerance(K.astype(np.float64), dtype=np.float32).value
    assert r.tol.value > default_tolerance(K.astype(np.float64)).value


def test_assert_psd_passes_psd_and_reports_witness_or_inconclusive():
    assert assert_psd(np.eye(2)).is_psd
    with pytest.raises(AssertionError) as info:
        assert_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    text = str(info.value)
    ref = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert "witness v on indices [0, 1]" in text and f"(exact {ref.witness_value_exact})" in text
    assert f"decided by the {ref.method} rung" in text
    K = np.array([[1.0, 1.0], [1.0, 1.0]])
    r = check_psd(K, tol=0, method="exact", max_exact_n=0)
    assert r.verdict is Verdict.INCONCLUSIVE
    with pytest.raises(AssertionError, match="inconclusive"):
        assert_psd(K, tol=0, method="exact", max_exact_n=0)
    assert assert_psd(K, tol=0, method="exact", max_exact_n=0, allow_inconclusive=True) is not None


# --- exact helpers -----------------------------------------------------------


@pytest.mark.parametrize("i", range(len(CORPUS)))
def test_exact_decision_and_quadratic_form_against_fractions(i):
    K = CORPUS[i]
    M, e = to_int_matrix(K)
    assert all(
        Fraction(int(M[a, b])) * Fraction(2) ** e == Fraction(float(K[a, b]))
        for a in range(K.shape[0])
        for b in range(K.shape[0])
    )
    dec = exact_decision(M)
    pd, psd = _exact(K)
    assert dec.kind == ("pd" if pd else "psd" if psd else "not_psd")
    if dec.kind == "not_psd":
        assert _rayleigh(K, dec.vector) < 0
    v = np.linspace(-1.0, 1.0, K.shape[0]) + 0.125
    q = sum(
        Fraction(float(v[a])) * Fraction(float(K[a, b])) * Fraction(float(v[b]))
        for a in range(K.shape[0])
        for b in range(K.shape[0])
    )
    assert quadratic_form(K, v) == q
    assert quadratic_form(K, [Fraction(x) for x in v]) == q


def test_vector_to_ints_for_every_input_kind():
    import mpmath

    for v in (
        np.array([0.5, -0.25, 3.0]),
        [Fraction(1, 2), Fraction(-1, 4), 3],
        [mpmath.mpf(0.5), mpmath.mpf(-0.25), mpmath.mpf(3)],
        [1, -2, 3],
    ):
        w, s = vector_to_ints(v)
        got = [Fraction(int(x)) * s for x in w]
        ref = [Fraction(float(x)) if not isinstance(x, Fraction) else x for x in v]
        assert got == ref


def test_mpmath_rung_decides_what_float64_cannot():
    # 1 - 2**-50 off the diagonal: float64 Cholesky cannot certify it, the mpmath rung can
    eps = 2.0**-50
    assert (
        check_psd(np.array([[1.0, 1.0 - eps], [1.0 - eps, 1.0]]), tol=0, method="cholesky").verdict
        is Verdict.INCONCLUSIVE
    )
    K = np.array([[1.0, 1.0 - eps], [1.0 - eps, 1.0]])
    r = check_psd(K, tol=0, method="mpmath")
    assert r.verdict is Verdict.POSITIVE_DEFINITE and r.certified and r.method == "mpmath"
    bad = np.array([[1.0, 1.0 + 2.0**-52], [1.0 + 2.0**-52, 1.0]])
    rb = check_psd(bad, tol=0, method="mpmath")
    assert rb.verdict is Verdict.NOT_PSD and _rayleigh(bad, rb.witness) < 0
    assert MPMATH_PRECISIONS[0] >= 113


# --- Mercer features ---------------------------------------------------------


@pytest.mark.parametrize("i", range(len(CORPUS)))
def test_mercer_features_reproduce_psd_corpus_and_refuse_the_rest(i):
    K = CORPUS[i]
    _, psd = _exact(K)
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
    assert "Phi" in str(F) and ("PASSED" in str(F))


# --- result text, assert_psd pass-through, exact helpers, Mercer details -------------


def test_psd_result_str_reads_as_the_verdict():
    pd = check_psd(np.eye(2))
    text = str(pd)
    assert text.startswith("POSITIVE_DEFINITE (certified by cholesky; n=2")
    assert text.endswith(")") and pd.reason not in text
    est = check_psd(np.eye(3), method="eigh")
    assert not est.certified and "(estimated by eigh;" in str(est)
    inc = check_psd(np.array([[1.0, 1.0], [1.0, 1.0]]), tol=0, method="exact", max_exact_n=0)
    assert str(inc).endswith(": " + inc.reason) and (inc.method, inc.rungs) == ("none", ())
    bad = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert f"witness v^T K v/v^T v={bad.witness_value:.3g}" in str(bad)


def test_assert_psd_passes_tol_and_method_through():
    K = np.array([[1.0, 0.0], [0.0, -0.25]])
    with pytest.raises(AssertionError) as info:
        assert_psd(K)
    r = check_psd(K)
    assert f"below -tol by {-(r.witness_value + r.tol.value):.3g}" in str(info.value)
    assert assert_psd(K, tol=0.5).is_psd
    assert assert_psd(np.eye(2), method="eigh").method == "eigh"


def test_vector_to_ints_keeps_mpf_digits_beyond_float64():
    import mpmath

    with mpmath.workprec(200):
        x = mpmath.mpf(1) / 3
        w, s = vector_to_ints([x, mpmath.mpf(0)])
        got = Fraction(int(w[0])) * s
        assert got != Fraction(float(x))  # more than 53 bits survive
        num, den = got.numerator, got.denominator
        assert mpmath.mpf(num) / mpmath.mpf(den) == x
    with pytest.raises(ValueError, match="non-finite mpf"):
        vector_to_ints([mpmath.mpf("inf")])


@pytest.mark.parametrize("c", [-5.0, 0.0, 1.0, 2.0, 100.0, 1e6])
def test_zero_pivot_witnesses_are_exact(c):
    # after eliminating the first pivot the Schur complement is [[0, 1], [1, c - 1]]:
    # a zero pivot with a non-zero entry in its row, so K is not PSD for every c
    K = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 2.0], [1.0, 2.0, c]])
    M, _ = to_int_matrix(K)
    dec = exact_decision(M)
    assert dec.kind == "not_psd" and dec.positives == (0,)
    assert _rayleigh(K, dec.vector) < 0
    r = check_psd(K, tol=0, method="exact")
    assert r.verdict is Verdict.NOT_PSD and _rayleigh(K, r.witness) < 0


def test_mercer_threshold_dropping_and_bound():
    from kernelcheck._src.core.rounding import gamma
    from kernelcheck._src.psd.ladder import EIGH_P, frobenius

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
    from kernelcheck._src.core.rounding import Tolerance
    from kernelcheck._src.psd.mercer import MercerFeatures

    F = mercer_features(np.diag([4.0, 1.0, 0.0]))
    assert str(F).startswith("PASSED: Phi (3 x 2) reproduces K with max residual ")
    assert " <= bound " in str(F)
    failed = MercerFeatures(F.phi, F.rank, F.eigenvalues, Tolerance(0.0, "t"), 1.0, 0.5, False)
    assert str(failed) == "FAILED: Phi (3 x 2) reproduces K with max residual 1 > bound 0.5"


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
