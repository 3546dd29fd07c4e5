"""How ``verify.attention`` meets a layer of the delta rule and its kin (claims C22-C24).

The four families of transitions (delta rule, Gated DeltaNet, Kimi Delta
Attention, diagonal-plus-rank-one) share how their reference is built and
judged: queries and keys through the optional feature map (the identity by
default), L2-normalised inside the reference when the layer says it does so
(``qk_l2norm``), the queries scaled by ``scale`` (default 1: a layer that
scales its queries says ``scale=``); no normaliser, no weight matrix (the
diagnosis tries the family's own bug shapes); the state ``S`` alone, its
rounding bounded normwise (:mod:`~kernelcheck._src.attention.common.transition_bound`),
and ``inf`` tolerances (transitions that expand) turned into a case that is
not judged.  Each family's ``reference.py`` subclasses :class:`TransitionSpec`
with its forms, per-token inputs, canonical transitions and bug shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from kernelcheck._src.attention.common import transitions as tr
from kernelcheck._src.attention.common.inputs import dtype_iv, token_values_iv
from kernelcheck._src.attention.common.spec import (
    FamilySpec,
    SpecOptions,
    TokenInput,
    callable_name,
)
from kernelcheck._src.attention.common.transition_bound import (
    exact_norms,
    family_bounds,
    magnitudes,
)
from kernelcheck._src.attention.common.vjp import cotangent
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.core.validate import as_array, as_bool, describe
from kernelcheck.errors import InvalidArgument

__all__ = [
    "TRANSITION_FLAGS",
    "TransitionSpec",
    "token_input",
    "NOT_JUDGED",
    "family_vjp",
    "vjp_call",
    "delta_bug_shapes",
]

#: The ``verify.attention`` flags of the transition families, each with its validator: keys
#: and queries L2-normalised inside the layer (a bool), and the longest chunk the layer
#: computes at once (an int >= 1; see :attr:`TransitionSpec.layer_chunk`).
TRANSITION_FLAGS: Mapping[str, Callable[[Any, str], Any]] = MappingProxyType(
    {"qk_l2norm": as_bool, "layer_chunk": tr.delta_chunk_iv}
)

#: The reason of a case whose tolerance is infinite (the a-priori model bounds nothing there).
NOT_JUDGED = (
    "not judged: the normwise model (C24) leaves no finite bound here in this precision "
    "(the transitions expand, or the model cannot certify that the roundings stay "
    "below order one)"
)


def token_input(name: str, option: str, limits: tr.TokenLimits, width: str, sample, **kw):
    """A :class:`TokenInput` whose values are checked against ``limits`` (float64, broadcast)."""

    def validate(value, shape, label):
        low, high = limits.low, limits.high
        return token_values_iv(
            value, shape, np.dtype(np.float64), label, low=low, high=high, what=limits.what
        )

    validate.__doc__ = f"``{option}``: {limits.what}."
    return TokenInput(name, option, validate, width=width, sample=sample, **kw)


def _phi(which: Callable | None, X: np.ndarray, name: str) -> np.ndarray:
    """``which(X)`` row by row in float64 (the identity when no map is given), checked."""
    if which is None:
        return np.asarray(X, dtype=np.float64)
    flat = X.reshape(-1, X.shape[-1])
    P = as_array(call_user(which, f"`feature_map` ({name})", flat), f"feature_map({name})",
                 dtype=np.float64)  # fmt: skip
    if P.ndim != 2 or P.shape[0] != flat.shape[0]:
        raise InvalidArgument(
            f"`feature_map` must return an array of shape (n, D) for input of shape "
            f"(n, d), got {describe(P)} for {flat.shape}"
        )
    return P.reshape(X.shape[:-1] + (P.shape[1],))


class TransitionSpec(FamilySpec):
    """The specification shared by the families of transitions (subclassed per family).

    Subclasses set :attr:`family` (its name in words), :attr:`forms` (the
    module of its forms), :attr:`tokens` (the names of its per-token inputs,
    in the layer's argument order), and implement :meth:`transitions`
    (canonical arrays from the arguments) and :meth:`step` (the raw step of
    the reference loop, for the exact output and the bug shapes).
    """

    has_state = True
    #: The family in words.
    family = ""
    #: The names of the per-token inputs after ``V`` (the forms' positional order).
    tokens: tuple[str, ...] = ()
    #: For each per-token input, whether it has one value per key channel.
    channels: tuple[bool, ...] = ()
    #: How each per-token input is checked (the forms' :class:`TokenLimits`).
    limits: tuple[tr.TokenLimits, ...] = ()
    #: The family's canonical transitions, ``canonical(x, *tokens) -> Transitions``.
    canonical: Callable[..., tr.Transitions]
    #: The canonical arrays as products of the inputs (the chain rule of the gradients).
    fields: tuple = ()
    #: The family's raw step ``step(S, q, k, v, *tokens) -> (S, y)`` (see the engine).
    raw_step: Callable[..., tuple] = staticmethod(tr.delta_step)
    gradients_not_checked = (
        "a feature map's Jacobian is the layer's own: dQ and dK are checked with the identity map"
    )

    @property
    def normalize(self) -> bool:
        return False

    @property
    def l2norm(self) -> bool:
        """Whether the layer L2-normalises its queries and keys (the flag ``qk_l2norm``)."""
        return bool(self.options.flags.get("qk_l2norm", False))

    def scale_for(self, D: int) -> float:
        """The queries' scale: ``scale=`` (a number or a function of D), default 1."""
        s = self.options.scale
        return 1.0 if s is None else float(s(D) if callable(s) else s)

    def describe(self) -> str:
        maps = "identity" if self.options.phi_q is None else callable_name(self.options.phi_q)
        if self.options.phi_k is not self.options.phi_q:
            maps = f"({maps}, {callable_name(self.options.phi_k)})"
        norm = ", queries and keys L2-normalised in the layer" if self.l2norm else ""
        return f"{self.family} with feature map {maps}{norm}"

    def sizes(self, d: int, d_v: int) -> dict[str, int]:
        D = _phi(self.options.phi_q, np.zeros((1, d)), "Q").shape[-1]
        return {"d": d, "D": D, "d_v": d_v}

    def arguments(self, Q, K, V, extras: Mapping[str, np.ndarray]) -> tuple[tuple, dict]:
        pq = _phi(self.options.phi_q, Q, "Q")
        pk = _phi(self.options.phi_k, K, "K")
        if pq.shape != pk.shape:
            raise InvalidArgument(
                f"the feature maps give queries {pq.shape} and keys {pk.shape}: they must agree"
            )
        tokens = tuple(self.token_value(name, extras, pq) for name in self.tokens)
        kw = {"qk_l2norm": self.l2norm, "scale": self.scale_for(pq.shape[-1])}
        return (pq, pk, np.asarray(V, dtype=np.float64)) + tokens, kw

    @property
    def gradients(self) -> tuple[str, ...]:  # type: ignore[override]
        """dQ and dK (with the identity map), dV and every per-token input's gradient."""
        identity = self.options.phi_q is None and self.options.phi_k is None
        own = tuple(f"d{name}" for name in self.tokens)
        return (("dQ", "dK") if identity else ()) + ("dV",) + own

    def vjp(self, args, kw, Q, K, V, G, model) -> list:
        """The reference gradients and their tolerances (the model's bound plus float64's).

        Indices follow the layer's ``(dQ, dK, dV, *per-token gradients)`` in
        the family's token order; a gate's gradient is with respect to its
        logarithm (``g dL/dg``), as for every loggable input (``verify.attention``
        divides by ``g`` for a layer handed the gates themselves).
        """
        grads, (bound,) = family_vjp(self, args, kw, G, models=((model, 0),))
        names = ("q", "k", "v") + tuple(lim.name for lim in self.limits)
        labels = ("dQ", "dK", "dV") + tuple(f"d{name}" for name in self.tokens)
        out = []
        for index, (name, label) in enumerate(zip(names, labels, strict=True)):
            if label not in self.gradients:
                continue
            ref, tol = grads[name], bound[name]
            if name == "gates":
                value = np.asarray(args[index], dtype=np.float64)
                ref, tol = value * ref, value * tol
            out.append((label, index, ref, tol))
        return out

    def token_value(self, name: str, extras, pq) -> np.ndarray:
        """The per-token input ``name`` from the case's ``extras`` (subclasses fill defaults)."""
        return extras[name]

    # ----- the model ---------------------------------------------------------------
    def inputs(self, args, kw) -> tr.FormInputs:
        """The validated float64 inputs of the arguments (normalised and scaled as in kw)."""
        l2, scale, S0 = kw.get("qk_l2norm", False), kw.get("scale", 1.0), kw.get("initial_state")
        return tr.form_inputs_iv(args[0], args[1], args[2], S0, False, l2, scale, np.float64)

    def transitions(self, x: tr.FormInputs, tokens) -> tr.Transitions:
        """The family's canonical transitions (see the engine), the per-token inputs checked."""
        return self.canonical(x, *tr.tokens_iv(x, tokens, self.limits))

    @classmethod
    def exact_output(cls, args, kw, causal: bool = True) -> np.ndarray:
        """The family's recurrence in 50-digit arithmetic, the inputs taken as exact numbers.

        ``args`` are the forms' positional arguments, ``kw`` their options
        (``qk_l2norm``, ``scale``, ``initial_state``); small inputs only.
        """
        q, v = args[0], args[2]
        tokens = tuple(
            np.broadcast_to(t, q.shape if ch else q.shape[:-1])
            for t, ch in zip(args[3:], cls.channels, strict=True)
        )
        zeros = np.zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1]))
        state = kw.get("initial_state")
        S0 = zeros if state is None else np.broadcast_to(state.S, zeros.shape)
        return tr.exact_steps(cls.raw_step, q, args[1], v, tokens, S0,
                              qk_l2norm=kw.get("qk_l2norm", False),
                              scale=kw.get("scale", 1.0))[0]  # fmt: skip

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """The inputs, outputs and pseudo-values stored; the state's columns accumulated.

        From the float64 reference loop: every state's column norms ``sigma_t``
        (each entry is at most its column's norm), the outputs
        ``|q_t| sigma_t``, the pseudo-values ``|v_t| + |r_t| sigma_(t-1)``.
        """
        x = self.inputs(args, kw)
        T = self.transitions(x, args[3:])
        sig = exact_norms(T, x.S0)
        with np.errstate(all="ignore"):
            qn = np.sqrt(np.sum(T.q * T.q, axis=-1))[..., None]
            rn = np.sqrt(np.sum(T.read * T.read, axis=-1))[..., None]
            stored = max(np.abs(np.asarray(a)).max() for a in args)
            stored = max(stored, float((qn * sig).max()), float((np.abs(T.v) + rn * sig).max()))
            big = float(sig.max()) if np.isfinite(sig).all() else np.inf
        return float(stored) * (1.0 + gamma(8)), big * (1.0 + gamma(8))

    @property
    def layer_chunk(self) -> int:
        """The longest chunk the layer computes at once (the flag ``layer_chunk``; default 64).

        The tolerance covers a layer computing token by token (1) or in
        chunks of at most this many tokens (flash-linear-attention's 64); a
        smaller value gives a tighter tolerance to a layer known to use it.
        """
        value = self.options.flags.get("layer_chunk")
        return tr.delta_chunk_iv(value)

    def bound_options(self, *, float64: bool) -> dict:
        return {"chunk_size": self.layer_chunk}

    def judged(self, args, kw, tolerance: np.ndarray) -> str:
        """'' when every entry of ``tolerance`` is finite, else why the case is not judged."""
        return "" if np.isfinite(tolerance).all() else NOT_JUDGED

    # ----- the state -------------------------------------------------------------
    def state_arguments(self, args) -> tuple:
        return args

    def state_options(self, kw) -> dict:
        """The state form's keyword options: the reference's own (no ``normalize``)."""
        return dict(kw)

    def take_arguments(self, args, a: int, b: int) -> tuple:
        """Tokens ``a:b`` of the reference's arguments (inputs and per-token inputs)."""
        return tuple(x[..., a:b, :] if x.ndim == args[0].ndim else x[..., a:b] for x in args)

    def _own_kw(self, args) -> dict:
        return {"qk_l2norm": self.l2norm, "scale": self.scale_for(args[0].shape[-1])}

    def bounds(self, args, kw, model):
        """The normwise bounds of the forms on ``args`` with options ``kw``: (float64, model).

        Each a :class:`~kernelcheck._src.attention.common.transition_bound.TransitionBounds`
        (outputs, every state's column bound, growth); ``kw`` may hold a
        handed-over ``initial_state``.
        """
        x = self.inputs(args, kw)
        T = self.transitions(x, args[3:])
        l2, scale = kw.get("qk_l2norm", False), kw.get("scale", 1.0)
        return family_bounds(x, T, model, 0, l2, scale, self.layer_chunk)

    def state_bound(self, args, model, n: int) -> np.ndarray:
        """The final state's rounding, float64's and the model's: each column's bound, every entry.

        The normwise bound ``e_n`` of each column bounds each of its entries.
        """
        b64, bm = self.bounds(tuple(args), self._own_kw(args), model)
        e = b64.state[..., -1, :] + bm.state[..., -1, :]
        D = args[0].shape[-1]
        return np.broadcast_to(e[..., None, :], e.shape[:-1] + (D, e.shape[-1])).copy()

    def prefix_state_bound(self, args, model, a: int) -> np.ndarray:
        """The state's bound after the first ``a`` tokens, read from the whole sequence's bound.

        The model is causal: the bound at token t is built from the inputs,
        the exact state norms and the trial errors of tokens ``<= t`` only
        (windows of the C tokens before t, the recursion forward), and grows
        with each of them and with n (the factors ``gamma(2 n + 2)`` of the
        recursion).  So row ``a - 1`` of the whole sequence's bound, where it
        is certified, bounds the state the first ``a`` tokens leave (a layer
        run on them computes what a run on the whole sequence computes up to
        there): one evaluation serves every cut of a hand-over, and it is the
        one the whole case's final state already needs.
        """
        b64, bm = self.bounds(tuple(args), self._own_kw(args), model)
        e = b64.state[..., a - 1, :] + bm.state[..., a - 1, :]
        D = args[0].shape[-1]
        return np.broadcast_to(e[..., None, :], e.shape[:-1] + (D, e.shape[-1])).copy()

    def propagate(self, args, E0, extras, normalize: bool, ref, den) -> np.ndarray:
        """Effect on each output of an error ``E0`` (entrywise) in the state handed in.

        Column m's error is at most ``|E0[:, m]|_2``; it reaches output t
        through the transitions since the hand-over:
        ``|q_t| prod_(l <= t) rho~_l |E0[:, m]|_2``.
        """
        from kernelcheck._src.attention.common.transition_bound import transition_norms

        if len(args) == 3:  # the inputs only: the per-token inputs come from extras
            args = tuple(args) + tuple(self.token_value(n, extras, args[0]) for n in self.tokens)
        x = self.inputs(args, self._own_kw(args))
        T = self.transitions(x, args[3:])
        rho, wmax = transition_norms(T)
        grow = np.cumprod(np.maximum(rho, wmax), axis=-1)
        e0 = np.sqrt(np.sum(np.asarray(E0, dtype=np.float64) ** 2, axis=-2))
        qn = np.sqrt(np.sum(T.q * T.q, axis=-1))
        with np.errstate(over="ignore", invalid="ignore"):
            out = (qn * grow)[..., None] * e0[..., None, :] * (1.0 + gamma(args[0].shape[-2] + 8))
        return np.where(np.isfinite(out), out, np.inf)


