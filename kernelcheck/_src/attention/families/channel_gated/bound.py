"""The a-priori error bound of the per-channel gated forms (claim C21)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelcheck._src.attention.common.bounds import (
    accumulation_model,
    log_decay_error,
    underflow_term,
)
from kernelcheck._src.attention.common.inputs import dtype_iv, state_matrix_iv
from kernelcheck._src.attention.common.types import State
from kernelcheck._src.attention.families.channel_gated.decays import (
    ChannelInputs,
    channel_inputs_iv,
)
from kernelcheck._src.attention.families.channel_gated.forms import channel_gated_chunked
from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.core.validate import as_bool, as_int
from kernelcheck.errors import InvalidArgument, NumericalFailure

__all__ = ["channel_gated_error_bound", "abs_log_sums", "terms_k", "decay_errors", "magnitude"]

#: Units of ``u`` from ``exp`` and the products of decay factors, per gate side.
DECAY_ULPS = 10.0


def terms_k(n: int, D: int) -> int:
    """Roundings per term of every per-channel gated form: ``3 n + D + 10`` (see the bound)."""
    return 3 * n + D + 10


def abs_log_sums(logs: np.ndarray | None) -> np.ndarray | None:
    """``|L_i| = sum_(l <= i) |log g_l|`` over the gates that are not 0, per token and channel."""
    if logs is None:
        return None
    finite = np.where(np.isneginf(logs), 0.0, logs).astype(np.float64)
    return -np.cumsum(finite, axis=-2)


def decay_errors(x: ChannelInputs, dt) -> tuple[Any, Any]:
    """``rho`` of the key side (max over key channels, shape (..., n, 1)) and the value side.

    In the accumulation precision of ``dt`` (the log sums are running sums);
    0 for a side without gates.
    """
    n = x.q.shape[-2]
    acc = accumulation_model(dt)
    steps = np.array([gamma(4 * (i + 1), acc) for i in range(n)])[:, None]
    La, Lb = abs_log_sums(x.la), abs_log_sums(x.lb)
    ra: Any = 0.0
    rb: Any = 0.0
    if La is not None:
        ra = log_decay_error(La.max(axis=-1, keepdims=True), n + 8, acc, DECAY_ULPS, steps)
    if Lb is not None:
        rb = log_decay_error(Lb, n + 8, acc, DECAY_ULPS, steps)
    return ra, rb


def magnitude(x: ChannelInputs, M0: np.ndarray | None) -> np.ndarray:
    """The exact sums of absolute values ``M``, from the chunked form in float64, inflated.

    All terms are non-negative, so the float64 sums are within a relative
    ``e = (1 + gamma_k)(1 + rho_a)(1 + rho_b) - 1`` of the exact ones and
    ``M_hat (1 + 2 e)`` bounds them (``inf`` where float64 overflows).
    """
    f = np.float64
    n, D = x.q.shape[-2], x.q.shape[-1]
    u = None if x.u is None else np.abs(x.u).astype(f)
    S0 = None if M0 is None else State(np.abs(M0).astype(f))
    a = None if x.a is None else x.a.astype(f)
    b = None if x.b is None else x.b.astype(f)
    try:
        aq, ak, av = (np.abs(y).astype(f) for y in (x.q, x.k, x.V))
        H = channel_gated_chunked(aq, ak, av, a, b, u, initial_state=S0)
    except NumericalFailure:
        return np.full(x.V.shape, np.inf)
    ra, rb = decay_errors(x, np.dtype(f))
    e = (1.0 + gamma(terms_k(n, D), f)) * (1.0 + ra) * (1.0 + rb) - 1.0
    return H * (1.0 + 2.0 * e)


def channel_gated_error_bound(
    phi_q: Any,
    phi_k: Any,
    V: Any,
    key_gates: Any = None,
    value_gates: Any = None,
    bonus: Any = None,
    *,
    causal: bool = True,
    normalize: bool = False,
    initial_state: Any = None,
    dtype: Any = None,
    extra_ops: int = 0,
) -> np.ndarray:
    """Entrywise a-priori rounding-error bound of the per-channel gated forms (claim C21).

    Every form computes ``y_im = sum_j sum_c q_ic k_jc v_jm Pa_ijc Pb_ijm``
    plus the handed-over state ``sum_c q_ic Pa_i0c S0_cm Pb_i0m`` (and, with
    a bonus, ``(sum_c q_ic u_c k_ic) v_im``), with decays
    ``Pa_ijc = prod_(l=j+1..i) a_lc`` in [0, 1] (to ``i - 1`` with a bonus),
    ``Pb`` likewise.  The gates are non-negative, so the sums of absolute
    values ``M_im`` (the same sums of ``|q|, |k|, |v|, |S0|, |u|``, decayed)
    bound every partial sum, and (Higham, ch. 3; ``gamma_k = k u / (1 - k u)``)

        |y_hat - y|_im <= ((1 + gamma_k)(1 + rho_a,i)(1 + rho_b,im) - 1) M_im + underflow,

    with:

    * ``k = 3 n + D + 10`` roundings per term in any of the forms: the
      recurrence ``3 n + D + 1`` (per token a decay on each side and the
      addition; the read-out ``D``), the chunked form
      ``3 n / c + c + D + 6 <= 3 n + D + 7`` for chunks of ``c`` tokens
      (two decays and one addition of the carried state per chunk; within
      the chunk a decay on each side, the ``c`` keys' sums, the read-out,
      the addition of the two parts), the parallel form ``n + D + 5``; the
      bonus term ``D + 3``;
      ``extra_ops`` more (feature maps, inputs rounded down);
    * ``rho_x,i = expm1(2 gamma_(n+8) |Lx_i| + gamma_(4 i)) + 10 u``: the
      relative error of the decays formed as ``exp`` of differences of
      cumulative log gates,
      ``|Lx_i| = sum_(l <= i) |log x_l|`` over the gates that are not 0 (the
      key side's largest over its channels).  Each ``log`` is within 2 ulp,
      the partial sums (of one sign) within ``gamma_n |L_i|``, a restart after
      a zero gate subtracts two of them (``u |L_i|``), the difference of two
      sums adds ``u |L_i|``: together within ``2 gamma_(n+8) |L_i|`` in the
      exponent.  ``exp`` is within 4 ulp: a decay is a product of at most
      ``i + 3`` of them on a side (the chunked form: from the key to its
      chunk's end as ``exp(lc_last) exp(-lc_j)``, one per chunk carried,
      one from the last chunk's start; a layer handed log gates may
      exponentiate each token's, as flash-linear-attention's recurrent
      references and kernels do), with one rounding of a product:
      ``gamma_(4 i) + 10 u``.  ``u`` and ``gamma`` here
      are those of the accumulation precision (the log sums are running
      sums; a 16-bit layer's storage roundings are per term, in ``k``);
    * underflow: decays and products below the normal range lose at most
      ``eta`` each, ``4 n D`` products per entry
      (:func:`~kernelcheck._src.attention.common.bounds.underflow_term`).

    ``M``: the chunked form on the absolute values in float64, inflated by
    twice its own relative error.  Inputs, gates, bonus, state taken as exact.

    Parameters
    ----------
    phi_q : array_like
        The query features, shape (..., n, D) (the queries for GLA, HGRN-2, RWKV-6).
    phi_k : array_like
        The key features, shape (..., n, D).
    V : array_like
        The values, shape (..., n, d_v).
    key_gates : array_like, default None
        ``a_t`` in [0, 1], broadcastable to (..., n, D) (its last axis D); None:
        no gates on the key channels.
    value_gates : array_like, default None
        ``b_t`` in [0, 1], broadcastable to (..., n, d_v) (its last axis d_v);
        None: no gates on the value channels.
    bonus : array_like, default None
        RWKV-6's ``u``, broadcastable to (..., D); None: the output reads ``S_t``.
    causal : bool, default True
        Must be True: the gates order the tokens.
    normalize : bool, default False
        Must be False: the family is unnormalised.
    initial_state : State, default None
        The handed-over state (None: zero).
    dtype : dtype or RoundingModel, default None
        The precision of the computation bounded (None: the inputs').
    extra_ops : int, default 0
        Additional roundings per term (feature maps, inputs cast down).

    Returns
    -------
    numpy.ndarray, shape (..., n, d_v)
        ``inf`` where float64 cannot form ``M``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck.attention import (channel_gated_chunked, channel_gated_error_bound,
    ...                                    channel_gated_recurrent)
    >>> rng = np.random.default_rng(3)
    >>> q, k = rng.random((2, 40, 4))
    >>> V, a = rng.normal(size=(40, 2)), rng.uniform(0.0, 1.0, size=(40, 4))
    >>> err = np.abs(channel_gated_chunked(q, k, V, a) - channel_gated_recurrent(q, k, V, a))
    >>> bool((err <= 2 * channel_gated_error_bound(q, k, V, a)).all())
    True
    """
    if not as_bool(causal, "causal"):
        raise InvalidArgument("`causal` must be True: per-channel gates order the tokens (C21)")
    x = channel_inputs_iv(phi_q, phi_k, V, key_gates, value_gates, bonus, normalize)
    dt = dtype_iv(dtype, x.V.dtype)
    extra_ops = as_int(extra_ops, "extra_ops", minimum=0)
    M0 = state_matrix_iv(initial_state, x.q, x.V, False, True)
    n, D = x.q.shape[-2], x.q.shape[-1]
    M = magnitude(x, M0)
    ra, rb = decay_errors(x, dt)
    rel = (1.0 + gamma(terms_k(n, D) + extra_ops, dt)) * (1.0 + ra) * (1.0 + rb) - 1.0
    factors = [np.abs(y).astype(np.float64) for y in (x.q, x.k, x.V)]
    factors += [np.abs(y).astype(np.float64) for y in (M0, x.u) if y is not None]
    with np.errstate(over="ignore", invalid="ignore"):
        E = rel * M + underflow_term(4 * n * D, dt, *factors)
    return E * (1.0 + gamma(4, np.float64))
