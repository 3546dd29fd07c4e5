"""The extra checks of ``verify.attention``: causality, state hand-over, chunk sizes.

* **Causality** (``causal=True``): token j of a case is replaced by a very
  different one and every output before j must stay within rounding of the
  unperturbed output; a row that moves is a leak, reported as "output at t
  depends on token t + k".
* **State hand-over** (``state=True``, linear and gated references): the
  layer's final state is compared with the reference's, and the sequence is
  split (a prefill, then the rest, the last two tokens one at a time) and the
  outputs compared with one pass.  A handed-over state carries the layer's
  rounding error; its effect on every later output is added to the
  tolerance, propagated through the recurrence (decays included).
* **Chunk sizes**: when the layer takes a ``chunk_size`` argument its
  output at several chunk sizes must match the reference.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any

import numpy as np

from kernelcheck._src.attention.common.types import State
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.rounding import NoUsefulBound, gamma
from kernelcheck._src.core.validate import describe
from kernelcheck._src.verify.adapters import round_to
from kernelcheck._src.verify.attention.cases import from_layout, to_layout
from kernelcheck._src.verify.attention.diagnosis import name_closest
from kernelcheck._src.verify.attention.jacobian import feature_jacobians, through_features
from kernelcheck._src.verify.attention.reference import PACKED
from kernelcheck._src.verify.attention.report import AttentionCase, failed_case, skipped_case
from kernelcheck._src.verify.attention.run import (
    Judged,
    Run,
    call_fn,
    call_layer,
    compare,
    layer_heads,
    output_of,
    raised,
    read_output,
    token_arguments,
    unbounded,
)
from kernelcheck.errors import InvalidArgument

__all__ = [
    "causality_check",
    "state_checks",
    "split_check",
    "state_reader",
    "chunk_size_checks",
    "grad_checks",
    "takes",
]

#: At most this many positions are perturbed one at a time by the causality check.
MAX_PERTURBED = 12


def _parameters(fn) -> dict:
    """``fn``'s parameters; a module called as ``(*args, **kwargs)`` is read by its ``forward``."""
    try:
        params = dict(inspect.signature(fn).parameters)
        forward = getattr(fn, "forward", None)
        if callable(forward) and all(
            p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()
        ):
            params = dict(inspect.signature(forward).parameters)
    except (TypeError, ValueError):
        return {}
    return params


def takes(fn, name: str, *, explicitly: bool = False) -> bool:
    """Whether ``fn`` accepts the keyword argument ``name``.

    With ``explicitly=True`` only a parameter of that name counts, not
    ``**kwargs``: an option kernelcheck offers on its own initiative (the
    chunk-size sweep) must never be forced on a layer that merely forwards
    keyword arguments (``torch.nn.Module.__call__`` takes ``**kwargs``).
    """
    params = _parameters(fn)
    if name in params:
        return True
    return not explicitly and any(p.kind is p.VAR_KEYWORD for p in params.values())


def _output(run: Run, Q, K, V, g, expected, **kwargs):
    if run.state:
        kwargs.setdefault("initial_state", None)
    raw = output_of(run, call_layer(run, Q, K, V, g, **kwargs))
    out, _, problem = read_output(run, raw, expected)
    if problem:
        raise _LayerProblem(problem)
    return out


class _LayerProblem(Exception):
    pass


