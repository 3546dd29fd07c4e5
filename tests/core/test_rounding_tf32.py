"""TF32 in the error model: its constants, its rounding, and the model of TF32 products.

TF32 (NVIDIA's TensorFloat-32) is 1 sign bit, 8 exponent bits (binary32's, bias 127)
and 10 fraction bits.  Everything here is derived from that layout alone: a decoder
of its bit patterns (checked against NumPy reading the same pattern as the top 19
bits of a binary32), and the nearest TF32 number to a float64 found by bisection over
the monotone non-negative patterns and exact rational comparison, ties to the even
pattern.  The model of a layer whose float32 products run in TF32 -- operands rounded
to TF32, products accumulated in float32 -- is
``RoundingModel(float32, tf32, storage_ops=s)``; emulated TF32 layers fail the plain
float32 model (the false alarm it replaces) and pass it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from kernelcheck._src.core.rounding import (
    ARRAY_FORMATS,
    PRECISIONS,
    PRODUCT_ONLY,
    TRUNCATABLE,
    RoundingModel,
    gamma,
    precision,
)
from kernelcheck._src.verify.adapters import adapter, round_to
from kernelcheck.attention import linear_error_bound, parallel, softmax, softmax_error_bound
from kernelcheck.errors import InvalidArgument

E, F = 8, 10  # exponent and fraction bits
BIAS = 2 ** (E - 1) - 1
TOP = ((2**E - 1) << F) - 1  # the largest finite pattern (exponent 254, fraction all ones)


def decode(bits: int) -> Fraction:
    """The exact value of a non-negative finite TF32 bit pattern."""
    exponent, fraction = bits >> F, bits & (2**F - 1)
    assert 0 <= bits <= TOP
    if exponent == 0:
        return Fraction(fraction) * Fraction(2) ** (1 - BIAS - F)
    return Fraction(2**F + fraction) * Fraction(2) ** (exponent - BIAS - F)


def as_float32(bits: int) -> float:
    """NumPy's reading of a TF32 pattern: the top 19 bits of a binary32 pattern."""
    return float(np.array([bits << 13], dtype=np.uint32).view(np.float32)[0])


def nearest_tf32(x: float) -> float:
    """The TF32 number nearest to ``x``, ties to the even pattern (None beyond the range).

    Bisection over the patterns (decode is increasing in them), then an exact
    comparison of the two neighbours' distances.
    """
    a = Fraction(abs(x))
    lo, hi = 0, TOP
    if a >= decode(TOP):
        half_ulp = (decode(TOP) - decode(TOP - 1)) / 2
        return None if a >= decode(TOP) + half_ulp else math.copysign(float(decode(TOP)), x)
    while hi - lo > 1:  # decode(lo) <= a < decode(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if decode(mid) <= a else (lo, mid)
    below, above = a - decode(lo), decode(hi) - a
    pick = lo if below < above or (below == above and lo % 2 == 0) else hi
    return math.copysign(float(decode(pick)), x)


def samples() -> np.ndarray:
    """Float64 values over TF32's whole range: random significands at every exponent
    from the subnormals to the top, exact ties between neighbours, one float64 step
    either side of a tie, and the edges (zero, the largest number, subnormals)."""
    rng = np.random.default_rng(2024)
    exps = rng.integers(-150, 127, size=3000)  # below 2^127; the top binade by patterns
    out = [np.ldexp(rng.uniform(1.0, 2.0, size=exps.size), exps)]
    pats = np.concatenate([rng.integers(0, TOP, size=400), np.arange(TOP - 8, TOP)])
    ties = np.array([float((decode(int(b)) + decode(int(b) + 1)) / 2) for b in pats])
    out += [ties, np.nextafter(ties, np.inf), np.nextafter(ties, 0.0)]
    edges = [0.0, float(decode(TOP)), float(decode(1)), float(decode(1)) / 2, 2.0**-149, 1.0]
    out.append(np.array(edges))
    x = np.concatenate(out)
    return np.concatenate([x, -x])


