"""Running a user's attention layer case by case, and judging each output against the reference.

The machinery behind ``verify.attention``: hand the rounded inputs to the
layer in its framework and layout, read its output back, pick the rounding
model it is judged with, compare entrywise, and diagnose a failure.  The
extra checks (causality by perturbation, state hand-over, chunk sizes) live
in :mod:`kernelcheck._src.verify.attention.checks`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.rounding import (
    PRECISIONS,
    PRODUCT_ONLY,
    NoUsefulBound,
    Precision,
    RoundingModel,
    model_for_data,
    precision,
)
from kernelcheck._src.verify.adapters import Adapter, round_to
from kernelcheck._src.verify.attention.cases import (
    IID_CASES,
    Case,
    from_layout,
    to_layout,
)
from kernelcheck._src.verify.attention.diagnosis import diagnose
from kernelcheck._src.verify.attention.localise import localise
from kernelcheck._src.verify.attention.reference import PACKED, Reference
from kernelcheck._src.verify.attention.report import AttentionCase, failed_case, skipped_case
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure

__all__ = [
    "Run",
    "Judged",
    "run_case",
    "compare",
    "rounding_model",
    "call_layer",
    "call_fn",
    "raised",
    "unbounded",
    "constant_values",
    "output_of",
    "read_output",
]


class Run(NamedTuple):
    """Everything a case needs: the layer, its framework, the reference and the options."""

    fn: Any
    adapter: Adapter
    reference: Reference
    layout: str
    dtype: Precision | None  # declared storage precision (None: read it from the output)
    accumulate: Precision | None
    failure: float | None  # None: worst-case model; else the probabilistic model's failure rate
    passed: tuple  # the per-token inputs (TokenInput) handed to the layer after V, in order
    seed_value: int | None
    state: bool = False  # fn(Q, K, V, initial_state=None) -> (out, state)
    fn_kwargs: dict | None = None  # passed to every call of fn
    log_gates: bool = False  # hand fn log(g) instead of g (fla's convention)
    qk_group: int = 1  # value heads per query/key head (grouped heads: Q, K have fewer)
    offsets: Any = None  # packed sequences: a list of offsets, or a sampler offsets(rng, n)
    decimals: tuple = ()  # (TokenInput, format, values, decimals): constants given narrower
    storage_ops: int | None = None  # roundings to storage per term (None: the family's count)


class Judged(NamedTuple):
    """A case's rounded inputs, reference, output and tolerance, for the extra checks."""

    case: AttentionCase
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    extras: dict  # the per-token inputs by name (gates, ...)
    reference: np.ndarray | None
    tolerance: np.ndarray | None
    model: RoundingModel | None
    args: tuple
    kw: dict
    output: np.ndarray | None = None  # the layer's output on the case (float64, internal layout)
    state: Any = None  # the state the layer returned with it (state=True), as the layer gave it


def _is_16bit(p: Precision) -> bool:
    return p.u > PRECISIONS["float32"].u


def rounding_model(
    run: Run, out_dtype: str, shape: tuple, iid: bool = False
) -> tuple[RoundingModel, int, str]:
    """The model the layer is judged with, the roundings it did to its inputs, a note.

    Storage is the declared ``dtype`` (or the output's precision when none is
    declared); accumulation is ``accumulate`` (default float32 for 16-bit
    storage, else the storage precision).  A layer handed float64 inputs that
    computes in a lower precision rounds them itself: two more roundings per
    term.  ``dtype="tf32"`` (float32 arrays, products of TF32-rounded
    operands, float32 sums) is the storage format of the model, its operand
    roundings among the family's ``storage_ops``.  The probabilistic model
    judges only a case drawn at random, token by token (``iid``); any other
    case the worst case
    (:func:`~kernelcheck._src.core.rounding.model_for_data`), and the note says so.
    """
    note = ""
    handed = run.adapter.precision
    if run.dtype is None:
        storage = precision(out_dtype)
    else:
        storage = run.dtype
        if out_dtype not in (storage.name, handed.name):
            note = (
                f"fn returned {out_dtype} while computing in {storage.name} (dtype=): judged "
                f"in {storage.name}"
            )
    acc = run.accumulate
    if acc is None:
        acc = precision("float32") if _is_16bit(storage) else storage
    declared_ops = run.storage_ops
    if declared_ops is None:
        declared_ops = run.reference.family.storage_ops
    storage_ops = 0 if storage.u <= acc.u else declared_ops
    terms = float(np.prod(shape, dtype=np.float64)) * shape[-2] * 8
    model = model_for_data(acc, storage, storage_ops, failure=run.failure, terms=terms, iid=iid)
    if model.fallback:
        note = f"{note}; {model.fallback}" if note else model.fallback
    # a product-only format (TF32) rounds the operands of products: among storage_ops
    cast_ops = 2 if handed.u < storage.u and storage.name not in PRODUCT_ONLY else 0
    return model, cast_ops, note


