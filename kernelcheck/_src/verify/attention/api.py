"""``verify.attention``: does another project's attention layer compute what it claims?

Claims C1, C10, C14, C19, C20.  The user's layer ``fn`` is run on generated
inputs (edge cases included) or on the user's own, in its framework (NumPy,
PyTorch, JAX), precision (float64 down to bfloat16), device and layout, and
compared entrywise with one form of kernelcheck's attention registry
(:data:`kernelcheck.attention.FORMS`):

* no ``kernel`` and no ``feature_map``: exact softmax attention;
* ``kernel``: exact kernelized attention;
* ``feature_map`` (one map, or a pair ``(phi_q, phi_k)``): linear attention,
  normalised or not (``normalize=``, C19);
* ``feature_map`` and ``decay``: gated linear attention (C20).

The reference is computed in float64 from exactly the rounded inputs the
layer received.  The tolerance of every entry is the reference form's
a-priori error bound in the layer's rounding model (storage precision,
accumulation precision, worst case or Higham and Mary's probabilistic model)
plus the same bound in float64 for the reference, plus the exact effect of a
declared stabiliser.  A failing case is diagnosed against known bug shapes;
extra checks cover causality by perturbation, a state handed over between
calls, and the output's independence of a chunk size.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.registry import SELECTING_OPTIONS, select_family
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.deadline import honours_timeout
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.rounding import Precision, Tolerance, precision
from kernelcheck._src.core.seeds import as_rng
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_int_tuple,
    as_probability,
    as_real,
    check_callable,
    check_choice,
)
from kernelcheck._src.mc.engine import child_seed, root_seed_sequence
from kernelcheck._src.verify.adapters import adapter
from kernelcheck._src.verify.attention.cases import (
    CASES,
    LAYOUTS,
    Case,
    generate_cases,
    user_case,
)
from kernelcheck._src.verify.attention.checks import (
    causality_check,
    chunk_size_checks,
    grad_checks,
    state_checks,
    state_reader,
    takes,
)
from kernelcheck._src.verify.attention.reference import Reference, scale_option
from kernelcheck._src.verify.attention.report import AttentionCase, AttentionReport
from kernelcheck._src.verify.attention.run import Run, run_case
from kernelcheck.errors import InvalidArgument

__all__ = ["attention", "AttentionReport", "AttentionCase"]

#: Error models of :func:`attention`.
ERROR_MODELS = ("worst-case", "probabilistic")


class _Options(NamedTuple):
    """The validated options of one call, by name, passed down as one record."""

    run: Run
    rng: np.random.Generator
    cases: list[Case]
    constants: dict[str, np.ndarray]  # per-token inputs fixed per head by the options
    samplers: dict[str, Any]  # per-token inputs drawn per case, handed to fn
    state: bool
    read_state: Any
    check_causality: bool
    grad: bool
    vjp: Any


def _family_iv(o: dict):
    """The family the selecting options choose (``kernel``, ``feature_map``, ``decay``, ...)."""
    given = frozenset(name for name in SELECTING_OPTIONS if o.get(name) is not None)
    return select_family(given)


def _token_inputs_iv(family, o: dict, causal: bool, batch: tuple[int, ...]):
    """The family's per-token inputs: constants per head, or samplers ``f(rng, shape)``.

    A number or an array broadcastable to the batch (one value per head) is
    the layer's own constant; a callable draws values per token for every
    case, handed to the layer after ``V``.  Validated once, here.
    """
    constants: dict[str, np.ndarray] = {}
    samplers: dict[str, Any] = {}
    if family.token_inputs and not causal and all(f.causal_only for f in family.forms):
        option = family.token_inputs[0].option
        raise InvalidArgument(
            f"`{option}` applies to causal attention only ({family.summary} orders the "
            "tokens); pass causal=True"
        )
    for ti in family.token_inputs:
        value = o[ti.option]
        if callable(value):
            samplers[ti.name] = value
            continue
        values = ti.validate(value, np.shape(value), ti.option)
        head_shape = np.shape(values)[: np.ndim(values) - ti.trailing]
        try:
            if np.broadcast_shapes(head_shape, batch) != batch:
                raise ValueError  # it would widen the batch, not fill it
        except ValueError:
            raise InvalidArgument(
                f"`{ti.option}` as an array is one {ti.option} per head and must broadcast to "
                f"batch_shape {batch}, got shape {head_shape}; pass a function "
                f"{ti.option}(rng, shape) for values per token"
            ) from None
        constants[ti.name] = np.asarray(values, dtype=np.float64)
    return constants, samplers


def _extras(opts: _Options, case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The per-token inputs of one case: constants per head broadcast, or drawn per token."""
    if case.skip or case.Q is None or case.V is None:
        return {}
    out = {}
    batch, n = case.Q.shape[:-2], case.Q.shape[-2]
    inputs = opts.run.reference.family.token_inputs
    d, d_v = case.Q.shape[-1], case.V.shape[-1]
    needs_D = any(ti.width == "D" for ti in inputs)
    sizes = opts.run.reference.spec.sizes(d, d_v) if needs_D else {"d": d, "d_v": d_v}
    for ti in inputs:
        shape = ti.shape(batch, n, sizes)
        if ti.name in opts.samplers:
            label = f"{ti.option}(rng, shape)"
            drawn = call_user(opts.samplers[ti.name], f"`{ti.option}`", rng, shape)
            out[ti.name] = np.array(ti.validate(drawn, shape, label), dtype=np.float64)
        else:
            value = opts.constants[ti.name]
            if ti.per_token and np.ndim(value) > ti.trailing:
                # one value per head, the same for every token: a token axis before the width's
                value = np.expand_dims(value, ti.axis)
            out[ti.name] = np.broadcast_to(value, shape).copy()
    return out


