"""transformers' Mamba-2 scan as scalar-gated linear attention, the SSD duality (claim C20).

``transformers.models.mamba2.modeling_mamba2`` holds the mixer's chunked scan
``mamba2_chunk_scan`` (segment sums within chunks, the states carried across)
and its decoding step ``mamba2_selective_state_update``; both dispatch to
mamba-ssm's CUDA kernels whenever it imports, and ``__wrapped__`` reaches
their torch path deliberately.  With ``dt`` given after its softplus, no
bias and one group of ``B``, ``C``, the scan computes

    y_t = sum_(j <= t) (C_t . B_j) prod_(l = j+1..t) exp(dt_l A) dt_j x_j
          + prod_(l <= t) exp(dt_l A) S0 C_t,

scalar-gated linear attention with queries ``C``, keys ``B``, values
``dt x`` and gates ``exp(dt A)`` per token and head, from a handed-over
state ``S0`` held value-major, (batch, heads, head_dim, state_size); the
skip ``+ D x_t`` is one key channel more with gate 0 (the last test).  The
layer forms ``dt x`` and ``dt A`` itself: one rounding more per term than
the reference, which is given them exactly (``extra_ops=1``; the rounded
``dt A`` is a log gate within a few ulp, the error model's assumption).

``mamba2_chunk_scan`` casts its inputs to float32 whatever their dtype, and
the step rounds its decay ``exp(dt A)`` to float32 in a float64 call: in
float64 both are judged by the float32 model (the chunked scan with its four
input casts counted, ``extra_ops=5``), and the float64 model alone refuses
them.  Planted: the state handed over key-major (head_dim equals state_size
here, so nothing raises), and ``dt`` handed one token late to the decoding
steps; both are caught beyond the bound.  The scan's gradients with respect
to ``dt`` and ``A`` are the chain rule through the gated reference VJP's
``dV`` and ``d log g``; a backward that shifts the ``dt`` gradient by one
token is caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as A
from tests.attention.families.final_state import state_tolerance

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers.models.mamba2 import modeling_mamba2 as m2  # noqa: E402

SCAN = m2.mamba2_chunk_scan.__wrapped__
STEP = m2.mamba2_selective_state_update.__wrapped__
Bt, H, P, N = 1, 2, 8, 8  # batch, heads, head_dim, state_size


def _inputs(rng, n, exact=True):
    """(x, dt, A, B, C, S0): x (b, n, H, P), dt (b, n, H), A (H,), B and C (b, n, 1, N)."""
    x = rng.standard_normal((Bt, n, H, P))
    dt = rng.uniform(0.05, 0.5, (Bt, n, H))
    a = -rng.uniform(0.5, 2.0, H)
    b, c = rng.standard_normal((2, Bt, n, 1, N))
    S0 = rng.standard_normal((Bt, H, P, N))
    arrays = (x, dt, a, b, c, S0)
    if exact:  # numbers of float32: the layer's own casts are exact
        arrays = tuple(np.asarray(v, dtype=np.float32).astype(np.float64) for v in arrays)
    return arrays


def _heads(y):
    """``(b, n, 1, N)`` as ``(b, H, n, N)``: one group of ``B`` or ``C`` shared by the heads."""
    return np.broadcast_to(np.moveaxis(y, 1, 2), (Bt, H) + y.shape[1:2] + y.shape[3:])


def _reference(x, dt, a, b, c, S0, dtype, extra_ops):
    """The gated form from ``S0`` (made key-major), its output bound and its final state's."""
    q, k = _heads(c), _heads(b)
    V = np.moveaxis(x * dt[..., None], 1, 2)
    g = np.exp(np.moveaxis(dt * a, 1, 2))
    S0 = A.State(np.swapaxes(S0, -1, -2))
    ref, S = A.gated_recurrent(q, k, V, g, initial_state=S0, return_state=True)
    kw = {"initial_state": S0, "extra_ops": extra_ops}
    tol = A.gated_error_bound(q, k, V, g, dtype=dtype, **kw) + A.gated_error_bound(q, k, V, g, **kw)
    state_tol = state_tolerance(A.gated_error_bound, q, k, V, g, dtype=dtype, **kw)
    return np.moveaxis(ref, 2, 1), np.swapaxes(S.S, -1, -2), tol, np.swapaxes(state_tol, -1, -2)


