"""How ``verify.attention`` meets a per-channel gated layer: reference, state, gradients (C21).

The bug shapes of the diagnosis are modelled on real reports:

* gates indexed one token off: RWKV-6 reads the state before decaying it by
  ``w_t`` while GLA decays by ``g_t`` before adding ``k_t v_t^T``
  (flash-linear-attention's ``naive_recurrent_rwkv6`` and
  ``naive_recurrent_gla``), so a port of one convention to the other moves
  every gate by a token or puts it after the update (the ordering of the
  decay and the update asked about in fla-org/flash-linear-attention#885);
* gates on the wrong axis: a key-channel gate applied to the value channels
  (the ``gv`` path of fla-org/flash-linear-attention#623 swapped the roles of
  the key and value axes; a cumulative sum taken over the wrong axis in
  fla-org/flash-linear-attention#594 and #850);
* the bonus dropped, or the state read after the update (GLA's read-out kept
  for RWKV-6): fla's RWKV-6 and GLA references differ exactly by ``u`` and
  by reading ``S_(t-1)``; no public report of a dropped ``u`` was found;
* a partial last chunk decayed as a full one: padded steps whose gates still
  decay the state (fla-org/flash-linear-attention#1272), the block-end decay
  read at the wrong row (flashinfer-ai/flashinfer#4311, and the chunk's last
  live token in fla-org/flash-linear-attention#1142);
* a cached state ignored: the chunked path of a cached multi-token forward
  passed ``initial_state=None`` (huggingface/transformers#45513, for
  Qwen3.5's and eight other models' linear layers; vllm-project/vllm#22034
  dropped the initial states of a batch of one);
* a state in the other layout: key-major ``[K, V]`` read as value-major
  ``[V, K]`` (ROCm/aiter#4057; fla's ``state_v_first``,
  fla-org/flash-linear-attention#905).
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.attention.common.bounds import accumulation_model, underflow_term
from kernelcheck._src.attention.common.spec import FeatureSpec, TokenInput
from kernelcheck._src.attention.common.types import State
from kernelcheck._src.attention.families.channel_gated.bound import (
    DECAY_ULPS,
    decay_errors,
    terms_k,
)
from kernelcheck._src.attention.families.channel_gated.decays import (
    bonus_values_iv,
    channel_inputs_iv,
    gate_values_iv,
)
from kernelcheck._src.attention.families.channel_gated.forms import channel_gated_chunked
from kernelcheck._src.attention.families.channel_gated.vjp import channel_gated_vjp_with_bounds
from kernelcheck._src.core.rounding import gamma, unit_roundoff

__all__ = ["ChannelGatedSpec", "KEY_GATES", "VALUE_GATES", "BONUS"]


def _gates(value, shape, name):
    return gate_values_iv(value, shape, np.dtype(np.float64), name)


def _bonus(value, shape, name):
    return bonus_values_iv(value, shape, np.dtype(np.float64), name)


def _sample_gates(rng, shape):
    return rng.uniform(0.9, 1.0, size=shape)


def _sample_bonus(rng, shape):
    return rng.standard_normal(shape)


def _stress_gates(rng, shape):
    """Per-channel gates near 0 (decays below the normal range within a few tokens), near
    1 (1 - 1e-6: decays that round to 1 in 16 bits), and exactly 0 at a fifth of the
    entries (resets of those channels; handed as logarithms, -inf)."""
    reset = np.where(rng.random(shape) < 0.2, 0.0, rng.uniform(0.5, 1.0, size=shape))
    return {
        "gates near 0": rng.uniform(1e-6, 1e-3, size=shape),
        "gates near 1": 1.0 - rng.uniform(0.0, 1e-6, size=shape),
        "gates exactly 0": reset,
    }


#: The gates on the key channels ``a_t`` in [0, 1]^D (0 resets), supplied by ``key_decay=``.
KEY_GATES = TokenInput(
    "key_gates", "key_decay", _gates, width="D", sample=_sample_gates, loggable=True,
    stress=_stress_gates,
)  # fmt: skip
#: The gates on the value channels ``b_t`` in [0, 1]^d_v, supplied by ``value_decay=``.
VALUE_GATES = TokenInput(
    "value_gates", "value_decay", _gates, width="d_v", sample=_sample_gates, loggable=True,
    stress=_stress_gates,
)  # fmt: skip
#: RWKV-6's bonus ``u``, one vector per head, supplied by ``bonus=``.
BONUS = TokenInput("bonus", "bonus", _bonus, width="D", sample=_sample_bonus, per_token=False)

_NAMES = {"key_gates": "dlog key_gates", "value_gates": "dlog value_gates", "bonus": "d bonus"}


class ChannelGatedSpec(FeatureSpec):
    """Per-channel gated linear attention, ``S_t = Diag(a_t) S_(t-1) Diag(b_t) + k_t v_t^T`` (C21).

    Unnormalised (``normalize`` is False whatever the call says); the
    feature map is the identity unless one is given (GLA, HGRN-2 and RWKV-6
    feed ``q``, ``k`` as they are).
    """

    state_form = "channel_gated_chunked"

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Positive features, Gaussian values, gates in (0.9, 1) on both sides, a Gaussian bonus."""
        pq, pk, V = super().example_arguments(rng, n, d, D, d_v, batch)
        a = _sample_gates(rng, (*batch, n, D))
        b = _sample_gates(rng, (*batch, n, d_v))
        return pq, pk, V, a, b, _sample_bonus(rng, (*batch, D))

    normalizes = (False,)  # GLA, HGRN-2 and RWKV-6 divide by no normaliser

    @property
    def normalize(self) -> bool:
        return False

    gradients = ("dQ", "dK", "dV")

    def describe(self) -> str:
        return (
            f"per-channel gated linear attention (unnormalised) with feature map {self.maps_text()}"
        )

    def extra_ops(self, d: int) -> int:
        return 0 if self.identity_maps() else super().extra_ops(d)

    def arguments(self, Q, K, V, extras) -> tuple[tuple, dict]:
        pq, pk = self.features(Q, K)
        gates = tuple(extras.get(name) for name in ("key_gates", "value_gates", "bonus"))
        return (pq, pk, V) + gates, {}

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """As for linear attention, with the bonus term ``|q o u| . |k| |v|`` stored too."""
        stored, accumulated = super().largest_intermediates(args[:3], kw)
        if args[5] is not None:
            bonus = np.sum(np.abs(args[0] * args[5][..., None, :] * args[1]), axis=-1)
            stored = max(stored, float((bonus[..., None] * np.abs(args[2])).max()))
        return stored, accumulated

    # ----- the diagnosis -------------------------------------------------
    def scores(self, args, kw, *, swap: bool = False, scale=None):
        return None  # per-channel decays: no single weight matrix

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """Outputs of the bugs of the module docstring, from the same inputs."""
        q, k, V, a, b, u = args
        run = channel_gated_chunked
        ref = run(*args)
        out = {
            "outputs one position late (row i holds row i - 1's output)": _shifted(ref, 1),
            "outputs one position early (row i holds row i + 1's output)": _shifted(ref, -1),
        }
        if a is not None or b is not None:
            out["the gates ignored (no decay)"] = run(q, k, V, None, None, u)
            out["the previous token's gates (a_(t-1) used at step t)"] = run(
                q, k, V, _late(a), _late(b), u
            )
            ka = k if a is None else k * a
            vb = V if b is None else V * b
            out["one decay factor too many (the gates applied after the update)"] = run(
                q, ka, vb, a, b, u
            )
        if q.shape[-1] == V.shape[-1] and (a is None) != (b is None):
            out["gates on the wrong axis (key gates on the value channels, or the reverse)"] = run(
                q, k, V, b, a, u
            )
        if u is not None:
            out["the bonus dropped (u = 0)"] = run(q, k, V, a, b, np.zeros_like(u))
            out["the state read after the update (GLA's read-out, no bonus)"] = run(q, k, V, a, b)
        return out

    def state_bug_shapes(self, args, kw) -> dict:
        """Final states: a partial last chunk decayed as a full one; the state transposed."""
        q, k, V, a, b, u = args
        _, st = channel_gated_chunked(*args, return_state=True, **kw)
        S, n = st.S, q.shape[-2]
        out = {}
        for C in (16, 32, 64):
            pad = -n % C
            if pad and (a is not None or b is not None):
                fa = 1.0 if a is None else a[..., -1, :, None] ** pad
                fb = 1.0 if b is None else b[..., -1, None, :] ** pad
                label = f"a partial last chunk decayed as a full one of {C} tokens"
                out[label] = fa * S * fb
        if S.shape[-1] == S.shape[-2]:
            out["the state transposed (value-major [V, K] read as key-major [K, V])"] = np.swapaxes(
                S, -1, -2
            )
        return out

    def handover_bug_shapes(self, args, kw, state) -> dict:
        """Continuation outputs: the cached state ignored, or handed over transposed."""
        out = {"the cached state ignored (the continuation starts from a zero state)": (
            channel_gated_chunked(*args, **kw)
        )}  # fmt: skip
        S = np.asarray(state.S)
        if S.shape[-1] == S.shape[-2]:
            swapped = State(np.swapaxes(S, -1, -2))
            out["the cached state handed over transposed"] = channel_gated_chunked(
                *args, initial_state=swapped, **kw
            )
        return out

    # ----- the state -------------------------------------------------------
    def state_arguments(self, args) -> tuple:
        return args[:6]

    def state_bound(self, args, model, n: int) -> np.ndarray:
        """Bound on the rounding of ``S`` after ``n`` tokens, in the layer's model and float64.

        Every entry is a sum of decayed terms ``Pa k v Pb`` (decays in [0, 1])
        through at most ``k = 3 n + D + 10`` roundings and the decays'
        ``rho`` of :func:`~kernelcheck.attention.channel_gated_error_bound`;
        the same sums of absolute values (the chunked form's final state on
        ``|k|``, ``|v|``, in float64, inflated by twice their own error) bound
        every partial sum; gradual underflow adds ``eta`` per product, as in
        the output's bound.  Given the three leading arrays alone (no gates),
        the undecayed sums bound the decayed ones, and a decay ``d`` with its
        relative error ``rho(|L|)`` adds at most ``d rho <= gamma_(4n) + 10 u +
        2 gamma_(n+8)`` (``e^(-L) expm1(2 gamma L) <= 2 gamma`` for ``L >= 0``).
        """
        x = _inputs(args)
        D = x.q.shape[-1]
        f = np.float64
        a = None if x.a is None else x.a.astype(f)
        b = None if x.b is None else x.b.astype(f)
        absq = np.zeros_like(x.k, dtype=f)
        _, st = channel_gated_chunked(
            absq, np.abs(x.k).astype(f), np.abs(x.V).astype(f), a, b, return_state=True
        )
        total, under = 0.0, 0.0
        factors = [np.abs(y).astype(f) for y in (x.k, x.V)]
        for dt in (model, np.dtype(f)):
            if len(args) >= 5:
                ra, rb = decay_errors(x, dt)
                ra = float(np.max(ra, initial=0.0))
                rb = float(np.max(rb, initial=0.0))
            else:  # gates unknown: see the docstring
                acc = accumulation_model(dt)
                ra = rb = (
                    gamma(4 * n, acc) + DECAY_ULPS * unit_roundoff(acc) + 2 * gamma(n + 8, acc)
                )
            total += (1.0 + gamma(terms_k(n, D), dt)) * (1.0 + ra) * (1.0 + rb) - 1.0
            under += underflow_term(4 * n * D, dt, *factors)
        g64 = (1.0 + gamma(terms_k(n, D), f)) * (1.0 + _largest_rho(x)) - 1.0
        return total * st.S * (1.0 + 2.0 * g64) + under

    def propagate(self, args, E0, extras, normalize: bool, ref, den) -> np.ndarray:
        """Effect on each output of an error ``E0`` (matrix ``S``) in the state handed in.

        The state's error reaches output ``i`` through ``|phi(q_i)|`` and the
        decays since the hand-over, on both sides: the chunked form on
        ``|phi(q)|`` with no keys, the same gates, and ``E0`` as its state.
        """
        x = _inputs(args, extras)
        zeros_k, zeros_v = np.zeros(x.k.shape), np.zeros(x.V.shape)
        u = None if x.u is None else np.zeros(x.u.shape)
        return channel_gated_chunked(
            np.abs(x.q).astype(np.float64), zeros_k, zeros_v, x.a, x.b, u,
            initial_state=State(np.abs(E0)),
        )  # fmt: skip

    # ----- the gradients -----------------------------------------------------
    def vjp(self, args, kw, Q, K, V, G, model):
        """:func:`~kernelcheck.attention.channel_gated_vjp`: dQ, dK (by the features), dV, and
        the gradients of the per-token inputs given: ``d log a`` (index 3), ``d log b`` (4), the
        bonus's (5), each by its position among the family's per-token inputs."""
        models = ((model, self.extra_ops(Q.shape[-1])), (None, 0))
        ref, (b, b64) = channel_gated_vjp_with_bounds(*args, G, models=models)
        out = self.feature_vjp(ref, b, b64)
        for i, name in enumerate(("key_gates", "value_gates", "bonus")):
            if ref[3 + i] is not None:
                out.append((_NAMES[name], 3 + i, ref[3 + i], b[3 + i] + b64[3 + i]))
        return out

    # ----- high precision ----------------------------------------------------
    @classmethod
    def exact_output(cls, args, kw, causal: bool = True) -> np.ndarray:
        """The defining recurrence in 50-digit arithmetic, inputs taken as exact binary numbers.

        ``S_t = Diag(a_t) S_(t-1) Diag(b_t) + k_t v_t^T``, read as ``S_t^T q_t``
        (or ``S_(t-1)^T q_t + ((q_t o u) . k_t) v_t``), from ``kw``'s
        ``initial_state``; the result rounded once to float64.  For small n.
        """
        import mpmath

        x = _inputs(args)
        st = kw.get("initial_state")
        batch = x.q.shape[:-2]
        out = np.empty(x.V.shape, dtype=np.float64)
        with mpmath.workdps(50):
            for idx in np.ndindex(*batch):
                S0 = None if st is None else np.broadcast_to(st.S, batch + st.S.shape[-2:])[idx]
                out[idx] = _exact_one(x, idx, S0)
        return out