def test_tf32_constants_come_from_its_bit_layout():
    p = PRECISIONS["tf32"]
    one = BIAS << F
    for bits in (1, 1 << F, TOP, one, one + 1, 0x12345):
        assert float(decode(bits)) == as_float32(bits)
    assert p.u == float(decode(one + 1) - 1) / 2 == 2.0**-11
    assert p.eta == float(decode(1)) == 2.0**-136
    assert p.tiny == float(decode(1 << F)) == float(np.finfo(np.float32).smallest_normal)
    assert p.max == float(decode(TOP))
    assert p.max < float(np.finfo(np.float32).max)  # float32's largest has 13 more bits


def test_round_to_tf32_is_the_nearest_tf32_number_with_ties_to_even():
    x = samples()
    got = round_to(x, "tf32")
    want = np.array([nearest_tf32(float(v)) for v in x])
    assert np.array_equal(got, want)  # bit for bit, signed zeros aside
    assert np.array_equal(np.signbit(got[got != 0]), np.signbit(x[got != 0]))
    # every result is a float32 number whose 13 lowest fraction bits are zero
    bits = got.astype(np.float32).view(np.uint32)
    assert np.array_equal(got.astype(np.float32).astype(np.float64), got)
    assert not (bits & np.uint32(2**13 - 1)).any()


def test_round_to_tf32_rounds_once_not_through_float32():
    """1 + 2^-11 + 2^-40 is above the tie between 1 and 1 + 2^-10: it rounds up.  Rounded
    to float32 first it would become the tie 1 + 2^-11 and then 1 (to even)."""
    x = np.array([1.0 + 2.0**-11 + 2.0**-40])
    assert round_to(x, "tf32")[0] == 1.0 + 2.0**-10
    via32 = round_to(round_to(x, "float32"), "tf32")[0]
    assert via32 == 1.0


def test_round_to_tf32_refuses_what_is_beyond_its_largest_number():
    top = float(decode(TOP))
    half = float((decode(TOP) - decode(TOP - 1)) / 2)
    assert round_to(np.array([top + half / 2]), "tf32")[0] == top
    with pytest.raises(InvalidArgument, match="beyond the largest tf32 number"):
        round_to(np.array([top + half]), "tf32")


@pytest.mark.parametrize("spelling", ["tf32", "TF32", "tensorfloat32", "TFloat32"])
def test_every_spelling_of_tf32_gives_its_precision(spelling):
    assert precision(spelling) is PRECISIONS["tf32"]


@pytest.mark.parametrize("name", ["tf32", "tf32-nearest"])
def test_tf32_is_no_array_dtype(name):
    assert PRODUCT_ONLY == ("tf32", "tf32-nearest")
    assert name in PRECISIONS and name not in ARRAY_FORMATS
    with pytest.raises(InvalidArgument, match=rf"^`dtype` {name} is the operand format"):
        adapter("numpy", name)


@pytest.mark.parametrize("spelling", ["tf32-nearest", "TF32_nearest"])
def test_tf32_declared_rounded_to_nearest_is_tf32_that_never_truncates(spelling):
    p = precision(spelling)
    assert p is PRECISIONS["tf32-nearest"] and p.name == "tf32-nearest"
    assert (p.u, p.eta, p.tiny, p.max) == tuple(
        getattr(PRECISIONS["tf32"], a) for a in ("u", "eta", "tiny", "max")
    )
    assert TRUNCATABLE == ("tf32",)
    x = np.array([1.0 + 3 * 2.0**-12, -(1.0 + 3 * 2.0**-12)])  # above a half ulp: away from 0
    assert np.array_equal(round_to(x, p), round_to(x, "tf32"))
    assert np.array_equal(round_to(x, p), np.array([1.0 + 2.0**-10, -(1.0 + 2.0**-10)]))


def test_the_tf32_model_composes_float32_sums_with_tf32_operand_roundings():
    model = RoundingModel(precision("float32"), precision("tf32"), storage_ops=4)
    for k in (1, 16, 4096):
        want = (1 + gamma(k, "float32")) * (1 + gamma(4, "tf32")) - 1
        assert model.gamma(k) == pytest.approx(want, rel=1e-12)
        assert model.gamma(k) > gamma(4, "tf32") + gamma(k, "float32")
    assert "4 roundings per term stored in tf32" in model.describe()


# ---------------------------------------------------------------------------
# Layers whose matrix products run in TF32 (emulated: operands rounded to TF32,
# exact products accumulated by a float32 GEMM)
# ---------------------------------------------------------------------------