def causality_check(run: Run, j0: Judged, rng: np.random.Generator) -> AttentionCase:
    """Perturb one future token at a time; no earlier output may move beyond rounding.

    Token ``j`` is replaced and the outputs at ``t < j`` of the perturbed run
    are compared with the unperturbed run's (the layer's output on the judged
    case, not recomputed), within ``2 tol_t``, ``tol`` the case's own
    tolerance.  No reference or bound is computed per perturbation, and none
    is needed: for a causal reference the exact output ``a_t`` at ``t < j``
    depends only on tokens ``<= t``, which the perturbation leaves unchanged,
    so ``|fn(P)_t - fn(X)_t| <= |fn(P)_t - a_t| + |a_t - fn(X)_t|`` and each
    term is within the layer's a-priori bound at ``t``.  That bound is a
    function of the tokens ``<= t``, of ``n`` and of the model (the
    probabilistic model's lambda of the shape alone), except for the
    underflow terms, whose maxima run over all tokens of the unperturbed
    case and so cover the maxima over tokens ``<= t`` the proof needs, which
    the perturbation leaves unchanged too.  Hence ``tol_t`` bounds both terms
    (it also holds the float64 reference's own share, a little slack).
    """
    name = "causality"
    if j0.reference is None or j0.model is None or j0.tolerance is None:
        return skipped_case(name, (), f"case '{j0.case.name}' could not be judged")
    Q, K, V, g = j0.Q, j0.K, j0.V, j0.extras
    n = Q.shape[-2]
    if n < 2:
        return skipped_case(name, tuple(Q.shape), "needs at least two tokens")
    if not run.reference.causal:
        return skipped_case(name, tuple(Q.shape), "the reference is not causal")
    p = run.adapter.precision
    positions = range(1, n) if n <= MAX_PERTURBED + 1 else np.linspace(1, n - 1, MAX_PERTURBED)
    base = j0.output
    if base is None:
        try:
            base = _output(run, Q, K, V, g, j0.reference.shape)
        except InvalidArgument:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as the check's failure
            return failed_case(name, tuple(Q.shape), f"fn failed on the unperturbed input: {exc}")
    leaks: list[tuple[int, int]] = []
    for j in sorted({int(x) for x in positions}):
        Q2, K2, V2 = Q.copy(), K.copy(), V.copy()
        Q2[..., j, :] = round_to(-2.0 * Q[..., j, :] + rng.standard_normal(Q.shape[-1]), p)
        K2[..., j, :] = round_to(-2.0 * K[..., j, :] + rng.standard_normal(K.shape[-1]), p)
        V2[..., j, :] = round_to(V[..., j, :] + 5.0, p)
        try:
            moved = _output(run, Q2, K2, V2, g, j0.reference.shape)
        except InvalidArgument:
            raise
        except Exception:  # noqa: BLE001 - a perturbation the layer cannot take is not judged
            continue
        with np.errstate(invalid="ignore"):
            diff = np.abs(moved[..., :j, :] - base[..., :j, :])
            room = 2.0 * j0.tolerance[..., :j, :]
        bad = (diff > room).any(axis=tuple(a for a in range(diff.ndim) if a != diff.ndim - 2))
        leaks += [(int(i), j) for i in np.nonzero(bad)[0]]
    shape = tuple(Q.shape)
    if not leaks:
        return AttentionCase(name, shape, True, 0.0, 0.0, 0.0, None, math.nan, "no leak")
    t, j = min(leaks, key=lambda x: (x[1] - x[0], x[0]))
    note = (
        f"output at t = {t} depends on token t + {j - t} (perturbing future tokens moved "
        f"{len({i for i, _ in leaks})} earlier rows beyond rounding)"
    )
    return AttentionCase(name, shape, False, math.inf, math.inf, math.inf, None, math.nan, note)


# ----- state hand-over -------------------------------------------------------


def state_reader(adapter, read_state=None, layout: str = "key-major"):
    """Read a layer's state as a :class:`State`: ``(S, z)``, ``S`` alone, or ``read_state(value)``.

    ``read_state`` (the user's converter, e.g. for fla's ``(B, H, K, V)``
    tensor without ``z``) returns ``S`` or ``(S, z)`` as arrays of any
    framework; a ``"value-major"`` state (Mamba-2's ``(..., d_v, D)``) is
    transposed to kernelcheck's ``(..., D, d_v)``.
    """

    source = "fn" if read_state is None else "read_state"

    def read(value: Any) -> State:
        if read_state is not None:
            value = call_user(read_state, "`read_state`", value)
        z = None
        if isinstance(value, State) or (isinstance(value, (tuple, list)) and len(value) == 2):
            S, _ = adapter.to_numpy(value[0], "state S", source)
            z = None if value[1] is None else adapter.to_numpy(value[1], "state z", source)[0]
        else:
            if isinstance(value, (tuple, list)) and len(value) == 1:
                value = value[0]
            S, _ = adapter.to_numpy(value, "state", source)
        if layout == "value-major":
            S = np.swapaxes(S, -1, -2)
        return State(S, z)

    return read