# ----- the delta rule's bug shapes ---------------------------------------------------


def _twice(S, q, k, v, beta, alpha):
    return tr.delta_step(S, q, k, beta[..., None] * v, beta, alpha)


def _erase_only(S, q, k, v, beta, alpha):
    Sa = _decayed(S, k, alpha)
    err = v - beta[..., None] * (k[..., None, :] @ Sa)[..., 0, :]
    Sa = Sa + k[..., :, None] * err[..., None, :]
    return Sa, (q[..., None, :] @ Sa)[..., 0, :]


def _wrong_side(S, q, k, v, beta, alpha):
    Sa = _decayed(S, k, alpha)
    err = k - (Sa @ v[..., :, None])[..., 0]
    Sa = Sa + (beta[..., None] * err)[..., :, None] * v[..., None, :]
    return Sa, (q[..., None, :] @ Sa)[..., 0, :]


def _pre_decay(S, q, k, v, beta, alpha):
    err = v - (k[..., None, :] @ S)[..., 0, :]
    Sa = _decayed(S, k, alpha) + k[..., :, None] * (beta[..., None] * err)[..., None, :]
    return Sa, (q[..., None, :] @ Sa)[..., 0, :]


def _decayed(S, k, alpha):
    if alpha is None:
        return S
    return S * (alpha[..., None, None] if alpha.ndim == k.ndim - 1 else alpha[..., :, None])