def token_arguments(run: Run, extras) -> list:
    """The per-token inputs handed to the layer after ``V``, as framework arrays in its layout.

    With ``log_gates=True`` a loggable input (the gates) is handed as its
    logarithm, rounded to the precision the inputs are handed over in.
    """
    a = run.adapter
    out = []
    for ti in run.passed:
        values = ti.to_layout(extras[ti.name], run.layout)
        if run.log_gates and ti.loggable:
            with np.errstate(divide="ignore"):
                logs = np.log(values)  # a gate of exactly 0 is -inf: the log of a reset
            finite = np.isfinite(logs)
            values = np.where(finite, round_to(np.where(finite, logs, 0.0), a.precision), logs)
        out.append(a.to_framework(values))
    return out


def layer_heads(run: Run, X: np.ndarray) -> np.ndarray:
    """Queries or keys as the layer takes them: one head per group of value heads."""
    return X[..., :: run.qk_group, :, :] if run.qk_group > 1 else X


def grouped(run: Run, X: np.ndarray) -> np.ndarray:
    """Queries or keys with every value head of a group holding its group's head."""
    if run.qk_group == 1:
        return X
    return np.repeat(X[..., :: run.qk_group, :, :], run.qk_group, axis=-3)


def call_layer(run: Run, Q, K, V, extras, **kwargs):
    """``fn`` on the rounded inputs, as the layer's framework arrays in its layout.

    Packed sequences hand the layer their offsets as ``cu_seqlens=``, an
    integer array of its framework.
    """
    a = run.adapter
    Q, K = layer_heads(run, Q), layer_heads(run, K)
    args = [a.to_framework(to_layout(X, run.layout)) for X in (Q, K, V)]
    args += token_arguments(run, extras)
    if extras.get(PACKED) is not None:
        kwargs[PACKED] = a.to_framework_int(extras[PACKED])
    return call_fn(run.fn, "`fn`", *args, **{**(run.fn_kwargs or {}), **kwargs})


class _Raised(NamedTuple):
    error: BaseException


class LayerRaised(Exception):
    """An :class:`InvalidArgument` the layer itself raised (a layer built on kernelcheck).

    Handed on in this wrapper so that no check mistakes it for a refusal of
    ``verify.attention``'s own arguments: it is reported as the failed case
    it is (:func:`raised`).
    """

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def raised(exc: BaseException) -> str:
    """The layer's exception in words, ``"Type: message"``, as a failed case's note gives it."""
    error = exc.error if isinstance(exc, LayerRaised) else exc
    return f"{type(error).__name__}: {error}"


def call_fn(fn, label: str, *args, **kwargs):
    """``fn(*args, **kwargs)`` through the validation home, its own exceptions unchanged.

    :func:`~kernelcheck._src.core.validate.call_user` bounds the call by the
    ``timeout=`` of ``verify.attention`` and refuses complex, object and
    string results (``InvalidArgument`` naming ``label``: no verdict is drawn
    from them); an exception of the layer itself is re-raised as it was, for
    the caller to report as the failed case it is, except an
    ``InvalidArgument``, which is re-raised as :class:`LayerRaised`.
    """

    def guarded(*a, **k):
        try:
            return fn(*a, **k)
        except Exception as exc:  # noqa: BLE001 - handed back unchanged below
            return _Raised(exc)

    out = call_user(guarded, label, *args, **kwargs)
    if isinstance(out, _Raised):
        if isinstance(out.error, InvalidArgument):
            raise LayerRaised(out.error) from out.error
        raise out.error
    return out


