"""flash-linear-attention's references of GLA, HGRN, HGRN-2, RWKV-6, simple GLA against C21's forms.

fla-core 0.6 ships pure-PyTorch references beside its Triton kernels; they
run on a CPU, loaded by path (its package imports Triton, which is not
installed here; the Triton kernels ``chunk_gla``, ``fused_recurrent_gla``,
``chunk_rwkv6`` need it and are not run).  fla-core 0.6 has no naive
chunked GLA.  Conventions read from the source:

* ``naive_recurrent_gla(q, k, v, gk, initial_state, output_final_state)``:
  layout (B, T, H, K), log gates ``gk`` per key channel, queries scaled by
  ``K ** -0.5``, state (B, H, K, V): ``S_t = exp(gk_t) S_(t-1) + k_t v_t^T``,
  then read;
* ``naive_recurrent_rwkv6(q, k, v, w, u, scale, ...)`` and
  ``naive_chunk_rwkv6(q, k, v, w, u, chunk_size)``: layout (B, H, T, K), log
  decays ``w``, bonus ``u`` of shape (H, K); the output reads
  ``S_(t-1)`` plus the bonus, then the state decays; the chunked one takes no
  scale and needs T a multiple of its chunk size;
* ``naive_recurrent_hgrn(x, g, ...)``: ``h_t = exp(g_t) h_(t-1) + x_t``, the
  output ``h_t``: the value-gated form with ``D = 1`` and ``phi = 1``;
  ``naive_chunk_hgrn`` runs only when T equals its chunk size (it views the
  log gates as one chunk);
* HGRN-2: the GLA recurrence with keys ``1 - f_t`` tied to the forget gate
  ``f_t`` (its layer calls the GLA operators);
* simple GLA: one gate per token and head, ``a_t = g_t 1``.

All of them compute in float32 whatever their input (``.float()``), so each
is judged in float32's model: the inputs are drawn exact in float32, and the
tolerance is the bound in float32 plus the float64 reference's own.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention as A
from kernelcheck._src.attention.common.spec import SpecOptions
from kernelcheck._src.attention.families.channel_gated.vjp import channel_gated_vjp_with_bounds
from kernelcheck._src.attention.registry import get_family
from tests.fla_naive import load

torch = pytest.importorskip("torch")
pytest.importorskip("einops")

RNG = np.random.default_rng(621)
B, H, T, K, DV = 2, 2, 48, 4, 3
F32 = np.dtype("float32")


def _f32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def _bthk(x):
    """(B, H, T, .) <-> (B, T, H, .) (fla's GLA layout), as a torch tensor or back to NumPy."""
    if isinstance(x, np.ndarray):
        return torch.tensor(np.swapaxes(x, 1, 2))
    return np.swapaxes(x.detach().double().numpy(), 1, 2)


def _tol(*args, **kw):
    """The bound in float32 (the references' precision) plus the float64 reference's own."""
    return A.channel_gated_error_bound(*args, dtype="float32", **kw) + A.channel_gated_error_bound(
        *args, **kw
    )


def _inputs(n=T, low=0.8):
    q, k = _f32(RNG.normal(size=(2, B, H, n, K)))
    V = _f32(RNG.normal(size=(B, H, n, DV)))
    logs = _f32(np.log(RNG.uniform(low, 1.0, (B, H, n, K))))
    return q, k, V, logs


def _state_tol(q, k, V, a, n):
    """The spec's state bound in float32 and float64 (no handed-over state)."""
    spec = get_family("channel_gated").spec(SpecOptions(causal=True))
    return spec.state_bound((q, k, V, a, None, None), F32, n)


def test_fla_gla_outputs_and_final_state_within_the_bound():
    q, k, V, logs = _inputs()
    h0 = _f32(RNG.normal(size=(B, H, K, DV)))
    fla = load("gla")
    o, ht = fla.naive_recurrent_gla(
        *(_bthk(x) for x in (q, k, V, logs)), initial_state=torch.tensor(h0),
        output_final_state=True,
    )  # fmt: skip
    a, qs = np.exp(logs), q * K**-0.5  # the scale is a power of two: exact
    ref = A.channel_gated_recurrent(qs, k, V, a, initial_state=A.State(h0))
    assert (np.abs(_bthk(o) - ref) <= _tol(qs, k, V, a, initial_state=A.State(h0))).all()
    _, hn = fla.naive_recurrent_gla(*(_bthk(x) for x in (q, k, V, logs)), output_final_state=True)
    _, st = A.channel_gated_chunked(qs, k, V, a, return_state=True)
    assert (np.abs(hn.double().numpy() - st.S) <= _state_tol(qs, k, V, a, T)).all()


def test_fla_gla_with_its_gates_one_token_late_is_caught():
    """A GLA whose step t decays by the gates of token t - 1 (the RWKV-6 / GLA convention mixed)."""
    q, k, V, logs = _inputs(low=0.3)
    late = np.concatenate([np.zeros_like(logs[..., :1, :]), logs[..., :-1, :]], axis=-2)
    o, _ = load("gla").naive_recurrent_gla(*(_bthk(x) for x in (q, k, V, late)))
    qs, a = q * K**-0.5, np.exp(logs)
    assert not (np.abs(_bthk(o) - A.channel_gated_chunked(qs, k, V, a)) <= _tol(qs, k, V, a)).all()


def test_fla_hgrn2_is_gla_with_keys_tied_to_the_forget_gate():
    q, _, V, logs = _inputs()
    k = _f32(1.0 - np.exp(logs))  # HGRN-2's input gate 1 - f_t
    o, _ = load("gla").naive_recurrent_gla(*(_bthk(x) for x in (q, k, V, logs)))
    qs, a = q * K**-0.5, np.exp(logs)
    assert (np.abs(_bthk(o) - A.channel_gated_parallel(qs, k, V, a)) <= _tol(qs, k, V, a)).all()


@pytest.mark.parametrize("name", ["naive_recurrent_rwkv6", "naive_chunk_rwkv6"])
def test_fla_rwkv6_within_the_bound_and_its_bonus_dropped_is_caught(name):
    q, k, V, logs = _inputs(n=64)
    u = _f32(RNG.normal(size=(H, K)))
    fla = load("rwkv6", "recurrent_naive.py" if "recurrent" in name else "chunk_naive.py")
    kw = {"chunk_size": 32} if "chunk" in name else {"scale": 1.0}
    args = [torch.tensor(x) for x in (q, k, V, logs)]
    out = getattr(fla, name)(*args, torch.tensor(u), **kw)
    got = (out[0] if isinstance(out, tuple) else out).double().numpy()
    a = np.exp(logs)
    ref = A.channel_gated_chunked(q, k, V, a, None, u, chunk_size=16)
    tol = _tol(q, k, V, a, None, u)
    assert (np.abs(got - ref) <= tol).all()
    dropped = getattr(fla, name)(*args, torch.zeros(H, K), **kw)
    dropped = (dropped[0] if isinstance(dropped, tuple) else dropped).double().numpy()
    assert not (np.abs(dropped - ref) <= tol).all()


def test_fla_rwkv6_final_state_and_a_state_handed_over():
    q, k, V, logs = _inputs()
    u = _f32(RNG.normal(size=(H, K)))
    fla = load("rwkv6", "recurrent_naive.py")
    a, cut = np.exp(logs), T // 3
    t = [torch.tensor(x) for x in (q, k, V, logs)]
    _, h1 = fla.naive_recurrent_rwkv6(
        *(x[:, :, :cut] for x in t), torch.tensor(u), scale=1.0, output_final_state=True
    )
    o2, h2 = fla.naive_recurrent_rwkv6(
        *(x[:, :, cut:] for x in t), torch.tensor(u), scale=1.0, initial_state=h1,
        output_final_state=True,
    )  # fmt: skip
    one, st = A.channel_gated_recurrent(q, k, V, a, None, u, return_state=True)
    assert (
        np.abs(o2.double().numpy() - one[:, :, cut:]) <= _tol(q, k, V, a, None, u)[:, :, cut:]
    ).all()
    assert (np.abs(h2.double().numpy() - st.S) <= _state_tol(q, k, V, a, T)).all()


@pytest.mark.parametrize("name, n", [("naive_recurrent_hgrn", 50), ("naive_chunk_hgrn", 64)])
def test_fla_hgrn_is_the_value_gated_form_with_one_key_channel(name, n):
    x = _f32(RNG.normal(size=(B, n, 5)))
    g = _f32(np.log(RNG.uniform(0.3, 1.0, (B, n, 5))))
    kw = {"chunk_size": n} if "chunk" in name else {}
    o, _ = getattr(load("hgrn"), name)(torch.tensor(x), torch.tensor(g), **kw)
    ones = np.ones((B, n, 1))
    ref = A.channel_gated_chunked(ones, ones, x, None, np.exp(g), chunk_size=7)
    assert (np.abs(o.double().numpy() - ref) <= _tol(ones, ones, x, None, np.exp(g))).all()


@pytest.mark.parametrize("name", ["naive_recurrent_simple_gla", "naive_chunk_simple_gla"])
def test_fla_simple_gla_is_one_gate_on_every_key_channel(name):
    q, k, V, logs = _inputs()
    g = logs[..., 0]  # one log gate per token and head
    o = getattr(load("simple_gla"), name)(*(_bthk(x) for x in (q, k, V)), _bthk(g), scale=1.0)[0]
    a = np.repeat(np.exp(g)[..., None], K, axis=-1)
    assert (np.abs(_bthk(o) - A.channel_gated_recurrent(q, k, V, a)) <= _tol(q, k, V, a)).all()


def _torch_grads(fn, arrays, G):
    ts = [torch.tensor(x, requires_grad=True) for x in arrays]
    out = fn(*ts)
    out = out[0] if isinstance(out, tuple) else out
    out.backward(torch.tensor(G).to(out.dtype))
    return [t.grad.double().numpy() for t in ts]


@pytest.mark.parametrize("plant", [0.0, 1e-3])
def test_fla_gla_and_rwkv6_gradients_within_the_vjp_bound(plant):
    """Autograd through fla's float32 references: dq, dk, dv, d log gates (and du) within the
    float32 bound plus the float64 reference's; 1e-3 more, each is outside."""
    q, k, V, logs = _inputs(n=24)
    G = _f32(RNG.normal(size=V.shape))
    u = _f32(RNG.normal(size=(H, K)))
    a, qs = np.exp(logs), q * K**-0.5
    gla = load("gla")

    def gla_fn(*ts):
        return gla.naive_recurrent_gla(*(t.transpose(1, 2) for t in ts))[0].transpose(1, 2)

    rw = load("rwkv6", "recurrent_naive.py")
    cases = [
        (gla_fn, (q, k, V, logs), (qs, k, V, a, None, None), K**-0.5),
        (lambda *ts: rw.naive_recurrent_rwkv6(*ts, scale=1.0), (q, k, V, logs, u),
         (q, k, V, a, None, u), 1.0),
    ]  # fmt: skip
    for fn, arrays, args, s in cases:
        got = [x * (1 + plant) for x in _torch_grads(fn, arrays, G)]
        ref, (b32, b64) = channel_gated_vjp_with_bounds(*args, G, models=((F32, 0), (None, 0)))
        want = [ref.dphi_q * s, ref.dphi_k, ref.dV, ref.dlog_key_gates]
        tols = [(b32.dphi_q + b64.dphi_q) * s, b32.dphi_k + b64.dphi_k, b32.dV + b64.dV,
                b32.dlog_key_gates + b64.dlog_key_gates]  # fmt: skip
        if args[5] is not None:
            want.append(ref.dbonus.sum(axis=0))  # u is shared by the batch
            tols.append((b32.dbonus + b64.dbonus).sum(axis=0))
        for x, w, t in zip(got, want, tols, strict=True):
            assert bool((np.abs(x - w) <= t).all()) is (plant == 0.0)