def delta_bug_shapes(spec: TransitionSpec, args, kw, beta, alpha) -> dict:
    """Outputs of the delta rule's reported bugs from the reference's inputs, by description.

    Each shape runs the reference loop with one step changed (``alpha`` the
    decays, None for the plain delta rule); the sources are issue threads
    and pull requests of the projects that shipped or fixed them:

    * beta applied twice, the written value ``beta^2 v``: the UT transform's
      ``Diag(beta)`` and values pre-scaled by beta both kept (the
      convention flash-linear-attention's naive chunk form, ``v * beta`` and
      ``k * beta``, invites; sgl-project/sglang#40685 fed KDA's beta to a
      prefill kernel without its activation);
    * beta on the wrong side: only the erase ``(I - beta k k^T)`` scaled, the
      value written as is;
    * the delta rule on the wrong side, ``S + beta (k - S v) v^T``: the keys
      corrected instead of the values (fla-org/flash-linear-attention#623);
    * the error read from the state before its decay, ``v - S_(t-1)^T k``
      (fla-org/flash-linear-attention#885 asks which one Gated DeltaNet means);
    * each token decayed by the previous token's gate;
    * keys and queries not L2-normalised where the layer says it does
      (huggingface/transformers#40842 aligned Qwen3-Next's l2norm with fla's),
      or normalised by their root mean square, ``|k| = sqrt(D)``
      (1bit-MONSTER/1bit-MONSTER#2134);
    * the query scale applied twice or not at all (ml-explore/mlx-lm#1798,
      a missing readout scale).
    """
    x = spec.inputs(args, kw)

    def run(step, xx=x, al=alpha):
        tokens = (beta,) if al is None else (beta, al)

        def with_decay(S, q, k, v, b, a=None):
            return step(S, q, k, v, b, a)

        return tr.run_steps(with_decay, xx.q, xx.k, xx.v, tokens, xx.S0)[0]

    out = {
        "beta applied twice (the value written as beta^2 v)": run(_twice),
        "beta only in the erase (I - beta k k^T), the value written unscaled": run(_erase_only),
        "the delta rule on the wrong side, S + beta (k - S v) v^T": run(_wrong_side),
    }
    if alpha is not None:
        out["the error read from the state before its decay, v - S_(t-1)^T k"] = run(_pre_decay)
        axis = -1 if alpha.ndim == beta.ndim else -2
        prev = np.concatenate([np.ones_like(np.take(alpha, [0], axis)),
                               np.delete(alpha, -1, axis)], axis)  # fmt: skip
        out["each token decayed by the previous token's gate"] = run(tr.delta_step, al=prev)
    D = x.q.shape[-1]
    if kw.get("qk_l2norm"):
        raw = spec.inputs(args, {**kw, "qk_l2norm": False})
        out["keys and queries not L2-normalised (the layer claims qk_l2norm)"] = run(
            tr.delta_step, raw
        )
        rms = np.sqrt(np.mean(raw.k * raw.k, axis=-1, keepdims=True) + tr.L2NORM_EPS)
        qrms = np.sqrt(np.mean(raw.q * raw.q, axis=-1, keepdims=True) + tr.L2NORM_EPS)
        bad = raw._replace(k=raw.k / rms, q=raw.q / qrms)
        out["keys and queries normalised by their RMS, |k| = sqrt(D)"] = run(tr.delta_step, bad)
    ref = run(tr.delta_step)
    scale = float(kw.get("scale", 1.0))
    if scale != 1.0:
        out["the query scale applied twice"] = ref * scale
        out["the query scale not applied"] = ref / scale
    else:
        out["the queries scaled by 1/sqrt(D) (a scale the reference does not have)"] = (
            ref / np.sqrt(D)
        )
    return out


