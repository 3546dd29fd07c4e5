"""The cost model of the attention forms (claims C2, C3, C11).

Counts are checked against an independent enumeration of the pairs the forms
actually form and of the chunks, the state size against the recurrent state,
and the scaling in n (linear for the linear forms, quadratic for the exact
ones).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelcheck import attention as att
from kernelcheck.errors import InvalidArgument

#: The linear recurrence's init / step pair (claims C11, C14).
LINEAR = att.linear_recurrence()


def _pairs_formed_by_softmax(n, causal, monkeypatch):
    """Logits softmax actually forms for one sequence: the entries passed to exp."""
    counted = []
    real_exp = np.exp

    def counting_exp(x, *args, **kwargs):
        counted.append(np.size(x))
        return real_exp(x, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(np, "exp", counting_exp)
        att.softmax(np.zeros((n, 1)), np.zeros((n, 1)), np.zeros((n, 1)), causal=causal)
    return sum(counted)


def _pairs_formed_by_kernelized(n, causal):
    """Gram entries kernelized asks its kernel for, recorded by the kernel itself."""
    sizes = []

    def kernel(X, Y):
        sizes.append(X.shape[0] * Y.shape[0])
        return np.ones((X.shape[0], Y.shape[0]))

    att.kernelized(np.zeros((n, 1)), np.zeros((n, 1)), np.zeros((n, 1)), kernel, causal=causal)
    return sum(sizes)


def _chunks(n, C):
    """Chunk lengths, from cutting range(n) into consecutive pieces of at most C."""
    return [len(range(n)[i : i + C]) for i in range(0, n, C)]


SIZES = [(1, 1, 1, 1, 1), (7, 3, 5, 2, 3), (16, 4, 6, 3, 16), (10, 2, 3, 4, 64), (9, 5, 2, 1, 4)]


@pytest.mark.parametrize("n, d, D, dv, C", SIZES + [(40, 2, 2, 2, 8), (100, 1, 1, 1, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_cost_model_exact_forms_count_the_pairs_the_forms_form(n, d, D, dv, C, causal, monkeypatch):
    P = _pairs_formed_by_softmax(n, causal, monkeypatch)
    assert P == (n * n if not causal else P)
    assert P >= (n * (n + 1)) // 2  # at least the pairs the mask keeps
    soft = att.cost_model("softmax", n, d, D, dv, C, causal=causal)
    # per pair: a length-d dot product (2d), max/exp/sum (3), a length-dv axpy (2dv);
    # per row: the division (dv), the query scaling (d), the output check (2 dv)
    assert soft.flops == P * (2 * d + 3 + 2 * dv) + n * dv + n * d + 2 * n * dv
    assert soft.state_size == n * (d + dv)  # the key/value cache grows with n (C2)
    Pk = _pairs_formed_by_kernelized(n, causal)
    ker = att.cost_model("kernelized", n, d, D, dv, C, causal=causal)
    # per Gram entry formed: 2d + 1 for the kernel, 2 (dv + 1) for the products
    assert ker.flops == Pk * (2 * d + 1) + 2 * Pk * (dv + 1) + n * dv
    assert ker.state_size == n * (d + dv)
    assert (soft.causal, ker.causal) == (causal, causal)
    assert (soft.n, soft.d, soft.D, soft.d_v, soft.chunk_size) == (n, d, D, dv, C)


@pytest.mark.parametrize("n, d, D, dv, C", SIZES)
def test_cost_model_linear_forms_state_is_the_recurrent_state(n, d, D, dv, C):
    state = LINEAR.init(D, dv)
    cost = att.cost_model("recurrent", n, d, D, dv, C)
    assert cost.state_size == state.size  # C11: D (d_v + 1), whatever n
    # one step per token: 4 D (d_v + 1) for the state update and the contraction
    assert cost.flops == n * (4 * D * (dv + 1) + dv)
    # bidirectional parallel: phi_k^T V and 1^T phi_k, phi_q times both in one
    # product (d_v + 1 columns), the check's column sums of its d_v + 1 rows, the divisions
    bidi = att.cost_model("parallel", n, d, D, dv, C, causal=False)
    assert bidi.flops == n * (4 * D * dv + 4 * D + 2 * (dv + 1) + dv)
    assert bidi.state_size == state.size
    # causal parallel forms its sums in blocks: the count of chunked with its block size
    block = 32 if D <= 1024 else 64
    causal_parallel = att.cost_model("parallel", n, d, D, dv, C, causal=True)
    assert causal_parallel.flops == att.cost_model("chunked", n, d, D, dv, block).flops
    assert causal_parallel.state_size == state.size
    chunked = att.cost_model("chunked", n, d, D, dv, C)
    sizes = _chunks(n, C)
    within = sum(2 * c * c * (D + dv + 1) for c in sizes)
    across = 4 * n * D * (dv + 1) + len(sizes) * D * (dv + 1) + n * (dv + 1) + n * dv
    assert chunked.flops == within + across
    assert chunked.state_size == state.size
    assert chunked.causal is True


def test_cost_model_defaults_and_per_token_growth():
    assert att.cost_model("softmax", 8, 2, 2, 2).causal is False
    assert att.cost_model("parallel", 8, 2, 2, 2).causal is False
    assert att.cost_model("recurrent", 8, 2, 2, 2).causal is True
    assert att.cost_model("chunked", 8, 2, 2, 2).chunk_size == 32  # the forms' default
    assert att.cost_model("chunked", 8, 2, 2048, 2).chunk_size == 64
    # C3: flops per token constant in n for the linear forms, growing for softmax (C2)
    lin = [att.cost_model("recurrent", n, 4, 8, 4).flops_per_token() for n in (10, 100, 1000)]
    assert lin[0] == lin[1] == lin[2] == 4 * 8 * 5 + 4
    soft = [att.cost_model("softmax", n, 4, 8, 4).flops_per_token() for n in (10, 100)]
    # per token: n (2d + 3 + 2dv) + (dv + d + 2 dv), so the n-dependent part grows tenfold
    assert soft[1] - 16 == 10 * (soft[0] - 16)
    cost = att.cost_model("chunked", 10, 4, 8, 4, 3)
    assert cost.flops_per_token() == cost.flops / 10
    text = str(cost)
    assert text.startswith(f"chunked (causal), n=10: {cost.flops:.3e} flops, ")
    assert str(att.cost_model("parallel", 10, 4, 8, 4)).startswith("parallel (bidirectional), n=10")
    d = cost.to_dict()
    assert d["flops"] == cost.flops and d["form"] == "chunked"


def test_cost_model_linear_forms_scale_linearly():
    for form in ("parallel", "recurrent", "chunked"):
        a = att.cost_model(form, 1024, 64, 256, 64)
        b = att.cost_model(form, 2048, 64, 256, 64)
        assert a.state_size == b.state_size == 256 * 65
        assert b.flops == 2 * a.flops
        assert a.flops_per_token() == b.flops_per_token()


def test_cost_model_exact_forms_scale_quadratically():
    a = att.cost_model("softmax", 1000, 64, 256, 64)
    b = att.cost_model("softmax", 2000, 64, 256, 64)
    assert 3.9 < b.flops / a.flops <= 4.0
    assert b.state_size == 2 * a.state_size
    causal = att.cost_model("softmax", 1000, 64, 256, 64, causal=True)
    assert causal.flops < a.flops


def test_cost_model_chunked_counts_chunks():
    """chunk_size >= n: one quadratic chunk; chunk_size = 1: pure state updates."""
    full = att.cost_model("chunked", 10, 4, 8, 3, chunk_size=10)
    bigger = att.cost_model("chunked", 10, 4, 8, 3, chunk_size=99)
    assert full.flops == bigger.flops
    one = att.cost_model("chunked", 10, 4, 8, 3, chunk_size=1)
    rec = att.cost_model("recurrent", 10, 4, 8, 3)
    assert one.flops > rec.flops  # the chunked form also counts its per-chunk additions
    assert "chunked (causal), n=10" in str(one)
    assert one.to_dict()["flops"] == one.flops


@pytest.mark.parametrize("n, D, dv, C", [(256, 256, 64, 32), (256, 4096, 1, 64), (7, 3, 2, 4)])
def test_cost_model_gated_chunked_counts_the_larger_of_its_two_ways(n, D, dv, C):
    """Over chunked's count: the chunk-local way's mask, decays and state decays, or the
    group-scaled way's scaled rows, log sums and per-group state work, whichever is
    more: with d_v = 1 and D = 4096 the scaled rows (2 n D) are.  The groups are those
    the form runs (a spy counts them)."""
    from kernelcheck._src.attention.common.blocking import _GroupJob

    plain = att.cost_model("chunked", n, 1, D, dv, chunk_size=C).flops
    gated = att.cost_model("gated_chunked", n, 1, D, dv, chunk_size=C).flops
    sizes = _chunks(n, C)
    groups = []
    real = _GroupJob.scaled

    def spy(self, g, *args):
        groups.append(g)
        return real(self, g, *args)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_GroupJob, "scaled", spy)
        rng = np.random.default_rng(0)
        pq, pk = rng.random((2, n, D))
        att.gated_chunked(pq, pk, rng.random((n, dv)), np.full(n, 0.99), chunk_size=C,
                          normalize=True)  # fmt: skip
    local = sum(4 * c * c for c in sizes) + n * (D + dv + 3) + len(sizes) * D * (dv + 1)
    scaled = 2 * n * D + 3 * n + len(set(groups)) * 2 * D * (dv + 1)
    assert gated - plain == max(local, scaled)
    assert (scaled > local) == (dv == 1)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


_Q = np.ones((4, 3))
_V = np.ones((4, 2))
_NAN = np.where(np.eye(4, 3) > 0, np.nan, 1.0)
_INF = np.where(np.eye(4, 3) > 0, np.inf, 1.0)


BAD_CALLS = [
    ("cost form", lambda: att.cost_model("flash", 4, 2, 2, 2), "`form`"),
    ("cost n", lambda: att.cost_model("parallel", 0, 2, 2, 2), "`n` must be >= 1"),
    ("cost causal", lambda: att.cost_model("chunked", 4, 2, 2, 2, causal=False), "`causal`"),
    ("cost chunk", lambda: att.cost_model("chunked", 4, 2, 2, 2, chunk_size=0), "`chunk_size`"),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises(call, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


#: cost_model's arguments (id, call, error, message regex from the start)
COST_BAD = [
    (
        "cost-form",
        lambda: att.cost_model("flash", 4, 2, 2, 2),
        InvalidArgument,
        rf"^`form` must be one of {re.escape(', '.join(map(repr, att.FORMS)))}; got 'flash'",
    ),
    (
        "cost-n",
        lambda: att.cost_model("softmax", 0, 2, 2, 2),
        InvalidArgument,
        r"^`n` must be >= 1, got 0",
    ),
    (
        "cost-d",
        lambda: att.cost_model("softmax", 4, 0, 2, 2),
        InvalidArgument,
        r"^`d` must be >= 1, got 0",
    ),
    (
        "cost-D",
        lambda: att.cost_model("parallel", 4, 2, 0, 2),
        InvalidArgument,
        r"^`D` must be >= 1, got 0",
    ),
    (
        "cost-d_v",
        lambda: att.cost_model("parallel", 4, 2, 2, 0),
        InvalidArgument,
        r"^`d_v` must be >= 1, got 0",
    ),
    (
        "cost-chunk",
        lambda: att.cost_model("chunked", 4, 2, 2, 2, 0),
        InvalidArgument,
        r"^`chunk_size` must be >= 1, got 0",
    ),
    (
        "cost-causal-int",
        lambda: att.cost_model("softmax", 4, 2, 2, 2, causal=0),
        InvalidArgument,
        r"^`causal` must be True or False, got int 0",
    ),
    (
        "cost-recurrent-bidirectional",
        lambda: att.cost_model("recurrent", 4, 2, 2, 2, causal=False),
        InvalidArgument,
        r"^`causal` must be True for form 'recurrent' \(it is causal only\)",
    ),
    (
        "cost-chunked-bidirectional",
        lambda: att.cost_model("chunked", 4, 2, 2, 2, causal=False),
        InvalidArgument,
        r"^`causal` must be True for form 'chunked' \(it is causal only\)",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in COST_BAD], ids=[c[0] for c in COST_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message matched from the start."""
    with pytest.raises(error, match=message):
        call()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 10**6),
    d=st.integers(1, 512),
    D=st.integers(1, 4096),
    dv=st.integers(1, 512),
    C=st.integers(1, 10**6),
)
def test_cost_model_answers_for_any_valid_sizes(attention_form, n, d, D, dv, C):
    """Every form of the registry has a cost for every valid size (an int, never 0)."""
    _, form = attention_form
    cost = att.cost_model(form.name, n, d, D, dv, C)
    assert cost.flops > 0 and cost.state_size > 0
    assert isinstance(cost.flops, int)