def final_state_check(run: Run, j0: Judged, read) -> AttentionCase:
    """The state the layer returned with a case's output, against the reference's final state.

    The state comes from the same call as the judged output (no extra call);
    its tolerance is the family's bound on the state's rounding after the
    case's n tokens, in the layer's model and float64's.
    """
    name = f"final state ({j0.case.name})"
    if j0.reference is None:
        return skipped_case(name, (), f"case '{j0.case.name}' could not be judged")
    shape = tuple(j0.Q.shape)
    spec = run.reference.spec
    form = run.reference.family.state_form
    if form is None:  # the options were validated: state=True needs a family with a state
        raise InvalidArgument(f"{spec.describe()} has no recurrent state")
    pieces = run.reference.for_case(j0.extras).pieces(j0.args)
    refs, bounds = [], []
    for args in pieces:  # packed sequences: one final state per sequence, stacked first
        _, ref_state = form.call(*spec.state_arguments(args), causal=True, return_state=True,
                                 **spec.state_options(j0.kw))  # fmt: skip
        refs.append(_state_matrix(ref_state))
        try:
            bounds.append(spec.state_bound(args, j0.model, args[0].shape[-2]))
        except NoUsefulBound as exc:
            return skipped_case(name, shape, unbounded(j0.model, args[0].shape[-2], exc))
    packed = PACKED in j0.extras
    refM = np.stack(refs) if packed else refs[0]
    bound = np.stack(bounds) if packed else bounds[0]
    try:
        state = read(j0.state)
    except InvalidArgument:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's converter failed: a finding
        return failed_case(name, shape, f"reading the state raised {type(exc).__name__}: {exc}")
    result = _final_state(name, shape, state, refM, bound, spec.normalize)
    if result.passed is False and result.where is not None and not packed:
        gotS = _state_matrix(state)  # compared entrywise: name the closest bug shape
        if gotS.shape == refM.shape:
            with np.errstate(all="ignore"):
                shapes = spec.state_bug_shapes(j0.args, j0.kw)
            if shapes:
                diagnosis = name_closest(gotS, bound, shapes, refM)
                result = dataclasses.replace(result, diagnosis=diagnosis)
    return result


def _state_matrix(state: State):
    """``[S, z]`` (``S`` alone without a normaliser) as one float64 array."""
    S = np.asarray(state.S, dtype=np.float64)
    if state.z is None:
        return S
    return np.concatenate([S, np.asarray(state.z, dtype=np.float64)[..., None]], -1)


def state_checks(run: Run, judged, read, split: tuple[str, ...]) -> list[AttentionCase]:
    """The final state of every judged case; a split run against one pass on the cases ``split``."""
    out = [final_state_check(run, j, read) for j in judged if j.case.passed is not None]
    out += [split_check(run, j) for j in judged if j.case.name in split and j.reference is not None]
    return out


def _final_state(name: str, shape, state: State, refM, E, normalize: bool) -> AttentionCase:
    """The layer's final ``(S, z)`` against the reference's ``[S, z]``, entrywise within ``E``.

    Compared as one matrix ``[S | z]`` of shape (..., D, d_v + 1) when the
    reference is normalised, ``S`` alone otherwise.  A normalised layer whose
    state holds no ``z`` (``(S, None)``, or ``S`` alone) has its ``S``
    compared, and the note says that ``z`` was not; a state of the wrong
    shape, or one holding NaN or Inf, fails with the reason.
    """
    note = ""
    parts = [("S", np.asarray(state.S, dtype=np.float64))]
    if normalize and state.z is None:
        note = (
            "the layer's state holds no normaliser z (it reads as (S, None)): S compared alone; "
            "pass read_state= returning (S, z) to check z too"
        )
        refM, E = refM[..., :-1], E[..., :-1]
    elif normalize:
        parts.append(("z", np.asarray(state.z, dtype=np.float64)))
    want = {"S": refM.shape[:-1] + (refM.shape[-1] - len(parts) + 1,), "z": refM.shape[:-1]}
    for label, got in parts:
        if got.shape != want[label]:
            return failed_case(
                name, shape, f"state {label} of shape {got.shape}, expected {want[label]}"
            )
        bad = _not_finite(got, f"the layer's state {label}")
        if bad:
            return failed_case(name, shape, bad)
    gotM = (
        parts[0][1]
        if len(parts) == 1
        else np.concatenate([parts[0][1], parts[1][1][..., None]], -1)
    )
    return compare(name, shape, gotM, refM, E, note, tokens=False)