def _precision_iv(framework, dtype, device, accumulate):
    if dtype is None:
        prec = precision("float64" if framework == "numpy" else "float32")
    else:
        prec = precision(dtype)
    ad = adapter(framework, prec, device)
    try:
        acc = None if accumulate is None else precision(accumulate)
    except InvalidArgument as exc:  # precision() speaks of a dtype; this one is `accumulate`
        raise InvalidArgument(f"`accumulate`: {exc}") from None
    declared: Precision | None = None if dtype is None and framework == "numpy" else prec
    return ad, declared, acc


def _reference_iv(o: dict, family) -> Reference:
    """The reference of the family, from the options its specification reads."""
    selecting = {x for x in family.options - {"kernel", "feature_map"} if o.get(x) is not None}
    kernel, feature_map = o["kernel"], o["feature_map"]
    if kernel is not None:
        check_callable(kernel, "kernel")
    scale = o["scale"]
    if scale is not None and (kernel is not None or feature_map is not None):
        raise InvalidArgument(
            "`scale` applies to the softmax reference only; the kernel or feature map carries "
            "its own scale"
        )
    normalize = as_bool(o["normalize"], "normalize")
    if not normalize and feature_map is None:
        raise InvalidArgument("`normalize=False` applies to linear attention: pass `feature_map`")
    feature_ops = (
        None if o["feature_ops"] is None else as_int(o["feature_ops"], "feature_ops", minimum=0)
    )
    stabilizer = o["stabilizer"]
    if stabilizer is not None:
        stabilizer = as_real(stabilizer, "stabilizer", nonnegative=True)
        if kernel is None and feature_map is None:
            raise InvalidArgument(
                "`stabilizer` is an eps added to the normaliser of kernelized or linear "
                "attention; softmax has no such normaliser"
            )
    return Reference.of(
        causal=o["causal"], feature_map=_feature_pair(feature_map), selecting=selecting,
        normalize=normalize, scale=scale_option(scale), kernel=kernel, stabilizer=stabilizer,
        feature_ops=feature_ops,
    )  # fmt: skip


def _state_iv(fn, o: dict, ref: Reference, causal: bool) -> bool:
    state = as_bool(o["state"], "state")
    if state and not ref.spec.has_state:
        raise InvalidArgument(
            "`state=True` checks a recurrent state (S, z): it needs a linear or gated reference "
            "(`feature_map=`), and causal=True"
        )
    if state and not causal:
        raise InvalidArgument("`state=True` needs causal=True: a state carries the past tokens")
    if state and not takes(fn, "initial_state"):
        raise InvalidArgument(
            "`state=True` calls fn(Q, K, V, initial_state=None) and expects (out, state) back, "
            "but `fn` takes no `initial_state` argument"
        )
    if o["read_state"] is not None:
        check_callable(o["read_state"], "read_state")
    return state