# ----- the gradients -----------------------------------------------------------------


def family_vjp(spec: TransitionSpec, args, kw, G, models=()):
    """The reference gradients of ``<G, y>`` for the inputs ``args``, and their bounds per model.

    Returns ``(grads, bounds)``: ``grads`` maps ``q``, ``k``, ``v`` and the
    per-token inputs (by the forms' names) to float64 arrays of their
    shapes; ``bounds`` one dict of entrywise bounds per ``(dtype, extra_ops)``
    of ``models`` (a dtype None: the inputs' own; each the model's bound plus
    the float64 reference's own).  The canonical
    gradients come from the reverse recurrence
    (:func:`~kernelcheck._src.attention.common.transition_vjp.transition_vjp`),
    the inputs' from the chain rule of the family's fields
    (:mod:`~kernelcheck._src.attention.common.transition_chain`).
    """
    from kernelcheck._src.attention.common import transition_chain as ch
    from kernelcheck._src.attention.common import transition_vjp as tv

    x = spec.inputs(args, kw)
    tokens = tr.tokens_iv(x, args[3:], spec.limits)
    T = spec.canonical(x, *tokens)
    out_shape = np.broadcast_shapes(x.q.shape[:-1], x.v.shape[:-1]) + x.v.shape[-1:]
    G = cotangent(G, out_shape)
    cg, mags = tv.transition_vjp(T, x.S0, G)
    names = tuple(lim.name for lim in spec.limits)
    values = {"q": x.q, "k": x.k, "v": x.v, **dict(zip(names, tokens, strict=True))}
    canonical = {"v": cg.v, "read": cg.read, "write": cg.write, "w": cg.w}
    grads = ch.chain(spec.fields, values, canonical)
    grads["q"] = cg.q
    grads["k"] = grads.get("k", 0.0) + cg.k
    grads["v"] = grads.get("v", 0.0) if "v" in grads else cg.v
    l2, scale = kw.get("qk_l2norm", False), float(kw.get("scale", 1.0))
    raw = spec.inputs(args, {**kw, "qk_l2norm": False, "scale": 1.0})
    out = dict(grads)
    out["q"] = scale * (ch.normalized_grad(raw.q, grads["q"]) if l2 else grads["q"])
    if l2:
        out["k"] = ch.normalized_grad(raw.k, grads["k"])
    bounds = []
    tnorms = magnitudes(T) if models else None  # every model's bound reads them
    for model, extra in models:
        total = None
        for dt, ops in ((np.dtype(np.float64), 0), (dtype_iv(model, x.dtype), int(extra))):
            passes = (x, raw, T, cg, mags, tnorms, G, values, canonical, grads)
            b = _vjp_bound(spec, passes, dt, ops, l2, scale)
            total = b if total is None else {n: total[n] + b[n] for n in b}
        bounds.append(total)
    return out, tuple(bounds)