def _not_finite(values: np.ndarray, what: str) -> str:
    """Where ``values`` holds NaN or Inf, in words ('' when every entry is finite)."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return ""
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    count = f"{int(bad.sum())} of {values.size} entries not finite"
    return f"{what} holds {float(values[where])} at {where} ({count})"


def split_check(run, j0, collect: list | None = None) -> AttentionCase:
    """Prefill half the tokens, then the rest but two, then the last two one at a time.

    The layer's own state object is handed back to it as it returned it; the
    converter only reads it (to compare with the reference).  Packed
    sequences: the first sequence alone, each piece handed over as one
    sequence of its own.  ``collect`` receives ``("hand-over", the pieces'
    outputs joined, reference, tolerance)`` when every piece ran.
    """
    if PACKED in j0.extras:
        j0 = _first_sequence(run, j0)
    Q, K, V, g = j0.Q, j0.K, j0.V, j0.extras
    n, shape = Q.shape[-2], tuple(Q.shape)
    name = f"state hand-over ({j0.case.name})"
    if n < 4:
        return skipped_case(name, shape, "needs at least four tokens to split")
    spec = run.reference.spec
    normalize = spec.normalize
    cuts = sorted({0, n // 2, n - 2, n - 1, n})  # n = 4: n // 2 is n - 2, no empty piece
    pieces, handed, tol_extra = [], None, np.zeros(j0.reference.shape)
    den = run.reference.normalizers(j0.args, j0.kw) if normalize else None
    try:
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            gs = _take_tokens(run, g, a, b)
            raw = call_layer(
                run, Q[..., a:b, :], K[..., a:b, :], V[..., a:b, :], gs, initial_state=handed
            )
            got, _, problem = read_output(run, raw[0], j0.reference[..., a:b, :].shape)
            if problem:
                return failed_case(name, shape, f"piece {a}:{b}: {problem}")
            pieces.append(np.asarray(got))
            if a > 0:  # the handed state's error reaches every output of this piece
                seg = tuple(x[..., a:b, :] for x in j0.args[:3])
                E0 = spec.prefix_state_bound(j0.args, j0.model, a)
                d = None if den is None else den[..., a:b, :]
                tol_extra[..., a:b, :] = spec.propagate(
                    seg, E0, gs, normalize, j0.reference[..., a:b, :], d
                )
            handed = raw[1]
    except NoUsefulBound as exc:  # the handed state's bound, not the layer
        return skipped_case(name, shape, unbounded(j0.model, n, exc))
    except InvalidArgument:
        raise
    except Exception as exc:  # noqa: BLE001
        return failed_case(name, shape, f"fn raised {raised(exc)}")
    joined: np.ndarray = np.concatenate(pieces, axis=-2)
    if collect is not None:
        collect.append(("hand-over", joined, j0.reference, j0.tolerance + tol_extra))
    return compare(
        name, shape, joined, j0.reference, j0.tolerance + tol_extra, "cuts at n/2, n-2, n-1"
    )


def _take_tokens(run: Run, extras, a: int, b: int) -> dict:
    """Tokens ``a:b`` of every per-token input (packed: one sequence of ``b - a`` tokens)."""
    out = {
        ti.name: ti.take(extras[ti.name], a, b)
        for ti in run.reference.family.token_inputs
        if ti.name in extras
    }
    if PACKED in extras:
        out[PACKED] = np.array([0, b - a])
    return out


def _first_sequence(run: Run, j0: Judged) -> Judged:
    """The judged case cut to its first packed sequence (its reference and tolerance too)."""
    end = int(j0.extras[PACKED][1])
    args = run.reference.for_case(j0.extras).pieces(j0.args)[0]
    assert j0.reference is not None and j0.tolerance is not None  # a judged case
    extras = _take_tokens(run, j0.extras, 0, end)
    return j0._replace(
        Q=j0.Q[..., :end, :], K=j0.K[..., :end, :], V=j0.V[..., :end, :], extras=extras,
        reference=j0.reference[..., :end, :], tolerance=j0.tolerance[..., :end, :], args=args,
    )  # fmt: skip


def chunk_size_checks(run: Run, j0: Judged, sizes=(1, 3, 16)) -> list[AttentionCase]:
    """The layer's output at several chunk sizes, each against the reference."""
    if j0.reference is None:
        return []
    out = []
    for c in sizes:
        name = f"chunk_size={c}"
        try:
            got = _output(run, j0.Q, j0.K, j0.V, j0.extras, j0.reference.shape, chunk_size=c)
        except _LayerProblem as exc:
            out.append(failed_case(name, tuple(j0.Q.shape), str(exc)))
            continue
        except InvalidArgument:
            raise
        except Exception as exc:  # noqa: BLE001
            out.append(failed_case(name, tuple(j0.Q.shape), f"fn raised {raised(exc)}"))
            continue
        out.append(compare(name, tuple(j0.Q.shape), got, j0.reference, j0.tolerance))
    return out