def output_of(run: Run, raw):
    """The output in what ``fn`` returned: ``out``, or ``out`` of ``(out, state)``.

    With ``state=True`` the layer returns ``(out, state)``; otherwise a tuple
    or list is read as ``(out, ...)`` (the convention of layers that also
    return a state or weights, e.g. flash-linear-attention's ``(o, S)``).
    """
    if run.state:
        if not (isinstance(raw, (tuple, list)) and len(raw) == 2):
            raise InvalidArgument(
                "with state=True, `fn(Q, K, V, initial_state=None)` must return (out, state), "
                f"got {type(raw).__name__}"
            )
        return raw[0]
    if isinstance(raw, (tuple, list)) and raw:
        return raw[0]
    return raw


def read_output(run: Run, raw, expected: tuple) -> tuple[np.ndarray | None, str, str]:
    """The layer's output in float64, internal layout; its dtype name; a failure note ('' if ok)."""
    try:
        out, dname = run.adapter.to_numpy(raw, "output")
    except InvalidArgument as exc:
        return None, "", str(exc)
    if run.layout == "bnhd" and out.ndim == 4:
        out = from_layout(out, run.layout)
    if out.shape != expected:
        return None, dname, f"fn returned shape {out.shape}, expected {expected}"
    if not np.isfinite(out).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
        return out, dname, f"fn returned a non-finite value {out[where]!r} at {where}"
    return out, dname, ""


def compare(
    name: str, shape: tuple, got, ref, tol, note: str = "", tokens: bool = True
) -> AttentionCase:
    """Entrywise ``|got - ref| <= tol``: the case's verdict and its numbers.

    ``got`` and ``ref`` are finite; a ``tol`` that is not finite somewhere
    (a bound beyond the float64 range) gives a skipped case: no verdict is
    drawn from inf or NaN.  The difference, or its ratio to ``tol``, can
    still exceed the float range (a layer returning 1e308): it is then
    ``inf``, truthfully larger than any finite tolerance, and the note says so.  With
    ``tokens`` (axis -2 of the arrays is the token axis) a failure's note
    says where along it the output stops agreeing (:func:`localise`).
    """
    if not np.isfinite(tol).all():  # no verdict from an infinite (or NaN) tolerance
        return skipped_case(name, shape, _tolerance_overflow(tol, (ref,)))
    with np.errstate(over="ignore"):
        err = np.abs(got - ref)
    if not np.isfinite(err).all():
        beyond = "the difference from the reference exceeds the float64 range"
        note = f"{beyond}; {note}" if note else beyond
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(err == 0, 0.0, err / tol)
        rel = np.where(np.abs(ref) > 0, tol / np.abs(ref), np.inf)
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
    ok = bool((err <= tol).all())
    if not ok:
        beyond = f"{int((err > tol).sum())} of {err.size} entries beyond tolerance"
        beyond += f" ({localise(err, tol)})" if tokens else ""
        note = f"{beyond}; {note}" if note else beyond
    finite = rel[np.isfinite(rel)]
    return AttentionCase(
        name,
        shape,
        ok,
        float(err.max()),
        float(ratio[where]),
        float(err[where]),
        where,
        float(tol[where]),
        note,
        max_error_at=at,
        detectable=float(finite.min()) if finite.size else math.nan,
    )


def _rounded(run: Run, case: Case, extras):
    """The case's inputs (and per-token inputs) rounded to the precision they are handed over in."""
    p = run.adapter.precision
    Q, K, V = (round_to(np.asarray(X), p) for X in (case.Q, case.K, case.V))
    Q, K = grouped(run, Q), grouped(run, K)
    rounded = {}
    for ti in run.reference.family.token_inputs:
        if ti.name not in extras:
            continue  # an input the family accepts but the call leaves out
        values = round_to(extras[ti.name], p)
        if ti.positive:
            # a gate of 1 - 2^-12 rounds to 1 in bfloat16 (fine); one below the range would be 0
            values = np.where(values > 0, values, np.nextafter(0.0, 1.0, dtype=np.float64))
        rounded[ti.name] = values
    if PACKED in extras:
        rounded[PACKED] = extras[PACKED]
    return Q, K, V, rounded