def _bnh(tol):
    return np.moveaxis(tol, 2, 1)


def _torch(*arrays, dtype):
    return [torch.tensor(v, dtype=dtype) for v in arrays]


def _scan(x, dt, a, b, c, S0, dtype, chunk_size=4):
    S0 = torch.tensor(S0, dtype=dtype)
    args = _torch(x, dt, a, b, c, dtype=dtype)
    out, S = SCAN(*args, chunk_size=chunk_size, initial_states=S0, return_final_states=True)
    return out.double().numpy(), S.double().numpy()


def _steps(x, dt, a, b, c, S, dtype):
    """Decoding steps over the tokens from ``S`` (value-major), as the mixer calls them."""
    state = torch.tensor(S, dtype=dtype)
    As = torch.tensor(a, dtype=dtype)[:, None, None].expand(-1, P, N)
    out = []
    for t in range(x.shape[1]):
        xt, dtt, bt, ct = _torch(x[:, t], dt[:, t], b[:, t], c[:, t], dtype=dtype)
        out.append(STEP(state, xt, dtt[..., None].expand(-1, -1, P), As, bt, ct))
    return torch.stack(out, dim=1).double().numpy(), state.double().numpy()


def _within(got, ref, tol):
    return bool((np.abs(got - ref) <= tol).all())


def test_chunk_scan_in_float32_is_gated_attention_from_a_value_major_state():
    rng = np.random.default_rng(2)
    arrays = _inputs(rng, n=18)  # not a multiple of the chunk of 4
    ref, S, tol, state_tol = _reference(*arrays, dtype="float32", extra_ops=1)
    y, Sf = _scan(*arrays, dtype=torch.float32)
    assert _within(y, ref, _bnh(tol)), float((np.abs(y - ref) / _bnh(tol)).max())
    assert _within(Sf, S, state_tol), float((np.abs(Sf - S) / state_tol).max())
    x, dt, a, b, c, S0 = arrays
    y_bad, S_bad = _scan(x, dt, a, b, c, np.swapaxes(S0, -1, -2).copy(), dtype=torch.float32)
    assert not _within(y_bad, ref, _bnh(tol))  # the state handed over key-major
    assert not _within(S_bad, S, state_tol)