# ----- gradients ---------------------------------------------------------------


def _layer_vjp(run: Run, Q, K, V, extras, G, vjp):
    """The layer's gradients of ``<G, out>``: ``[dQ, dK, dV, *d(per-token inputs handed)]``.

    torch and jax differentiate with respect to the arrays kernelcheck
    hands over, never through ``.backward()`` into the user's module (its
    parameters' ``.grad`` stay as they were; grad mode is on for the call,
    even under the caller's ``torch.no_grad()``); a NumPy layer's ``vjp``
    gives ``(dQ, dK, dV)``.  The forward and backward pass run as one call
    through :func:`call_fn` (the ``timeout=`` and the check that the
    gradients are real numbers).
    """
    a = run.adapter
    kwargs = {**(run.fn_kwargs or {}), **({"initial_state": None} if run.state else {})}
    if extras.get(PACKED) is not None:
        kwargs[PACKED] = run.adapter.to_framework_int(extras[PACKED])
    cot = to_layout(round_to(G, a.precision), run.layout)
    qkv = (layer_heads(run, Q), layer_heads(run, K), V)
    if a.framework == "torch":
        import torch

        def torch_vjp(*ts):
            with torch.enable_grad():  # even under the caller's torch.no_grad()
                out = output_of(run, run.fn(*ts, **kwargs))
                cotangent = a.to_framework(cot).to(out.dtype)
                grads = torch.autograd.grad(out, ts, cotangent, allow_unused=True)
            return tuple(torch.zeros_like(t) if g is None else g for t, g in zip(ts, grads))

        ts = [a.to_framework(to_layout(X, run.layout), requires_grad=True) for X in qkv]
        ts += [t.requires_grad_(True) for t in token_arguments(run, extras)]
        grads = call_fn(torch_vjp, "`fn` (its backward pass)", *ts)
    elif a.framework == "jax":
        import jax

        def jax_vjp(*xs):
            out, pull = jax.vjp(lambda *ys: output_of(run, run.fn(*ys, **kwargs)), *xs)
            return tuple(pull(a.to_framework(cot).astype(out.dtype)))

        xs = [a.to_framework(to_layout(X, run.layout)) for X in qkv]
        grads = call_fn(jax_vjp, "`fn` (its backward pass)", *xs, *token_arguments(run, extras))
    else:
        if vjp is None:
            return None
        grads = call_fn(
            vjp, "`vjp`", *(to_layout(X.copy(), run.layout) for X in qkv),
            to_layout(G, run.layout),
        )  # fmt: skip
        if not (isinstance(grads, (tuple, list)) and len(grads) == 3):
            got = f"a {type(grads).__name__} of {len(grads)}" if isinstance(
                grads, (tuple, list)) else describe(grads)  # fmt: skip
            raise InvalidArgument(
                f"`vjp(Q, K, V, G)` must return three arrays (dQ, dK, dV), got {got}"
            )
    out = []
    source = "fn" if a.framework != "numpy" else "vjp"
    for i, grad in enumerate(grads):
        arr, _ = a.to_numpy(grad, "gradient", source)
        if i < 3:
            out.append(from_layout(arr, run.layout) if run.layout == "bnhd" else arr)
        else:  # a per-token input's gradient, back from the layer's layout
            out.append(run.passed[i - 3].to_layout(arr, run.layout))
    return out