def _vjp_bound(spec, passes, dt, extra, l2, scale):
    """Entrywise bounds on every input's gradient in the model ``dt`` (see :func:`family_vjp`)."""
    from kernelcheck._src.attention.common import transition_chain as ch
    from kernelcheck._src.attention.common import transition_vjp as tv

    x, raw, T, cg, mags, tnorms, G, values, canonical, grads = passes
    C = spec.layer_chunk
    _, bm = family_bounds(x, T, dt, extra, l2, scale, C)
    E = tv.canonical_vjp_bound(T, mags, G, bm.state, dt, extra, C, tnorms)
    errors = {"v": E.v, "read": E.read, "write": E.write, "w": E.w}
    out = ch.chain_bound(spec.fields, values, canonical, errors, dt)
    out["q"] = E.q
    out["k"] = out.get("k", 0.0) + E.k
    if "v" not in out:
        out["v"] = E.v
    if l2:
        out["q"] = ch.normalized_grad_bound(raw.q, grads["q"], out["q"], dt)
        out["k"] = ch.normalized_grad_bound(raw.k, grads["k"], out["k"], dt)
    out["q"] = out["q"] * scale * (1.0 + gamma(2, dt))
    D = x.q.shape[-1]
    for name in ("q", "k") + tuple(lim.name for lim in spec.limits if lim.channels):
        e = out[name]
        out[name] = np.broadcast_to(e[..., None], e.shape + (D,)) if e.ndim == x.q.ndim - 1 else e
    return {n: np.where(np.isnan(e), np.inf, e) for n, e in out.items()}


def vjp_call(spec_class, args, G, qk_l2norm, scale, initial_state, models=None):
    """A family's public VJP: the gradients, with their bounds when ``models`` is given."""
    spec = spec_class(SpecOptions(causal=True))
    kw = {"qk_l2norm": qk_l2norm, "scale": scale, "initial_state": initial_state}
    grads, bounds = family_vjp(spec, args, kw, G, () if models is None else models)
    return grads if models is None else (grads, bounds)
