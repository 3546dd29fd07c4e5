"""Unit tests of check_psd and assert_psd: the public API and its verdicts (claim C5).

References are independent of the code under test: an exact rational LDL^T
written here with ``fractions.Fraction`` (no shared code with
``kernelcheck._src.psd.exact``), Sylvester's criterion on all principal
minors (``tests/psd/sylvester.py``) against which every rung and tolerance is
compared, and witnesses re-verified with Fractions; ``default_tolerance`` is
compared with its docstring formula evaluated in 100-digit mpmath; messages
are read back and compared with the result fields.  Which rung decides is
tested in ``test_ladder.py``.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from kernelcheck import Gaussian, InvalidArgument
from kernelcheck._src.psd.highprec import MPMATH_MAX_N
from kernelcheck._src.psd.tolerance import default_tolerance
from kernelcheck.errors import Inconclusive
from kernelcheck.psd import Verdict, check_psd
from kernelcheck.testing import assert_psd
from tests.psd import sylvester
from tests.psd.oracle import assert_witness, hilbert, reference_kind

KIND = {
    "pd": Verdict.POSITIVE_DEFINITE,
    "psd": Verdict.POSITIVE_SEMIDEFINITE,
    "not_psd": Verdict.NOT_PSD,
}


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


BAD = [
    (np.ones((2, 3)), {}, "square"),
    (np.ones(3), {}, "square"),
    (np.zeros((0, 0)), {}, "empty"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), {}, "finite"),
    (np.array([[np.inf, 0.0], [0.0, 1.0]]), {}, "finite"),
    (np.eye(2) + 0j, {}, "real"),
    (np.array([[1, 0], [0, 1]], dtype=object), {}, "numeric"),
    ("abc", {}, "numeric"),
    (np.array([[1.0, 2.0], [2.0 + 1e-12, 1.0]]), {}, "max |K - K^T|"),
    (np.eye(2), {"method": "cholesky2"}, "method"),
    (np.eye(2), {"tol": -1.0}, "tol"),
    (np.eye(2), {"tol": float("nan")}, "tol"),
    (np.eye(2), {"symmetrize": "yes"}, "symmetrize"),
    (np.eye(2), {"max_exact_n": -1}, "max_exact_n"),
]


@pytest.mark.parametrize("K, kwargs, words", BAD)
def test_bad_input(K, kwargs, words):
    with pytest.raises(InvalidArgument, match=None) as info:
        check_psd(K, **kwargs)
    assert words in str(info.value)


def test_asymmetry_message_says_by_how_much():
    K = np.array([[1.0, 0.5], [0.25, 1.0]])
    with pytest.raises(InvalidArgument, match=r"0\.25 at index \(0, 1\)"):
        check_psd(K)


def test_symmetrize_is_explicit_and_recorded():
    K = np.array([[2.0, 1.0], [1.0 + 2**-40, 2.0]])
    r = check_psd(K, symmetrize=True)
    assert r.symmetrized and r.asymmetry == 2**-40
    assert r.verdict is Verdict.POSITIVE_DEFINITE


def test_float32_is_widened_exactly_and_accepted():
    K = np.array([[2.0, 1.0], [1.0, 2.0]], dtype=np.float32)
    r = check_psd(K)
    assert r.verdict is Verdict.POSITIVE_DEFINITE
    # the default tolerance uses float32's unit roundoff
    assert r.tol.value == default_tolerance(K, dtype=np.float32).value


def test_asymmetry_is_found_far_from_the_first_block():
    """C5: exact symmetry is checked over the whole matrix (n = 600, one asymmetric
    pair at (550, 590), beyond the first 512 rows and columns)."""
    K = np.eye(600)
    K[550, 590] = 1e-3
    with pytest.raises(InvalidArgument, match=r"at index \(550, 590\)|at index \(590, 550\)"):
        check_psd(K)


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
    text = str(info.value)
    assert "max |K - K^T| = 2 at index (0, 1) (0.667 relative to max |K| = 3)" in text
    assert "pass symmetrize=True to test the exact symmetric part (K + K^T) / 2" in text


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


def test_float32_input_is_judged_at_float32_resolution():
    K = np.array([[1.0, 0.5], [0.5, 1.0]], dtype=np.float32)
    r = check_psd(K)
    assert r.tol.value == default_tolerance(K.astype(np.float64), dtype=np.float32).value
    assert r.tol.value > default_tolerance(K.astype(np.float64)).value


# ---------------------------------------------------------------------------
# every method and tolerance against Sylvester's criterion
# ---------------------------------------------------------------------------


RUNGS = {
    "diagonal",
    "cholesky",
    "minor",
    "eigh",
    "cholesky+tol",
    "lowrank",
    "gershgorin",
    "ball",
    "mpmath",
    "exact",
}


def _check_result(K, r, tol_value):
    pd, psd = sylvester.pd_psd(K)
    _, psd_t = sylvester.pd_psd(K, Fraction(tol_value))
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
        q = sylvester.rayleigh(K, r.witness)
        assert q < -Fraction(tol_value)
        assert r.witness_value == float(q)
        assert r.witness_value_exact == f"{q.numerator}/{q.denominator}"
        # the proven upper bound is the exact quotient rounded up, never to nearest; the
        # interval (with the eigh estimate's enclosure) lies below it
        high = r.upper_bound
        assert Fraction(high) >= q and high <= np.nextafter(r.witness_value, np.inf)
        assert r.eigenvalue_interval()[1] <= high
    elif r.verdict is Verdict.POSITIVE_SEMIDEFINITE:
        if r.certified:
            assert psd_t
    else:
        assert not r.certified and not r.is_psd
    if r.verdict is not Verdict.NOT_PSD:
        assert r.witness is None and r.witness_value is None


@pytest.mark.parametrize("i", range(len(sylvester.CORPUS)))
@pytest.mark.parametrize("tol", [0.0, None, 0.25])
@pytest.mark.parametrize("method", ["auto", "cholesky", "eigh", "mpmath", "exact"])
def test_every_rung_agrees_with_sylvester(i, tol, method):
    K = sylvester.CORPUS[i]
    r = check_psd(K, tol=tol, method=method)
    t = default_tolerance(K).value if tol is None else tol
    assert r.tol.value == t
    _check_result(K, r, t)
    if method != "auto" and r.verdict is not Verdict.INCONCLUSIVE:
        # a forced eigh whose estimate is clear hands it to the certified Cholesky
        certified_eigh = method == "eigh" and r.method == "cholesky" and r.certified
        assert r.method in (method, "diagonal") or certified_eigh
    if method == "exact" and K.shape[0] <= 64:
        assert r.verdict is not Verdict.INCONCLUSIVE and r.certified  # exact always decides
    if method == "auto" and tol == 0.0:
        # the exact question is always decided for small n, with a certificate
        assert r.certified and r.verdict is not Verdict.INCONCLUSIVE
        pd, psd = sylvester.pd_psd(K)
        assert r.is_psd == psd and (r.verdict is Verdict.POSITIVE_DEFINITE) == pd


# ---------------------------------------------------------------------------
# hard matrices judged against exact rational arithmetic
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(6, 21))
def test_hilbert_tol0_matches_exact_rationals(n):
    H = hilbert(n)
    r = check_psd(H, tol=0)
    ref = reference_kind(H)
    assert r.verdict is KIND[ref]
    assert r.certified
    if ref == "not_psd":
        assert_witness(H, r)


@pytest.mark.parametrize("sign", [-1.0, 1.0])
@pytest.mark.parametrize("n", [8, 30])
def test_eigenvalue_1e14_relative(sign, n):
    rng = np.random.default_rng(n)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.linspace(1.0, 2.0, n)
    lam[0] = sign * 1e-14 * 2.0
    K = (Q * lam) @ Q.T
    K = 0.5 * (K + K.T)
    r = check_psd(K, tol=0)
    ref = reference_kind(K)
    assert r.verdict is KIND[ref] and r.certified
    if sign < 0:
        assert ref == "not_psd"  # rounding of the construction is far below 1e-14
        assert_witness(K, r)
        assert r.witness_value == pytest.approx(-2e-14, rel=1e-2)
    # within the default tolerance the matrix is PSD: 2e-14 is below rounding resolution
    assert check_psd(K).is_psd


def test_rank_deficient_integer_gram_is_exactly_singular_psd():
    X = np.arange(24.0).reshape(8, 3) % 5 - 2.0
    K = X @ X.T  # integers: computed exactly, rank <= 3 < 8
    r = check_psd(K, tol=0)
    assert reference_kind(K) == "psd"
    assert r.verdict is Verdict.POSITIVE_SEMIDEFINITE and r.certified and r.method == "exact"
    assert check_psd(K).is_psd


@pytest.mark.parametrize("seed", range(4))
def test_rank_deficient_float_gram(seed):
    X = np.random.default_rng(seed).standard_normal((12, 3))
    K = X @ X.T
    assert check_psd(K).is_psd
    r = check_psd(K, tol=0)
    assert r.verdict is KIND[reference_kind(K)] and r.certified
    if r.verdict is Verdict.NOT_PSD:
        assert_witness(K, r)


def test_gaussian_on_close_points():
    X = np.linspace(0.0, 1e-3, 10)[:, None]
    K = Gaussian(1.0)(X)
    assert check_psd(K).is_psd
    r = check_psd(K, tol=0)
    assert r.verdict is KIND[reference_kind(K)] and r.certified


def test_inconclusive_says_where_the_limit_is():
    X = (np.arange(360.0).reshape(120, 3) % 7) - 3.0
    K = X @ X.T  # exactly singular PSD, n beyond the limits given
    assert K.shape[0] > MPMATH_MAX_N
    r = check_psd(K, tol=0, max_exact_n=10)
    assert r.verdict is Verdict.INCONCLUSIVE and not r.is_psd and not r.certified
    assert "max_exact_n = 10" in r.reason


# ---------------------------------------------------------------------------
# the tolerance
# ---------------------------------------------------------------------------


def reference_tolerance(K: np.ndarray, dtype) -> mpmath.mpf:
    """``2 gamma_(n+2) max(||K||_F, sum |K_ii|) + n (n + 2) eta`` at 100 digits."""
    with mpmath.workdps(100):
        n = K.shape[0]
        fi = np.finfo(np.dtype(dtype))
        u = mpmath.mpf(float(fi.eps)) / 2
        eta = mpmath.mpf(float(fi.smallest_subnormal))
        g = (n + 2) * u / (1 - (n + 2) * u)
        fro = mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in K.ravel()))
        tr = mpmath.fsum(abs(mpmath.mpf(float(x))) for x in np.diagonal(K))
        return 2 * g * max(fro, tr) + n * (n + 2) * eta


TOL_CASES = {
    "random": (np.random.default_rng(0).normal(size=(5, 5)), np.float64),
    "trace dominates": (np.eye(7), np.float64),
    "subnormal": (np.diag([3e-322, 5e-323]), np.float64),
    "float32 subnormal": (np.diag([1e-45, 3e-45, 0.0]).astype(np.float32), np.float32),
    "float32": (np.arange(9.0).reshape(3, 3).astype(np.float32), np.float32),
    "float32 diagonal": (np.diag(np.arange(1.0, 8.0) / 3).astype(np.float32), np.float32),
    "near overflow": (np.diag([1.5e308, 1.5e308, 1e308]), np.float64),
}


@pytest.mark.parametrize("name", sorted(TOL_CASES))
def test_default_tolerance_is_its_documented_formula(name):
    """C5: ``default_tolerance`` equals its formula (unit roundoff and ``eta`` of the
    input dtype) to within the rounding of its own evaluation (``(n + 8) u``
    relative, plus ``2 eta``), also when ``||K||_F`` or the trace overflow; the
    source text states ``n`` and the ``u`` used."""
    K, dtype = TOL_CASES[name]
    K = (K + K.T) / 2 if name in ("random", "float32") else K
    t = default_tolerance(K, dtype=dtype)
    ref = reference_tolerance(np.asarray(K, dtype=np.float64), dtype)
    n = K.shape[0]
    eta = float(np.finfo(np.dtype(dtype)).smallest_subnormal)
    assert math.isfinite(t.value)
    assert abs(mpmath.mpf(t.value) - ref) <= (n + 8) * 2.0**-53 * ref + 2 * eta
    u_text = float(re.search(r"u = ([0-9.e+-]+)", t.source).group(1))
    assert u_text == float(f"{float(np.finfo(np.dtype(dtype)).eps) / 2:.3g}")
    assert f"n = {n}" in t.source
    r = check_psd(K)
    assert r.tol.value == default_tolerance(K, dtype=K.dtype).value


@pytest.mark.parametrize("tol", [0, 0.0, 1e-3, 2])
def test_tolerance_source_says_where_the_value_came_from(tol):
    """C5: a numeric ``tol`` is recorded with its source: the exact question for 0,
    the caller otherwise (the default's source states its formula)."""
    r = check_psd(np.eye(2), tol=tol)
    assert r.tol.value == tol
    if tol == 0:
        assert "tol = 0" in r.tol.source and "caller" not in r.tol.source
    else:
        assert "caller" in r.tol.source
    assert "gamma" in check_psd(np.eye(2)).tol.source


# ---------------------------------------------------------------------------
# result object and assertion twin
# ---------------------------------------------------------------------------


def test_result_is_frozen_json_and_reads_as_a_verdict():
    r = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert not r and not r.passed
    with pytest.raises(AttributeError):
        r.verdict = Verdict.POSITIVE_DEFINITE  # type: ignore[misc]
    d = json.loads(r.to_json())
    assert d["verdict"] == "not_psd" and d["tol"]["source"]
    assert str(r).startswith("refuted: not positive semi-definite (certified")


def test_assert_psd_message_says_what_where_how_much_tolerance():
    K = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(AssertionError) as info:
        assert_psd(K)
    msg = str(info.value)
    for word in ("not PSD within tol", "witness", "indices [0, 1]", "-1", "below -tol by"):
        assert word in msg
    assert assert_psd(np.eye(2)).is_psd


def test_inconclusive_result_fields_and_text():
    """C5: an INCONCLUSIVE result is uncertified (``False``, not just falsy), its
    method is the last rung tried, its interval is unbounded when no estimate
    exists, and ``str`` is the verdict line followed by the reason."""
    r = check_psd(np.eye(MPMATH_MAX_N + 1), tol=0, method="mpmath")
    assert r.verdict is Verdict.INCONCLUSIVE and r.certified is False and r.is_psd is False
    assert r.eigenvalue_interval() == (-math.inf, math.inf)
    text = str(r)
    assert text.startswith("inconclusive: undecided (") and text.endswith(": " + r.reason)
    assert r.symmetrized is False
    # at tol = 0 no certificate of K + tol I is attempted; the method is the last rung
    n = MPMATH_MAX_N + 2
    X = np.random.default_rng(1).integers(-2, 3, size=(n, 2)).astype(float)
    r = check_psd(X @ X.T, tol=0, max_exact_n=4)
    assert r.verdict is Verdict.INCONCLUSIVE and r.certified is False
    assert "cholesky+tol" not in r.rungs and r.method == r.rungs[-1]
    # the estimate's interval, one float outward, within the proven bounds (a diagonal entry)
    low, high = r.eigenvalue_interval()
    assert low == np.nextafter(r.min_eigenvalue - r.min_eigenvalue_error, -np.inf)
    assert r.upper_bound == np.diagonal(X @ X.T).min()
    assert high == min(r.upper_bound, np.nextafter(r.min_eigenvalue + r.min_eigenvalue_error, 1))


def _witness_with_support(k: int) -> np.ndarray:
    """Leading ``k x k`` block ``I - (2 / k) J`` (eigenvalue -1 along the all-ones
    direction) and a decoupled ``4 I``: NOT_PSD with a witness inside the block."""
    n = k + 2
    K = np.eye(n) * 4.0
    K[:k, :k] = np.eye(k) - 2.0 / k * np.ones((k, k))
    return K


@pytest.mark.parametrize("k,tol", [(2, 0.0), (8, 0.0), (12, 0.25), (17, 0.0)])
def test_assert_psd_message_quotes_the_witness_support_and_margin(k, tol):
    """C5: the AssertionError of ``assert_psd`` lists the first 8 indices of the
    witness support, with ``...`` exactly when the support is larger, and the
    margin below ``-tol`` is ``-(witness_value + tol)``."""
    K = _witness_with_support(k)
    with pytest.raises(AssertionError) as info:
        assert_psd(K, tol=tol)
    r = check_psd(K, tol=tol)
    msg = str(info.value)
    m = re.search(r"on indices \[([0-9, ]*)\](\.\.\.)? has", msg)
    assert m is not None
    support = np.flatnonzero(np.asarray([x != 0 for x in r.witness]))
    assert [int(x) for x in m.group(1).split(",")] == support[:8].tolist()
    assert (m.group(2) is not None) == (support.size > 8)
    margin = float(re.search(r"below -tol by ([0-9.e+-]+);", msg).group(1))
    assert margin == float(f"{-(r.witness_value + r.tol.value):.3g}")


def test_psd_result_str_reads_as_the_verdict():
    pd = check_psd(np.eye(2))
    text = str(pd)
    assert text.startswith("verified: positive definite (certified by cholesky; n=2")
    assert text.endswith(")") and pd.reason not in text
    # a forced eigh whose estimate is clear is certified by the Cholesky rung ...
    eye = str(check_psd(np.eye(3), method="eigh"))
    assert eye.startswith("verified: positive definite (certified by")
    # ... and an estimate that decides nothing says so
    est = check_psd(np.ones((3, 3)), method="eigh")
    assert not est.certified and "(estimated by eigh;" in str(est)
    inc = check_psd(np.array([[1.0, 1.0], [1.0, 1.0]]), tol=0, method="exact", max_exact_n=0)
    assert str(inc).endswith(": " + inc.reason) and (inc.method, inc.rungs) == ("none", ())
    bad = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert f"witness v^T K v/v^T v={bad.witness_value:.3g}" in str(bad)


def test_assert_psd_passes_psd_and_reports_witness_or_inconclusive():
    assert assert_psd(np.eye(2)).is_psd
    with pytest.raises(AssertionError) as info:
        assert_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    text = str(info.value)
    assert text.startswith("refuted: K (2 x 2) is not PSD within tol")
    ref = check_psd(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert "witness v on indices [0, 1]" in text and f"(exact {ref.witness_value_exact})" in text
    assert f"decided by the {ref.method} rung" in text
    K = np.array([[1.0, 1.0], [1.0, 1.0]])
    r = check_psd(K, tol=0, method="exact", max_exact_n=0)
    assert r.verdict is Verdict.INCONCLUSIVE
    with pytest.raises(Inconclusive, match="^inconclusive: undecided") as info:
        assert_psd(K, tol=0, method="exact", max_exact_n=0)
    assert not isinstance(info.value, AssertionError) and info.value.result.verdict is r.verdict
    allowed = assert_psd(K, tol=0, method="exact", max_exact_n=0, allow_inconclusive=True)
    assert allowed.verdict is Verdict.INCONCLUSIVE and allowed.reason == r.reason


def test_assert_psd_passes_tol_and_method_through():
    K = np.array([[1.0, 0.0], [0.0, -0.25]])
    with pytest.raises(AssertionError) as info:
        assert_psd(K)
    r = check_psd(K)
    assert f"below -tol by {-(r.witness_value + r.tol.value):.3g}" in str(info.value)
    assert assert_psd(K, tol=0.5).is_psd
    r = assert_psd(np.eye(2), method="eigh")
    assert "eigh" in r.rungs and r.certified