def _inputs(args, extras=None):
    """The validated inputs of ``(phi_q, phi_k, V, a, b, u)``; gates from ``extras`` if given.

    ``args`` may hold the three leading arrays only (the gates then come from
    ``extras``, the per-token inputs by name, or are absent).
    """
    q, k, V, *rest = args
    a, b, u = (list(rest) + [None, None, None])[:3]
    if extras:
        a = extras.get("key_gates", a)
        b = extras.get("value_gates", b)
        u = extras.get("bonus", u)
    return channel_inputs_iv(q, k, V, a, b, u, False)


def _shifted(Y: np.ndarray, by: int) -> np.ndarray:
    """Rows moved ``by`` tokens later (zeros where none arrive)."""
    out = np.zeros_like(Y)
    if by > 0:
        out[..., by:, :] = Y[..., :-by, :]
    else:
        out[..., :by, :] = Y[..., -by:, :]
    return out


def _late(g):
    """The gates one token late: ``g_(t-1)`` at step t, 1 at the first."""
    if g is None:
        return None
    return np.concatenate([np.ones_like(g[..., :1, :]), g[..., :-1, :]], axis=-2)


def _largest_rho(x) -> float:
    """The float64 decays' rho at the largest log sum of either side."""
    ra, rb = decay_errors(x, np.dtype(np.float64))
    return float(np.max(ra, initial=0.0)) + float(np.max(rb, initial=0.0))