def _token_gradient(run: Run, got, extras, index: int, r, t, model):
    """The layer's gradient of the family's per-token input ``index - 3``, and the reference's.

    None when the layer was not handed that input (a constant of its own).
    The family's reference differentiates a loggable input (the gates) in
    its logarithm; a layer handed the values themselves gives ``dg``, so
    the reference and its tolerance are divided by ``g`` (exact enough:
    one rounding, far below the tolerance).
    """
    ti = run.reference.family.token_inputs[index - 3]
    names = [p.name for p in run.passed]
    if ti.name not in names or len(got) <= 3 + names.index(ti.name):
        return None
    g_ = got[3 + names.index(ti.name)]
    if ti.loggable and ti.per_token:
        t = through_cumulative_logs(r, t, model, ti.axis)
    if ti.loggable and not run.log_gates:
        values = extras[ti.name]
        r, t = r / values, t / values
    return g_, r, t


def through_cumulative_logs(r: np.ndarray, t: np.ndarray, model, axis: int) -> np.ndarray:
    """The tolerance of a gate's gradient (in its logarithm) formed by cumulative sums.

    A chunked layer decays by ``exp(L_i - L_j)`` of the cumulative log gates
    ``L_s = sum_(l <= s) log g_l``; autograd then forms ``d log g_t`` as the
    reverse cumulative sum ``sum_(s >= t) dL_s`` of the gradients of the
    ``L_s``, whose terms cancel where the exact gradient is small (with no
    initial state, ``d log g_0 = 0`` exactly, a sum of nonzero terms).  Its
    error model: each ``dL_s = r_s - r_(s+1)`` is formed within the error
    ``t_s + t_(s+1)`` the recurrence's bound allows the two gradients it
    joins, and the ``n - t`` additions of the reverse sum, whose partial sums
    are the ``r_s``, add at most ``gamma_(n-t) sum_(s >= t) |r_s|`` (both in
    the layer's model, ``gamma`` of float64's too).  The result is at least
    ``t`` (it holds ``t_t``), so a layer that follows the recurrence is
    judged by no tighter a tolerance than before.
    """
    r, t = np.moveaxis(r, axis, -1), np.moveaxis(t, axis, -1)
    n = r.shape[-1]
    following = np.concatenate([t[..., 1:], np.zeros_like(t[..., :1])], axis=-1)
    from_end = np.flip(np.cumsum(np.flip(t + following, -1), -1), -1)
    sums = np.flip(np.cumsum(np.flip(np.abs(r), -1), -1), -1)
    count = np.arange(n, 0, -1, dtype=np.float64)
    g = np.array([gamma(k, model) + gamma(k) for k in count])
    return np.moveaxis(np.maximum(t, from_end + g * sums), -1, axis)


def _feature_jacobians(run: Run, j0: Judged) -> dict:
    """The query and key feature maps' Jacobians at the case's inputs (None: not available)."""
    options = run.reference.spec.options
    return {0: feature_jacobians(options.phi_q, j0.Q), 1: feature_jacobians(options.phi_k, j0.K)}


