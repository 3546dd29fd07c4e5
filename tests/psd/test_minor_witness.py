"""The 2 x 2 minor rung of ``check_psd`` and its witness (claim C5).

The minor witness is tried on every sign pattern of its block: its fallback
vectors ``(-b, a)``, ``(c, -b)`` and ``(-sign(b) (|c| / |b| + 1), 1)`` are exact
witnesses whenever the block is indefinite, so at ``tol = 0`` the witness
exists exactly when Sylvester's 2 x 2 criterion fails; entries whose squares
overflow are decided on the matrix scaled by a power of two.  Every verdict is
checked against exact arithmetic (:mod:`tests.psd.oracle`,
:mod:`tests.psd.sylvester`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.psd.inputs import check_psd_iv
from kernelcheck._src.psd.ladder import _Ladder, _unit_scale
from kernelcheck.psd import check_psd
from tests.psd.oracle import assert_witness, exact_kind
from tests.psd.sylvester import rayleigh

BIG = float(np.finfo(np.float64).max)

# ---------------------------------------------------------------------------
# the 2 x 2 minor witness
# ---------------------------------------------------------------------------


#: Blocks whose computed eigenvector does not verify (its small component underflows
#: or rounds the quadratic form to >= 0): the fallbacks ``(-b, a)`` (a > 0) and
#: ``(c, -b)`` (a = 0 < c) must give the witness.
FALLBACK_BLOCKS = [
    (2.0**-1004, float.fromhex("0x1.e8d203ed4e7a5p-519"), float.fromhex("0x1.6499b605150cap-58")),
    (
        float.fromhex("0x0.0000004000000p-1022"),
        float.fromhex("0x1.51cb5efdab706p-525"),
        float.fromhex("0x1.d5f2f6214b962p-47"),
    ),
    # 0 < a <= 1, c = 0: of the fallbacks only (-b, a) is a witness
    (float.fromhex("0x1.07d8c07ef00d5p-1"), float.fromhex("0x1.492a477ca1570p-1015"), 0.0),
    (float.fromhex("0x1.72e4f6a431a60p-5"), float.fromhex("0x0.00000431ed8a9p-1022"), 0.0),
    (0.0, float.fromhex("0x1.665a858b1d10ep-594"), float.fromhex("0x1.63038810681d8p-32")),
    (0.0, float.fromhex("0x1.12601062e5d38p-660"), float.fromhex("0x1.e8e61767dda17p-29")),
]


def _blocks():
    """2 x 2 blocks ``[[a, b], [b, c]]`` of every sign pattern, some a rounding away
    from singular (where the computed eigenvector may not verify)."""
    out = []
    for a, b, c in [
        (1.0, 2.0 + 2.0**-51, 4.0),  # ac - b^2 = -2^-49 - 2^-102
        (4.0, 2.0 + 2.0**-51, 1.0),
        (1.0, 1.0 + 2.0**-52, 1.0),
        (3.0, -(2.0**30 + 1.0), 2.0**60 / 3.0),
        (2.0**-30, 1.0, 2.0**30 - 2.0**-22),
        (0.0, 1.0, 5.0),  # a = 0 < c
        (0.0, -3.0, 2.0**-40),
        (-1.0, 0.5, -2.0),  # both diagonal entries negative
        (-(2.0**-60), 2.0**-61, -(2.0**-59)),
        (-1.0, 0.0, -1.0),  # b = 0
        (0.0, 2.0**-1000, 0.0),
        (-3.0, 1e-300, 0.0),
        (2.0, 1.0, 1.0),  # PD: no witness
        (1.0, 1.0, 1.0),  # singular PSD: no witness
        (0.0, 0.0, 7.0),
        (0.0, 0.0, 0.0),
        *FALLBACK_BLOCKS,
    ]:
        out.append((a, b, c))
    return out


@pytest.mark.parametrize(("a", "b", "c"), _blocks())
def test_the_minor_witness_exists_exactly_when_the_block_is_not_psd(a, b, c):
    """At ``tol = 0`` the minor witness is found iff the block ``[[a, b], [b, c]]``
    (embedded at indices 0 and 2 of a 3 x 3 matrix) is not PSD in exact
    arithmetic; it is supported on the block and verified in fractions."""
    K = np.array([[a, 0.0, b], [0.0, 1.0, 0.0], [b, 0.0, c]])
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    w = lad.minor_witness(0, 2)
    block = [[a, b], [b, c]]
    if exact_kind(block) == "not_psd":
        assert w is not None
        v = np.asarray(w.vector, dtype=float)
        assert v[1] == 0 and (v[0] != 0 or v[2] != 0)
        q = rayleigh(K, w.vector)
        assert q < 0 and q == w.value
    else:
        assert w is None


@pytest.mark.parametrize(("a", "b", "c"), FALLBACK_BLOCKS)
def test_the_minor_witness_falls_back_to_an_exact_vector_when_the_eigenvector_fails(a, b, c):
    """``a (ac - b^2)`` and ``c (ac - b^2)`` are the exact values of ``(-b, a)`` and
    ``(c, -b)`` (times ``v^T v``): negative whenever the block is indefinite."""
    K = np.array([[a, b], [b, c]])
    assert exact_kind(K.tolist()) == "not_psd"
    _, vecs = np.linalg.eigh(K)
    assert not rayleigh(K, vecs[:, 0]) < 0  # the first candidate fails here
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    w = lad.minor_witness(0, 1)
    assert w is not None and rayleigh(K, w.vector) < 0
    r = check_psd(K, tol=0)
    assert_witness(K, r)


@pytest.mark.parametrize(("a", "b", "c"), [(1.0, 3.0, 1.0), (2.0, -5.0, 1.0), (0.0, 1.0, 0.0)])
def test_the_minor_witness_prefers_the_eigenvector_of_the_block(a, b, c):
    """When the block's eigenvector of its smallest eigenvalue verifies (a clearly
    indefinite block), it is the witness: parallel to ``eigh`` of the block."""
    K = np.array([[a, b], [b, c]])
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    w = lad.minor_witness(0, 1)
    _, vecs = np.linalg.eigh(K)
    v = np.asarray(w.vector, dtype=float)
    e = vecs[:, 0]
    assert rayleigh(K, e) < 0
    assert abs(v[0] * e[1] - v[1] * e[0]) <= 4 * 2.0**-52 * float(np.linalg.norm(v))


def test_the_minor_rung_on_entries_whose_squares_overflow():
    """Entries near ``2^1000``: ``K_ij^2`` overflows unless the block is scaled by a
    power of two (exact); the most violated minor still gives an exact witness."""
    s = 2.0**1000
    K = np.array([[s, 0.0, 0.0], [0.0, s, 3 * s], [0.0, 3 * s, s]])
    lad = _Ladder(check_psd_iv(K, Tolerance(0.0, "test")))
    r = lad.minors()
    assert r is not None and r.method == "minor" and "(1, 2)" in r.reason
    assert_witness(K, r)
    w = lad.minor_witness(1, 2)
    assert w is not None and rayleigh(K, w.vector) < 0
    # with tol = s / 4 the shifted minor (s + t)^2 - 9 s^2 is still negative
    t = s / 4
    lad = _Ladder(check_psd_iv(K, Tolerance(t, "test")))
    r = lad.minors()
    assert r is not None and r.method == "minor" and r.tol.value == t
    assert_witness(K, r)


@pytest.mark.parametrize("e", [-1074, -10, 0, 499, 500, 700, 1023])
def test_unit_scale_is_one_below_two_to_500_and_puts_the_maximum_in_half_one(e):
    """``_unit_scale``: 1 for ``max |K| < 2^500``, else the power of two with
    ``max |K| * scale`` in ``[0.5, 1)``; for both signs and the empty matrix."""
    for x in (math.ldexp(1.0, e), math.ldexp(1.5, e) if e < 1023 else BIG):
        for sign in (1.0, -1.0):
            K = np.array([[0.25, sign * x], [sign * x, 0.0]])
            s = _unit_scale(K)
            assert math.frexp(s)[0] == 0.5  # a power of two
            top = max(abs(x), 0.25)
            if top < 2.0**500:
                assert s == 1.0
            else:
                assert 0.5 <= top * s < 1.0
    assert _unit_scale(np.zeros((0, 0))) == 1.0