def tf32_matmul(A, B):
    return np.matmul(round_to(A, "tf32").astype(np.float32), round_to(B, "tf32").astype(np.float32))


def sdpa_tf32(Q, K, V, scale_error=0.0):
    Q, K, V = (np.asarray(X, np.float32) for X in (Q, K, V))
    S = tf32_matmul(Q, K.T) * np.float32((1.0 + scale_error) / math.sqrt(Q.shape[-1]))
    P = np.exp(S - S.max(axis=-1, keepdims=True))
    return tf32_matmul(P, V) / P.sum(axis=-1, keepdims=True, dtype=np.float32)


def chunked_linear_tf32(pq, pk, V, chunk=4):
    """Causal linear attention by chunks, every product in TF32, state in float32."""
    pq, pk, V = (np.asarray(X, np.float32) for X in (pq, pk, V))
    out = np.empty((pq.shape[0], V.shape[1]), np.float32)
    S = np.zeros((pk.shape[1], V.shape[1]), np.float32)
    z = np.zeros(pk.shape[1], np.float32)
    for c0 in range(0, pq.shape[0], chunk):
        c = slice(c0, c0 + chunk)
        A = np.tril(tf32_matmul(pq[c], pk[c].T))
        num = tf32_matmul(A, V[c]) + tf32_matmul(pq[c], S)
        den = A.sum(axis=-1, dtype=np.float32) + pq[c] @ z
        out[c] = num / den[:, None]
        S = S + tf32_matmul(pk[c].T, V[c])
        z = z + pk[c].sum(axis=0, dtype=np.float32)
    return out


F32 = RoundingModel(precision("float32"), precision("float32"))
#: The recipe: float32 sums, TF32 operands, storage_ops as for a 16-bit layer of the family
#: (softmax 3: two operand roundings per product; linear 5: four along a term's path).
TF32_SOFTMAX = RoundingModel(precision("float32"), precision("tf32"), storage_ops=3)
TF32_LINEAR = RoundingModel(precision("float32"), precision("tf32"), storage_ops=5)


def float32_inputs(rng, *shape, count=3):
    return [round_to(rng.standard_normal(shape), "float32") for _ in range(count)]


def softmax_ratio(out, Q, K, V, model):
    tol = softmax_error_bound(Q, K, V, tight=False) + softmax_error_bound(Q, K, V, dtype=model)
    return float((np.abs(out.astype(np.float64) - softmax(Q, K, V)) / tol).max())


@pytest.mark.parametrize("seed", range(10))
def test_a_tf32_softmax_layer_passes_the_tf32_model_and_fails_the_float32_one(seed):
    Q, K, V = float32_inputs(np.random.default_rng(seed), 16, 8)
    out = sdpa_tf32(Q, K, V)
    assert softmax_ratio(out, Q, K, V, TF32_SOFTMAX) <= 1.0
    assert softmax_ratio(out, Q, K, V, F32) > 1.0


@pytest.mark.parametrize("seed", range(10))
def test_a_chunked_tf32_linear_layer_passes_the_tf32_model_and_fails_the_float32_one(seed):
    rng = np.random.default_rng(seed)
    pq, pk = (round_to(np.exp(0.5 * rng.standard_normal((64, 8))), "float32") for _ in range(2))
    V = round_to(rng.standard_normal((64, 4)), "float32")
    out = chunked_linear_tf32(pq, pk, V).astype(np.float64)
    err = np.abs(out - parallel(pq, pk, V, causal=True))
    b64 = linear_error_bound(pq, pk, V, causal=True)
    assert (err <= b64 + linear_error_bound(pq, pk, V, causal=True, dtype=TF32_LINEAR)).all()
    assert not (err <= b64 + linear_error_bound(pq, pk, V, causal=True, dtype=F32)).all()


@pytest.mark.parametrize("seed", range(10))
def test_a_tf32_softmax_layer_with_a_real_error_is_still_caught(seed):
    """The TF32 model is no blanket: a logit scale off by 1/8 fails it on every seed (at
    n = 16 the worst-case model catches a scale error from about 1/16 on)."""
    Q, K, V = float32_inputs(np.random.default_rng(seed), 16, 8)
    assert softmax_ratio(sdpa_tf32(Q, K, V, scale_error=0.125), Q, K, V, TF32_SOFTMAX) > 1.0