def _attention_iv(fn, o: dict) -> _Options:
    check_callable(fn, "fn")
    family = _family_iv(o)
    o["causal"] = causal = as_bool(o["causal"], "causal")
    ref = _reference_iv(o, family)
    rng = as_rng(o["seed"])
    n = as_int(o["n"], "n", minimum=2)
    fixed_d = o["d"] is not None
    d = 8 if o["d"] is None else as_int(o["d"], "d", minimum=1)
    d_v = d if o["d_v"] is None else as_int(o["d_v"], "d_v", minimum=1)
    batch = as_int_tuple(o["batch_shape"], "batch_shape", minimum=1)
    layout = check_choice(o["layout"], "layout", LAYOUTS)
    if layout == "bnhd" and len(batch) != 2:
        raise InvalidArgument(
            f"layout='bnhd' needs batch_shape=(batch, heads), got batch_shape={batch}"
        )
    ad, declared, acc = _precision_iv(o["framework"], o["dtype"], o["device"], o["accumulate"])
    error_model = check_choice(o["error_model"], "error_model", ERROR_MODELS)
    failure = as_probability(o["failure_probability"], "failure_probability")
    constants, samplers = _token_inputs_iv(family, o, causal, batch)
    state = _state_iv(fn, o, ref, causal)
    names = _case_names(o["cases"], o["inputs"])
    if o["inputs"] is not None:
        cases = [user_case(o["inputs"], layout)]
    else:
        _check_case_sizes(n, d, d_v, batch)
        cases = generate_cases(rng, n, d, d_v, batch, fixed_d=fixed_d, names=names)
    seed = o["seed"]
    seed_value = (
        int(seed) if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else None
    )
    fn_kwargs = o["fn_kwargs"]
    if fn_kwargs is not None and not (
        isinstance(fn_kwargs, dict) and all(isinstance(k, str) for k in fn_kwargs)
    ):
        raise InvalidArgument(
            f"`fn_kwargs` must be a dict of keyword arguments (names as strings), got {fn_kwargs!r}"
        )
    run = Run(
        fn=fn, adapter=ad, reference=ref, layout=layout, dtype=declared, accumulate=acc,
        failure=failure if error_model == "probabilistic" else None,
        passed=tuple(ti for ti in family.token_inputs if ti.name in samplers),
        seed_value=seed_value, state=state, fn_kwargs=dict(fn_kwargs or {}),
        log_gates=as_bool(o["log_gates"], "log_gates"),
    )  # fmt: skip
    check = as_bool(o["check_causality"], "check_causality")
    grad = as_bool(o["grad"], "grad")
    if o["vjp"] is not None:
        check_callable(o["vjp"], "vjp")
    return _Options(
        run=run, rng=rng, cases=cases, constants=constants, samplers=samplers, state=state,
        read_state=o["read_state"], check_causality=check and causal, grad=grad, vjp=o["vjp"],
    )  # fmt: skip


def _feature_pair(feature_map) -> tuple[Any, Any] | None:
    """One map for both sides, or a pair ``(phi_q, phi_k)`` (performer's ``is_query`` split)."""
    if feature_map is None:
        return None
    if isinstance(feature_map, (tuple, list)):
        if len(feature_map) != 2:
            raise InvalidArgument(
                "`feature_map` must be one callable or a pair (phi_q, phi_k), got a sequence of "
                f"{len(feature_map)}"
            )
        return check_callable(feature_map[0], "feature_map[0]"), check_callable(
            feature_map[1], "feature_map[1]"
        )
    check_callable(feature_map, "feature_map")
    return feature_map, feature_map


def _check_case_sizes(n: int, d: int, d_v: int, batch: tuple[int, ...]) -> None:
    """Refuse, before any draw, cases that cannot fit in memory.

    The eight generated cases hold about ``9 n + 7`` tokens of ``2 d + d_v``
    numbers per batch entry (``odd length`` has ``2 n + 5``); the layer's
    inputs in its framework, its output and the float64 reference hold a few
    times as much again (a factor 3 is counted).
    """
    per_token = 2 * d + d_v
    elements = 3 * math.prod(batch) * (9 * n + 7) * per_token
    check_size(elements, f"the cases of verify.attention (n = {n}, batch_shape = {batch})")


def _case_names(cases, inputs) -> tuple[str, ...]:
    if cases is None:
        return CASES
    if inputs is not None:
        raise InvalidArgument("pass `cases` or `inputs`, not both: user inputs are one case")
    if isinstance(cases, str):
        cases = (cases,)
    if not isinstance(cases, (list, tuple)):
        raise InvalidArgument(
            f"`cases` must be a case name or a list of them ({', '.join(CASES)}), got {cases!r}"
        )
    names = tuple(check_choice(c, "cases", CASES) for c in cases)
    if not names:
        raise InvalidArgument(f"`cases` must name at least one of {', '.join(CASES)}")
    return names