def run_case(run: Run, case: Case, extras, explain: bool = True) -> Judged:
    """Run ``fn`` on one case and judge its output (a skipped or failed case is not an error).

    ``explain=False`` leaves a failure undiagnosed (the replicates of a statistical check).
    """
    ref_obj = run.reference.for_case(extras)
    if case.skip or case.Q is None:
        return _judged(skipped_case(case.name, (), case.skip))
    shape = tuple(case.Q.shape)
    try:
        Q, K, V, g = _rounded(run, case, extras)
    except InvalidArgument as exc:
        return _judged(skipped_case(case.name, shape, str(exc)))
    try:
        args, kw = ref_obj.args(Q, K, V, g)
        with np.errstate(all="ignore"):
            ref = ref_obj.output(args, kw)
    except (BadNormalizer, NumericalFailure) as exc:
        reason = str(exc).split(";")[0]
        return _judged(skipped_case(case.name, shape, f"reference not defined here: {reason}"))
    except InvalidArgument as exc:
        if case.name == "d=1":
            return _judged(skipped_case(case.name, shape, f"reference does not accept d=1: {exc}"))
        raise
    try:
        returned = call_layer(run, Q, K, V, g, **({"initial_state": None} if run.state else {}))
        raw = output_of(run, returned)
    except InvalidArgument:
        raise
    except Exception as exc:  # the user's code failed on this input: a finding, not a crash
        return _judged(failed_case(case.name, shape, f"fn raised {raised(exc)}"))
    got, dname, problem = read_output(run, raw, ref.shape)
    if got is None or problem and not dname:
        return _judged(failed_case(case.name, shape, problem))
    model, cast_ops, note = rounding_model(run, dname, shape, case.name in IID_CASES)
    range_problem = _out_of_range(ref_obj.largest_intermediates(args, kw), model)
    if range_problem:
        return _judged(skipped_case(case.name, shape, range_problem))
    try:
        with np.errstate(all="ignore"):
            tol = ref_obj.tolerance(args, kw, model, cast_ops, ref, Q.shape[-1])
    except NoUsefulBound as exc:
        return _judged(skipped_case(case.name, shape, unbounded(model, shape[-2], exc)))
    if problem:  # a non-finite output
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(got))[0])
        c = AttentionCase(
            case.name, shape, False, math.inf, math.inf, math.inf, where, float(tol[where]), problem
        )
        return Judged(c, Q, K, V, g, ref, tol, model, args, kw, None, _state_of(run, returned))
    if not np.isfinite(tol).all():  # no verdict from an infinite (or NaN) tolerance
        why = ref_obj.spec.judged(args, kw, tol) or _tolerance_overflow(tol, (Q, K, V))
        return _judged(skipped_case(case.name, shape, why))
    flushed = _flushed(run, *(np.asarray(X) for X in (case.Q, case.K, case.V)))
    note = "; ".join(x for x in (note, flushed) if x)
    result = compare(case.name, shape, got, ref, tol, note)
    if result.passed is False and PACKED not in g and explain:
        diagnosis = diagnose(ref_obj.spec, args, kw, got, tol, g, ref)
        if run.decimals and "within rounding" not in diagnosis:
            diagnosis = _decimals_diagnosis(run, (Q, K, V), g, got, tol) or diagnosis
        result = dataclasses.replace(result, diagnosis=diagnosis)
    return Judged(result, Q, K, V, g, ref, tol, model, args, kw, got, _state_of(run, returned))


def unbounded(model: RoundingModel | None, tokens: int, exc: NoUsefulBound) -> str:
    """Why a case or check of ``tokens`` tokens has no worst-case tolerance, and what to change."""
    acc = "float64" if model is None else model.accumulate.name
    return (
        f"no worst-case tolerance over {tokens} tokens with sums in {acc} (accumulate="
        f"{acc!r}): {exc}; check fewer tokens (a smaller `n`, or shorter `inputs`), pass a "
        "wider `accumulate` (float32), or error_model='probabilistic' (the cases drawn at random)"
    )