def _exact_one(x, idx, S0) -> np.ndarray:
    """One sequence of the recurrence in mpmath (the working precision set by the caller)."""
    import mpmath

    def mp(A):
        return [[mpmath.mpf(float(v)) for v in row] for row in np.atleast_2d(A)]

    q, k, V = mp(x.q[idx]), mp(x.k[idx]), mp(x.V[idx])
    a = None if x.a is None else mp(x.a[idx])
    b = None if x.b is None else mp(x.b[idx])
    u = None if x.u is None else [mpmath.mpf(float(v)) for v in x.u[idx]]
    n, D, dv = len(q), len(q[0]), len(V[0])
    S = [[mpmath.mpf(0)] * dv for _ in range(D)] if S0 is None else mp(S0)
    out = np.empty((n, dv))
    for t in range(n):
        prev = [row[:] for row in S]
        for c in range(D):
            for m in range(dv):
                decay = (a[t][c] if a else 1) * (b[t][m] if b else 1)
                S[c][m] = decay * S[c][m] + k[t][c] * V[t][m]
        for m in range(dv):
            if u is None:
                val = mpmath.fsum(q[t][c] * S[c][m] for c in range(D))
            else:
                bonus = mpmath.fsum(q[t][c] * u[c] * k[t][c] for c in range(D))
                val = mpmath.fsum(q[t][c] * prev[c][m] for c in range(D)) + bonus * V[t][m]
            out[t, m] = float(val)
    return out