@honours_timeout
def attention(
    fn: Any,
    *,
    kernel: Any = None,
    feature_map: Any = None,
    causal: bool = False,
    seed: Any = 0,
    n: int = 16,
    d: int | None = None,
    d_v: int | None = None,
    batch_shape: tuple = (),
    scale: Any = None,
    dtype: Any = None,
    feature_ops: int | None = None,
    framework: str = "numpy",
    device: Any = None,
    accumulate: Any = None,
    error_model: str = "worst-case",
    failure_probability: float = 1e-9,
    cases: Any = None,
    inputs: Any = None,
    layout: str = "...nd",
    normalize: bool = True,
    decay: Any = None,
    stabilizer: float | None = None,
    state: bool = False,
    read_state: Any = None,
    check_causality: bool = True,
    grad: bool = False,
    vjp: Any = None,
    fn_kwargs: dict | None = None,
    log_gates: bool = False,
    timeout: float | None = None,
) -> AttentionReport:
    """Check an attention layer against kernelcheck's reference (claims C1, C10, C14, C19, C20).

    ``fn`` gets ``Q, K`` of shape (*batch_shape, n, d) and ``V`` of shape
    (*batch_shape, n, d_v) on eight built-in cases (or the user's inputs) and
    passes when ``|fn - ref| <= tol_ref + tol_fn`` entrywise: the reference's
    bound in float64 plus the same bound in the layer's rounding model.  The
    cases, the rounding models and the extra checks are described in
    docs/attention.md ("Verifying another project's layer").

    Parameters
    ----------
    fn : callable
        The layer: ``fn(Q, K, V)``; ``fn(Q, K, V, g)`` with a ``decay``
        sampler; ``fn(Q, K, V, initial_state=None) -> (out, state)`` with
        ``state=True``.  Complex, object or string output is refused.
    kernel, feature_map : optional
        The reference: exact attention with ``kernel``, or linear attention
        with ``feature_map`` (``(phi_q, phi_k)`` for two maps; applied to
        float64 rows).  Default: softmax.
    causal, normalize : bool
        Causal mask; normalised (default) or unnormalised (C19) linear form.
    seed, n, d, d_v
        Seed (int, SeedSequence or Generator); length of the ``random``
        case (>= 2); key and value sizes (default 8; a given ``d`` is the
        layer's fixed head size).
    batch_shape, layout, scale
        Leading dimensions (tuple of int); ``"...nd"`` or ``"bnhd"``; the
        softmax logit scale, or a function of ``d`` (default ``1/sqrt(d)``).
    dtype, framework, device, accumulate : optional
        Input precision (``"float64"`` ... ``"bfloat16"`` or a framework
        dtype; default float64 for NumPy, float32 for torch and jax), the
        framework (``"numpy"``, ``"torch"``, ``"jax"``), the device, and
        the precision ``fn`` accumulates in (default float32 for 16-bit).
    feature_ops : int, optional
        Rounded operations per feature entry (default ``ops`` or ``2d + 8``).
    error_model, failure_probability
        ``"worst-case"`` or ``"probabilistic"`` (this failure rate per case).
    cases, inputs : optional
        Case names to run, or one user case ``(Q, K, V)`` in float64.
    decay, log_gates : optional
        Gated reference (C20): the layer's constant decay (per head), or a
        sampler ``decay(rng, shape) -> gates`` in (0, 1] handed to ``fn``
        (their logarithms with ``log_gates=True``, fla's convention).
    stabilizer : float, optional
        An eps the layer adds to its normaliser; the tolerance grows by
        its exact effect ``|a| eps / den``.
    state, read_state : optional
        Check the final state and a prefill-then-decode hand-over;
        ``read_state(layer_state) -> S or (S, z)`` for another layout.
    check_causality : bool
        With ``causal=True``, perturb future tokens and report a leak.
    grad, vjp : optional
        Check the backward pass along a random cotangent against
        :func:`~kernelcheck.attention.softmax_vjp` or
        :func:`~kernelcheck.attention.linear_vjp`; torch and jax layers are
        differentiated by their framework, a NumPy layer needs
        ``vjp(Q, K, V, G) -> (dQ, dK, dV)``.
    fn_kwargs : dict, optional
        Keyword arguments for every call of ``fn`` (a tuple result is ``(out, ...)``).
    timeout : float, optional
        Seconds each call of a user callable (``fn`` and its backward pass
        included) may take; then it is abandoned with ``InvalidArgument``.

    Returns
    -------
    AttentionReport

    Examples
    --------
    >>> import numpy as np
    >>> from kernelcheck import verify
    >>> def unnormalised(Q, K, V):   # forgot to divide by the row sums
    ...     S = Q @ K.T / np.sqrt(Q.shape[-1])
    ...     return np.exp(S - S.max(axis=-1, keepdims=True)) @ V
    >>> report = verify.attention(unnormalised)
    >>> report.passed, "missing normaliser" in report.failures()[0].diagnosis
    (False, True)
    """
    opts = _attention_iv(fn, {k: v for k, v in locals().items() if k != "fn"})
    root = root_seed_sequence(opts.rng)
    judged = [
        run_case(opts.run, c, _extras(opts, c, np.random.default_rng(child_seed(root, i))))
        for i, c in enumerate(opts.cases)
    ]
    checks = _extra_checks(opts, judged, np.random.default_rng(child_seed(root, len(judged))))
    return _report(opts, [j.case for j in judged], checks)