def _tolerance_overflow(tol: np.ndarray, arrays) -> str:
    """Why a case has no tolerance: its error bound is beyond the float64 range somewhere."""
    bad = ~np.isfinite(tol)
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    big = max(float(np.abs(X).max(initial=0.0)) for X in arrays)
    return (
        f"the error bound is not finite at {int(bad.sum())} of {tol.size} entries (first at "
        f"{where}): it exceeds the float64 range for values this large (up to {big:.3g}), so "
        "no verdict is drawn; scale the inputs down"
    )


def _flushed(run: Run, Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> str:
    """How many nonzero inputs round to zero in the precision they are handed over in ('' if none).

    ``V * 1e-300`` handed over in float32 is zeros: the layer and the
    reference both see zeros, and the case checks zeros; the note says so.
    """
    p = run.adapter.precision
    parts = []
    for name, X in (("Q", layer_heads(run, Q)), ("K", layer_heads(run, K)), ("V", V)):
        with np.errstate(all="ignore"):
            lost = int(np.count_nonzero((X != 0) & (round_to(X, p) == 0)))
        if lost:
            parts.append(f"{lost} of {X.size} entries of {name}")
    if not parts:
        return ""
    return (
        f"{' and '.join(parts)} are nonzero but flush to 0 in {p.name}, the precision the "
        f"inputs are handed over in (below half its smallest subnormal, {p.eta:.3g}): the "
        "layer and the reference see zeros there"
    )


def constant_values(ti, value: np.ndarray, shape: tuple) -> np.ndarray:
    """A per-token input fixed per head (``value``: batch_shape's axes) broadcast to ``shape``."""
    if ti.per_token and np.ndim(value) > ti.trailing:
        # one value per head, the same for every token: a token axis before the width's
        value = np.expand_dims(value, ti.axis)
    return np.broadcast_to(value, shape).copy()


def _decimals_diagnosis(run: Run, qkv: tuple, extras, got, tol) -> str:
    """The output explained by a constant's decimals instead of its narrower values ('' if not).

    A constant given in float32 (``torch.tensor(0.9)``) holds 0.899999976; a
    layer computing with 0.9 itself differs from the reference by more than
    its rounding when it computes in float64.
    """

    def text(x: np.ndarray) -> str:
        values = np.unique(x)
        return ", ".join(repr(float(v)) for v in values[:4]) + (" ..." if values.size > 4 else "")

    for ti, fmt, given, decimals in run.decimals:
        changed = dict(extras)
        changed[ti.name] = round_to(
            constant_values(ti, decimals, extras[ti.name].shape), run.adapter.precision
        )
        try:
            with np.errstate(all="ignore"):
                Q, K, V = qkv
                ref = run.reference.output(*run.reference.args(Q, K, V, changed))
        except Exception:  # noqa: BLE001 - a diagnosis never turns a report into a crash
            continue
        with np.errstate(invalid="ignore"):
            if not (np.abs(got - ref) <= tol).all():
                continue
        return (
            f"the output is the reference with {ti.option} = {text(decimals)}, within rounding: "
            f"`{ti.option}` was given in {fmt}, which holds {text(given)}, and the reference "
            f"uses that value; pass {ti.option} as float64 numbers ({text(decimals)}), or give "
            f"the layer the {fmt} value"
        )
    return ""


def _out_of_range(largest: tuple[float, float], model: RoundingModel) -> str:
    """Why a case tests the formats' range rather than the layer's arithmetic ('' if it does not).

    What the layer stores must stay below half the storage format's largest
    number, what it accumulates below half the accumulation format's.
    """
    for big, p, what in zip(largest, (model.storage, model.accumulate),
                            ("stores", "accumulates"), strict=True):  # fmt: skip
        if big > p.max / 2:
            return (
                f"the values the layer {what} reach {big:.3g}, beyond half of {p.name}'s largest "
                f"number {p.max:.3g}: this case tests the format's range, not the layer's "
                "arithmetic"
            )
    return ""


def _state_of(run: Run, returned):
    """The state of ``(out, state)`` with ``state=True`` (None otherwise)."""
    return returned[1] if run.state else None


def _judged(case: AttentionCase) -> Judged:
    return Judged(case, None, None, None, {}, None, None, None, (), {})  # type: ignore[arg-type]
