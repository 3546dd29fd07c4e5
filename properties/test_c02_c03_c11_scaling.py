"""Claims C2, C3, C11: the deterministic parts of "linear attention scales linearly".

Wall-clock exponents are measured by ``kernelcheck scaling`` and reported in
docs/performance.md, never asserted here.  What is asserted:

* C2/C3: the operation count of every attention form equals its cost model
  (``kernelcheck.attention.cost_model``), counted independently from the
  shapes of the matrix products the form performs;
* C11: the recurrent state has a size that does not depend on n, and the
  chunked form carries the same state across chunks;
* the exponent fit that the scaling report rests on recovers known exponents
  from noisy synthetic data, and its interval has at least its stated coverage.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binom

from kernelcheck.scaling import fit_exponent

# ---------------------------------------------------------------------------
# The exponent fit
# ---------------------------------------------------------------------------


@st.composite
def _noisy_power_laws(draw):
    k = draw(st.integers(3, 9))
    start = draw(st.integers(1, 2000))
    ratios = draw(st.lists(st.floats(1.2, 4.0), min_size=k - 1, max_size=k - 1))
    sizes = [start]
    for r in ratios:
        sizes.append(max(sizes[-1] + 1, int(round(sizes[-1] * r))))
    p = draw(st.floats(-1.0, 4.0))
    log_c = draw(st.floats(-25.0, 5.0))
    delta = draw(st.floats(0.0, 0.3))
    unit = draw(st.lists(st.floats(-1.0, 1.0), min_size=k, max_size=k))
    return np.array(sizes), p, log_c, delta * np.array(unit), delta


@given(_noisy_power_laws())
def test_c02_c03_fit_exponent_recovers_exponent_within_noise_bound(case):
    """C2/C3: with log-noise bounded by delta, the Theil-Sen exponent is within
    2 delta / min_gap of the true exponent (min_gap the smallest gap between
    neighbouring log n).

    Proof: every pairwise slope is p + (e_j - e_i) / (x_j - x_i) with
    |e| <= delta and x_j - x_i >= min_gap, so it lies in
    [p - 2 delta / min_gap, p + 2 delta / min_gap]; the median and Sen's
    interval end points are order statistics (or means of two) of those
    slopes, so they lie there too.  A deterministic relation, no false alarms.
    """
    sizes, p, log_c, eps, delta = case
    x = np.log(sizes.astype(float))
    values = np.exp(log_c + p * x + eps)
    fit = fit_exponent(sizes, values)
    bound = 2 * delta / np.diff(x).min()
    slack = 1e-9 * (1 + abs(p))  # rounding in log/exp of values up to e^30
    assert abs(fit.slope - p) <= bound + slack
    assert p - bound - slack <= fit.low <= fit.slope <= fit.high <= p + bound + slack


def _coverage_misses(method: str, trials: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    sizes = np.array([1024, 2048, 4096, 8192, 16384])
    misses = 0
    for t in range(trials):
        p = rng.uniform(0.5, 3.0)
        if method == "theil-sen":
            noise = rng.normal(0.0, 0.05, len(sizes))
            values = 1e-9 * sizes**p * np.exp(noise)
        else:
            noise = rng.normal(0.0, 0.05, (len(sizes), 5))
            values = 1e-9 * sizes[:, None] ** p * np.exp(noise)
        fit = fit_exponent(sizes, values, method=method, n_resamples=400, seed=t)
        misses += not fit.contains(p)
    return misses


def test_c02_c03_fit_exponent_interval_has_its_coverage():
    """C2/C3: the 95% interval of fit_exponent covers the true exponent at least
    95% of the time (Theil-Sen: one value per size; bootstrap: 5 repeats).

    200 seeded trials each, log-normal noise (sd 0.05) on 5 doubling sizes,
    the setting of ``kernelcheck scaling``.  The test fails when more than 21
    intervals miss.  False-alarm rate: P(Binomial(200, 0.05) > 21) = 4.8e-4
    for an interval of exact 95% coverage (less for a conservative one).
    Power: an interval that misses 15% of the time is caught with
    probability 0.96.
    """
    trials, limit = 200, 21
    assert binom.sf(limit, trials, 0.05) < 1e-3  # the stated false-alarm rate
    assert _coverage_misses("theil-sen", trials, seed=20240601) <= limit
    assert _coverage_misses("bootstrap", trials, seed=20240602) <= limit


# ---------------------------------------------------------------------------
# Operation counts against the cost model (C2, C3) and the state (C11)
# ---------------------------------------------------------------------------

import sys  # noqa: E402
import types  # noqa: E402
from contextlib import ExitStack  # noqa: E402
from unittest import mock  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from kernelcheck._src.attention.registry import FORMS, family_of  # noqa: E402
from kernelcheck._src.core import validate  # noqa: E402
from kernelcheck.attention import cost_model, linear_recurrence, recurrent  # noqa: E402

_ELEMENTWISE = {"add", "subtract", "multiply", "divide", "exp", "maximum"}


class _Tally:
    """Floating-point operations seen by the counting arrays, split into kinds."""

    def __init__(self):
        self.gemm = 0  # multiply-adds of matrix products, 2 per multiply-add
        self.elementwise = 0  # one per output entry of +, -, *, /, exp, max
        self.reductions = 0  # one per input entry of sums, maxima and prefix sums

    @property
    def total(self) -> int:
        return self.gemm + self.elementwise + self.reductions


_TALLY = _Tally()


class _Counted(np.ndarray):
    """An ndarray that tallies the arithmetic NumPy performs on it.

    Every ufunc call with a counted operand is forwarded to NumPy on plain
    views and tallied: ``matmul`` of shapes (..., m, k) @ (..., k, p) as
    ``2 m k p`` per batch entry (the GEMM shapes the form performs),
    elementwise arithmetic as one flop per output entry, reductions and
    accumulations as one per input entry.
    """

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, _Counted) else x for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, _Counted) else o for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        name = ufunc.__name__
        if name == "matmul":
            a, b = (np.shape(x) for x in plain)
            a = a if len(a) > 1 else (1,) + a
            b = b if len(b) > 1 else b + (1,)
            batch = np.broadcast_shapes(a[:-2], b[:-2])
            _TALLY.gemm += 2 * int(np.prod(batch, dtype=np.int64)) * a[-2] * a[-1] * b[-1]
        elif name in _ELEMENTWISE and method == "__call__":
            _TALLY.elementwise += int(np.size(result))
        elif name in _ELEMENTWISE and method in ("reduce", "accumulate"):
            _TALLY.reductions += int(np.size(plain[0]))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return result.view(_Counted) if isinstance(result, np.ndarray) else result


def _counted(fn):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs).view(_Counted)

    return wrapper


def _cumsum(a, axis=None, out=None, **kwargs):
    _TALLY.reductions += int(np.size(a))
    res = np.cumsum(
        np.asarray(a), axis=axis, out=None if out is None else out.view(np.ndarray), **kwargs
    )
    return out if out is not None else res.view(_Counted)


class _CountingNumpy(types.ModuleType):
    """``numpy`` as seen by the attention module: new arrays are counting arrays."""

    def __init__(self):
        super().__init__("numpy")
        for name in ("empty", "zeros", "ones", "full", "tril", "zeros_like", "ones_like"):
            setattr(self, name, _counted(getattr(np, name)))
        self.cumsum = _cumsum

    def __getattr__(self, name):
        return getattr(np, name)


def _attention_modules():
    """Every loaded module of the attention room that calls NumPy as ``np``."""
    return [
        m
        for name, m in sorted(sys.modules.items())
        if name.startswith("kernelcheck._src.attention") and getattr(m, "np", None) is np
    ]


def counting(fn, *arrays, **kwargs) -> _Tally:
    """Count one call of an attention function on counting arrays.

    While it runs, the attention modules see :class:`_CountingNumpy` as
    ``numpy`` (restored afterwards), so the arrays they allocate count too,
    and the validation home lets the counting subclass through (it turns
    every other ndarray subclass into a base ndarray).
    """
    global _TALLY
    _TALLY = _Tally()
    counting_np = _CountingNumpy()
    with ExitStack() as stack:
        for module in _attention_modules():
            stack.enter_context(mock.patch.object(module, "np", counting_np))
        stack.enter_context(mock.patch.object(validate, "_base_ndarray", lambda arr, name: arr))
        fn(*(np.asarray(a).view(_Counted) for a in arrays), **kwargs)
    return _TALLY


#: Every registered form with each mask it computes.
_FORMS = [
    (name, causal)
    for name, form in FORMS.items()
    for causal in ((True,) if form.causal_only else (False, True))
]


@pytest.mark.parametrize("form, causal", _FORMS)
@settings(max_examples=25)
@given(
    n=st.integers(1, 70),
    d=st.integers(4, 12),
    D=st.integers(4, 12),
    d_v=st.integers(4, 12),
    chunk=st.integers(1, 40),
)
def test_c02_c03_operation_count_matches_cost_model(form, causal, n, d, D, d_v, chunk):
    """C2/C3: the arithmetic each attention form performs is what its cost model says.

    The form runs on counting arrays (every ufunc call on them is tallied,
    matrix products by their GEMM shapes).  Two relations must hold:

    * the model counts at least the multiply-adds of every matrix product
      performed (``gemm <= model``): a form cannot do more GEMM work than
      claimed;
    * the model and the full count differ by at most
      ``total / min(d, D, d_v) + 2 n (d + D + d_v)``: the two may disagree
      only on elementwise passes (a subtraction of the row maximum, a mask
      multiply, an ``n - 1`` versus ``n`` in a prefix sum, a multiply-add
      counted as an add), each of at most one flop per entry of an array whose
      formation costs at least ``2 min(d, D, d_v)`` flops per entry, and on at
      most two passes over each input and output (scaling, finiteness checks),
      which dominate only when n is tiny.

    A form whose work grows faster than its model (C2: n^2 d; C3: n D d_v)
    fails the first or the second relation once n exceeds the dimensions.
    """
    g = np.random.default_rng([n, d, D, d_v])
    entry = FORMS[form]
    args = family_of(form).spec.example_arguments(g, n, d, D, d_v)
    options = {} if entry.causal_only else {"causal": causal}
    if "chunk_size" in entry.options:
        options["chunk_size"] = chunk
    if "normalize" in entry.options:
        options["normalize"] = True  # the cost models count the normalised forms
    # the arrays (inputs and per-token inputs) are counted; a kernel object passes as it is
    arrays = [i for i, x in enumerate(args) if isinstance(x, np.ndarray)]

    def call(*counted):
        full = list(args)
        for i, x in zip(arrays, counted, strict=True):
            full[i] = x
        return entry.function(*full, **options)

    tally = counting(call, *(args[i] for i in arrays))
    model = cost_model(form, n, d, D, d_v, chunk, causal=causal).flops
    _assert_count_matches(tally, model, min(d, D, d_v), 2 * n * (d + D + d_v))


def _assert_count_matches(tally: _Tally, model: int, dim: int, passes: int) -> None:
    assert tally.gemm <= model, f"matrix products do {tally.gemm} flops, the model says {model}"
    assert abs(model - tally.total) <= tally.total / dim + passes, (
        f"the form does {tally.total} flops, the model says {model}"
    )


@given(n1=st.integers(1, 60), n2=st.integers(1, 60), D=st.integers(1, 10), d_v=st.integers(1, 10))
def test_c11_recurrent_state_size_does_not_depend_on_n(n1, n2, D, d_v):
    """C11: after any number of tokens the recurrent state holds D (d_v + 1) numbers.

    Two sequences of different lengths give states of equal shapes; their size
    equals the cost model's state size for every n.
    """
    g = np.random.default_rng([n1, n2, D, d_v])
    shapes = []
    for n in (n1, n2):
        pq, pk = g.uniform(0.5, 1.5, (2, n, D))
        V = g.standard_normal((n, d_v))
        _, state = recurrent(pq, pk, V, return_state=True)
        shapes.append((state.S.shape, state.z.shape))
        assert state.size == D * (d_v + 1) == cost_model("recurrent", n, 1, D, d_v).state_size
    assert shapes[0] == shapes[1]


@settings(max_examples=20)
@given(t=st.integers(2, 200), D=st.integers(1, 16), d_v=st.integers(1, 16))
def test_c11_work_and_memory_per_token_do_not_depend_on_position(t, D, d_v):
    """C11: the t-th step costs the same operations and allocates the same bytes as the first.

    The state after t - 1 tokens is built by running the recurrence; then one
    step from the empty state and one from that state are counted (ufunc
    tally) and traced (tracemalloc peak, bytes exact): both must be equal.
    """
    import tracemalloc

    g = np.random.default_rng([t, D, d_v])
    pq, pk = g.uniform(0.5, 1.5, (2, t, D))
    V = g.standard_normal((t, d_v))
    _, late = recurrent(pq[:-1], pk[:-1], V[:-1], return_state=True)
    rec = linear_recurrence()
    early = rec.init(D, d_v)
    tallies, peaks = [], []
    for state in (early, late):
        tallies.append(
            counting(lambda a, b, c, s=state: rec.step(s, a, b, c), pq[-1], pk[-1], V[-1])
        )
        tracemalloc.start()
        try:
            rec.step(state, pq[-1], pk[-1], V[-1])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert (tallies[0].gemm, tallies[0].elementwise, tallies[0].reductions) == (
        tallies[1].gemm,
        tallies[1].elementwise,
        tallies[1].reductions,
    )
    assert tallies[0].total > 0
    assert peaks[0] == peaks[1]