def _extra_checks(opts: _Options, judged, rng) -> list[AttentionCase]:
    base = next((j for j in judged if j.reference is not None and j.case.name in
                 ("random", "user inputs")), None)  # fmt: skip
    if base is None:
        return []
    checks: list[AttentionCase] = []
    if opts.check_causality:
        checks.append(causality_check(opts.run, base, rng))
    if opts.state:
        read = state_reader(opts.run.adapter, opts.read_state)
        checks += state_checks(opts.run, base, read)
    if takes(opts.run.fn, "chunk_size", explicitly=True):
        checks += chunk_size_checks(opts.run, base)
    if opts.grad:
        for j in judged:
            if j.case.name in ("random", "positive values", "user inputs"):
                checks += grad_checks(opts.run, j, rng, opts.vjp)
    return checks


def _report(opts: _Options, results, checks) -> AttentionReport:
    run = opts.run
    everything = [*results, *checks]
    judged = [c for c in results if c.passed is not None]
    passed = bool(judged) and all(c.passed for c in everything if c.passed is not None)
    worst = max(
        (c for c in everything if c.passed is not None),
        key=lambda c: c.ratio if not math.isnan(c.ratio) else math.inf,
        default=None,
    )
    largest = max(
        (c for c in everything if c.passed is not None and math.isfinite(c.max_error)),
        key=lambda c: c.max_error,
        default=None,
    )
    model = run.reference.model
    prec = _precision_text(run)
    source = f"{model}: float64 reference + the same model in fn's precision ({prec})"
    notes = sorted(
        {c.note for c in results if c.note.startswith("fn returned") and "judged" in c.note}
    )
    if run.reference.stabilizer:
        notes.append(
            f"stabilizer eps = {run.reference.stabilizer:g} in the normaliser: the tolerance "
            "includes its exact effect |a| eps / den"
        )
    common: dict[str, Any] = dict(
        largest_error=largest.max_error if largest else math.nan,
        largest_error_case=largest.name if largest else None,
        checks=tuple(checks),
        framework=run.adapter.framework,
        precision=prec,
        notes=tuple(notes),
    )
    if worst is None:
        return AttentionReport(False, run.reference.name, run.reference.causal, None, math.nan,
                               None, Tolerance(math.nan, source), tuple(results), run.seed_value,
                               **common)  # fmt: skip
    return AttentionReport(
        passed,
        run.reference.name,
        opts.run.reference.causal,
        worst.name,
        worst.error,
        worst.where,
        Tolerance(worst.tolerance, source),
        tuple(results),
        run.seed_value,
        **common,
    )


def _precision_text(run: Run) -> str:
    p = run.adapter.precision
    storage = "the output's dtype" if run.dtype is None else run.dtype.name
    acc = run.accumulate.name if run.accumulate is not None else (
        "float32" if run.dtype is not None and run.dtype.u > 2.0**-24 else storage
    )  # fmt: skip
    model = "worst case" if run.failure is None else (
        f"probabilistic, failure probability {run.failure:g} per case"
    )  # fmt: skip
    return f"inputs handed over in {p.name}; storage {storage}, accumulation {acc}; {model}"


def assert_attention_matches(fn: Any, **kwargs: Any) -> AttentionReport:
    """Assert that ``fn`` matches the reference attention; the pytest twin of :func:`attention`.

    Takes the arguments of :func:`attention`.  Returns the report when it
    passes, else raises ``AssertionError`` whose message is the report's
    verdict followed by one line per case; kernelcheck's own frames are
    hidden from pytest's traceback.

    Examples
    --------
    >>> from kernelcheck.testing import assert_attention_matches
    >>> from kernelcheck.attention import softmax
    >>> layer = lambda Q, K, V: softmax(Q, K, V, causal=True)
    >>> assert_attention_matches(layer, causal=True).passed
    True
    """
    __tracebackhide__ = True
    report = attention(fn, **kwargs)
    if not report.passed:
        raise AssertionError(f"{report}\n{report.details()}")
    return report