def _group_sum(run: Run, X: np.ndarray) -> np.ndarray:
    """Sum over the value heads of each query/key group: (..., H, n, d) -> (..., H / r, n, d)."""
    shape = X.shape[:-3] + (X.shape[-3] // run.qk_group, run.qk_group) + X.shape[-2:]
    return X.reshape(shape).sum(axis=-3)


def grad_checks(
    run: Run, j0: Judged, rng: np.random.Generator, vjp=None, collect: list | None = None
) -> list[AttentionCase]:
    """The layer's vector-Jacobian product along a random cotangent, against the reference's.

    The family's specification gives the reference gradients it can check
    (:attr:`~kernelcheck._src.attention.common.spec.FamilySpec.gradients`)
    with their bounds in the layer's model and float64's; the others are
    listed as not checked, with the reason.  ``collect`` receives
    ``(name, layer's gradient, reference, tolerance)`` of each gradient compared.
    """
    label = f"gradient ({j0.case.name})"
    if j0.reference is None:
        return [skipped_case(label, (), f"case '{j0.case.name}' could not be judged")]
    spec, shape = run.reference.spec, tuple(j0.Q.shape)
    if not spec.gradients:
        return [skipped_case(label, shape, spec.gradients_not_checked)]
    if run.adapter.framework == "numpy" and vjp is None:
        return [skipped_case(label, shape, "a NumPy layer needs vjp= for the gradient check")]
    positive = j0.case.name == "positive values"
    G = (
        0.5 + rng.random(j0.reference.shape)
        if positive
        else rng.standard_normal(j0.reference.shape)
    )
    G = round_to(G, run.adapter.precision)
    try:
        refs = run.reference.for_case(j0.extras).vjp(j0.args, j0.kw, j0.Q, j0.K, j0.V, G, j0.model)
    except NoUsefulBound as exc:
        return [skipped_case(label, shape, unbounded(j0.model, shape[-2], exc))]
    try:
        got = _layer_vjp(run, j0.Q, j0.K, j0.V, j0.extras, G, vjp)
    except InvalidArgument:
        raise
    except Exception as exc:  # noqa: BLE001 - the layer's backward failed: a finding
        return [failed_case(label, shape, f"the backward pass raised {raised(exc)}")]
    out = []
    unchecked = [g for g in ("dQ", "dK", "dV") if g not in spec.gradients]
    reason = spec.gradients_not_checked
    jacobians = _feature_jacobians(run, j0) if spec.feature_gradients else {}
    for name, index, r, t in refs:
        if index < 2 and spec.feature_gradients:
            J = jacobians[index]
            if J is None:
                unchecked.append(name)
                reason = (
                    "the feature map cannot be differentiated by torch or jax (a map in NumPy "
                    "operations): write it in torch or jax operations for dQ and dK"
                )
                continue
            try:
                r, t = through_features(J, r, t, j0.model, spec.extra_ops(j0.Q.shape[-1]) // 2)
            except NoUsefulBound as exc:
                label = f"gradient {name} ({j0.case.name})"
                out.append(skipped_case(label, shape, unbounded(j0.model, shape[-2], exc)))
                continue
        if index >= 3:
            taken = _token_gradient(run, got, j0.extras, index, r, t, j0.model)
            if taken is None:
                continue
            g_, r, t = taken
        else:
            g_ = got[index]
        if index < 2 and run.qk_group > 1:  # a query/key head's gradient sums its group's
            r, t = _group_sum(run, r), _group_sum(run, t)
        case = f"gradient {name} ({j0.case.name})"
        if g_.shape != r.shape:
            out.append(failed_case(case, shape, f"{name} of shape {g_.shape}, expected {r.shape}"))
        elif not np.isfinite(g_).all():
            out.append(failed_case(case, shape, _not_finite(g_, f"the layer's {name}")))
        else:
            out.append(compare(case, shape, g_, r, t))
            if collect is not None:
                collect.append((name, g_, r, t))
    if unchecked:
        what = ", ".join(sorted(set(unchecked), key=unchecked.index))
        out.append(skipped_case(f"gradient {what} ({j0.case.name})", shape, reason))
    return out