def test_chunk_scan_in_float64_computes_in_float32():
    rng = np.random.default_rng(3)
    arrays = _inputs(rng, n=18, exact=False)
    y, Sf = _scan(*arrays, dtype=torch.float64)
    ref, S, tol, state_tol = _reference(*arrays, dtype="float32", extra_ops=5)
    assert _within(y, ref, _bnh(tol)) and _within(Sf, S, state_tol)
    _, _, tol64, _ = _reference(*arrays, dtype="float64", extra_ops=5)
    assert not _within(y, ref, _bnh(tol64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prefill_by_the_scan_then_decoding_steps_is_one_gated_attention(dtype):
    """The scan over 13 tokens hands its final state to 7 single-token steps (generation)."""
    rng = np.random.default_rng(5)
    arrays = _inputs(rng, n=20)
    x, dt, a, b, c, S0 = arrays
    tdt = getattr(torch, dtype)
    cut = 13
    y1, S1 = _scan(*(v[:, :cut] for v in (x, dt)), a, *(v[:, :cut] for v in (b, c)), S0, tdt)
    tail = (x[:, cut:], dt[:, cut:], a, b[:, cut:], c[:, cut:])
    y2, S2 = _steps(*tail, S1, tdt)
    ref, S, tol, state_tol = _reference(*arrays, dtype="float32", extra_ops=1)
    y = np.concatenate([y1, y2], axis=1)
    assert _within(y, ref, _bnh(tol)), float((np.abs(y - ref) / _bnh(tol)).max())
    assert _within(S2, S, state_tol)
    late = np.concatenate([dt[:, cut - 1 : cut], dt[:, cut:-1]], axis=1)  # dt one token late
    y_bad, _ = _steps(x[:, cut:], late, a, b[:, cut:], c[:, cut:], S1, tdt)
    assert not _within(y_bad, ref[:, cut:], _bnh(tol)[:, cut:])
    if dtype == "float64":  # the step's decay is rounded to float32: the float64 model refuses
        _, _, tol64, _ = _reference(*arrays, dtype="float64", extra_ops=1)
        y64, _ = _steps(x, dt, a, b, c, S0, tdt)
        assert not _within(y64, ref, _bnh(tol64))


def test_the_skip_connection_is_one_more_key_channel_with_gate_zero():
    """``+ D x_t``: a key channel ``D_h`` read by a query 1, its gate 0 (per-channel gates, C21).

    Keys ``[dt_j B_j, D_h]``, queries ``[C_t, 1]``, values ``x_j``, key gates
    ``[exp(dt_t A) 1, 0]``: the extra channel holds ``D_h x_t`` alone at
    token ``t``.  The skip dropped (``D=None``) is caught.
    """
    rng = np.random.default_rng(7)
    x, dt, a, b, c, S0 = _inputs(rng, n=18)
    skip = np.asarray(rng.uniform(0.5, 1.5, H), dtype=np.float32).astype(np.float64)
    ones = np.ones((Bt, H, 18, 1))
    q = np.concatenate([_heads(c), ones], axis=-1)
    k = np.concatenate(
        [_heads(b) * np.moveaxis(dt, 1, 2)[..., None], skip[:, None, None] * ones], -1
    )
    g = np.exp(np.moveaxis(dt * a, 1, 2))[..., None]
    gates = np.concatenate([np.repeat(g, N, axis=-1), 0 * ones], axis=-1)
    S0k = A.State(np.concatenate([np.swapaxes(S0, -1, -2), np.zeros((Bt, H, 1, P))], axis=-2))
    V = np.moveaxis(x, 1, 2)
    ref = np.moveaxis(A.channel_gated_recurrent(q, k, V, gates, initial_state=S0k), 2, 1)
    kw = {"initial_state": S0k, "extra_ops": 1}
    tol = _bnh(
        A.channel_gated_error_bound(q, k, V, gates, dtype="float32", **kw)
        + A.channel_gated_error_bound(q, k, V, gates, **kw)
    )
    args = _torch(x, dt, a, b, c, dtype=torch.float32)
    y = SCAN(*args, chunk_size=4, D=torch.tensor(skip, dtype=torch.float32),
             initial_states=torch.tensor(S0, dtype=torch.float32))  # fmt: skip
    assert _within(y.double().numpy(), ref, tol), float((np.abs(y.numpy() - ref) / tol).max())
    y = SCAN(*args, chunk_size=4, initial_states=torch.tensor(S0, dtype=torch.float32))
    assert not _within(y.double().numpy(), ref, tol)


class _LateGradient(torch.autograd.Function):
    """The identity whose backward hands each token the gradient of the token after it
    (a backward that indexes the time steps one off)."""

    @staticmethod
    def forward(ctx, dt):
        return dt.view_as(dt)

    @staticmethod
    def backward(ctx, grad):
        return torch.cat([grad[:, 1:], torch.zeros_like(grad[:, :1])], dim=1)


def _dt_gradient(x, dt, a, b, c, S0, G, late=False):
    """The scan's gradients of ``<G, y>`` with respect to ``dt`` and ``A`` (float32, autograd)."""
    args = _torch(x, dt, a, b, c, dtype=torch.float32)
    tdt, ta = (args[i].requires_grad_() for i in (1, 2))
    if late:
        args[1] = _LateGradient.apply(tdt)
    y = SCAN(*args, chunk_size=4, initial_states=torch.tensor(S0, dtype=torch.float32))
    grads = torch.autograd.grad(y, (tdt, ta), torch.tensor(G, dtype=torch.float32))
    return tuple(g.double().numpy() for g in grads)


@pytest.mark.parametrize("seed", range(20))
def test_the_gradient_with_respect_to_dt_is_the_chain_rule_through_values_and_gates(seed):
    """``dt`` enters twice, as the values' factor ``dt x`` and the log gate ``dt A``:

        d/d dt_t = sum_p dV_tp x_tp + A d log g_t,    d/dA = sum_t dt_t d log g_t,

    with ``dV`` and ``d log g`` the gated reference VJP's.  The scan forms its
    log gates' cumulative sums (segment sums) and autograd returns ``d log g``
    as their reverse cumulative sum: its tolerance is the gated bound carried
    through that sum (as ``verify.attention`` judges a chunked layer's gate
    gradient), then through the two products and their sum (``gamma_(P+2)``
    each, float32).  A backward handing each token the next one's ``dt``
    gradient is caught.  Over the twenty seeds none fails (the largest error
    was 0.0016 of its tolerance) and the shifted gradient exceeds it at least
    500-fold.
    """
    from kernelcheck._src.core.rounding import gamma
    from kernelcheck._src.verify.attention.checks import through_cumulative_logs

    rng = np.random.default_rng(1000 + seed)
    x, dt, a, b, c, S0 = _inputs(rng, n=18)
    G = np.asarray(rng.standard_normal(x.shape), dtype=np.float32).astype(np.float64)
    q, k = _heads(c), _heads(b)
    xh, Gh = np.moveaxis(x, 1, 2), np.moveaxis(G, 1, 2)  # (b, H, n, P)
    V, g = xh * np.moveaxis(dt, 1, 2)[..., None], np.exp(np.moveaxis(dt * a, 1, 2))
    S0k = A.State(np.swapaxes(S0, -1, -2))
    ref = A.gated_vjp(q, k, V, g, Gh, initial_state=S0k)
    b32, b64 = (
        A.gated_vjp_error_bound(q, k, V, g, Gh, initial_state=S0k, dtype=dt_, extra_ops=1)
        for dt_ in ("float32", "float64")
    )
    tol_dV, tol_dlog = b32.dV + b64.dV, b32.dlog_gates + b64.dlog_gates
    tol_dlog = through_cumulative_logs(ref.dlog_gates, tol_dlog, "float32", axis=-1)
    ah = a[:, None]
    want = np.sum(ref.dV * xh, axis=-1) + ah * ref.dlog_gates  # (b, H, n)
    g_p = gamma(P + 2, "float32")
    tol = np.sum(np.abs(xh) * (tol_dV * (1 + g_p) + g_p * np.abs(ref.dV)), axis=-1)
    tol = tol + np.abs(ah) * (tol_dlog * (1 + g_p) + g_p * np.abs(ref.dlog_gates))
    dth = np.moveaxis(dt, 1, 2)
    want_a = np.sum(dth * ref.dlog_gates, axis=(0, 2))  # (H,): A is shared by the batch
    g_n = gamma(dth.shape[-1] * Bt + 1, "float32")
    tol_a = np.sum(dth * (tol_dlog * (1 + g_n) + g_n * np.abs(ref.dlog_gates)), axis=(0, 2))
    want, tol = np.moveaxis(want, 2, 1), np.moveaxis(tol, 2, 1)  # (b, n, H), as dt
    got, got_a = _dt_gradient(x, dt, a, b, c, S0, G)
    assert _within(got, want, tol), float((np.abs(got - want) / tol).max())
    assert _within(got_a, want_a, tol_a), float((np.abs(got_a - want_a) / tol_a).max())
    late, _ = _dt_gradient(x, dt, a, b, c, S0, G, late=True)
    assert not _within(late, want, tol)
