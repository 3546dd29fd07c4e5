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

import functools
import math
from typing import Any

import numpy as np

from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.deadline import honours_timeout
from kernelcheck._src.core.memo import memo_scope
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.core.seeds import child_seed
from kernelcheck._src.core.validate import to_numpy
from kernelcheck._src.verify.attention.cases import (
    ACROSS_BLOCKS,
    Case,
)
from kernelcheck._src.verify.attention.checks import (
    causality_check,
    chunk_size_checks,
    grad_checks,
    state_checks,
    state_reader,
    takes,
)
from kernelcheck._src.verify.attention.options import (
    AttentionOptions,
    attention_options,
    offsets_iv,
)
from kernelcheck._src.verify.attention.reference import PACKED
from kernelcheck._src.verify.attention.report import AttentionCase, AttentionReport, skipped_case
from kernelcheck._src.verify.attention.run import Run, constant_values, run_case
from kernelcheck._src.verify.attention.systematic import systematic_checks

__all__ = ["attention", "AttentionReport", "AttentionCase"]


def _extras(opts: AttentionOptions, case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
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
        if ti.name not in opts.samplers and ti.name not in opts.constants:
            continue  # an input the family accepts but the call leaves out
        shape = ti.shape(batch, n, sizes)
        if ti.name in opts.samplers:
            label = f"{ti.option}(rng, shape)"
            drawn = call_user(opts.samplers[ti.name], f"`{ti.option}`", rng, shape)
            drawn = to_numpy(drawn, label)  # a tensor of any dtype or device
            out[ti.name] = np.array(ti.validate(drawn, shape, label), dtype=np.float64)
        else:
            out[ti.name] = constant_values(ti, opts.constants[ti.name], shape)
    packed = _offsets(opts, n, rng)
    if packed is not None:
        out[PACKED] = packed
    return out


def _offsets(opts: AttentionOptions, n: int, rng: np.random.Generator):
    """The case's sequence offsets: as given, or ``offsets(rng, n)`` checked; None unpacked."""
    given = opts.run.offsets
    if given is None:
        return None
    if not callable(given):
        return np.asarray(given, dtype=np.int64)
    drawn = call_user(given, "`offsets`", rng, n)
    return offsets_iv(drawn, "offsets(rng, n)", n)


@honours_timeout
def attention(
    fn: Any, *, kernel: Any = None, feature_map: Any = None, causal: bool = False,
    normalize: bool | None = None, scale: Any = None, stabilizer: float | None = None,
    feature_ops: int | None = None, storage_ops: int | None = None, seed: Any = 0, n: int = 16,
    d: int | None = None, d_v: int | None = None, batch_shape: tuple = (), layout: str = "...nd",
    qk_heads: int | None = None, offsets: Any = None, cases: Any = None, inputs: Any = None,
    dtype: Any = None, framework: str = "numpy", device: Any = None, accumulate: Any = None,
    error_model: str = "worst-case", failure_probability: float = 1e-9, state: bool = False,
    read_state: Any = None, state_layout: str = "key-major", check_causality: bool = True,
    grad: bool = False, vjp: Any = None, fn_kwargs: dict | None = None,
    log_gates: bool = False, timeout: float | None = None, progress: Any = None,
    **family_options: Any,
) -> AttentionReport:  # fmt: skip
    """Check an attention layer against kernelcheck's reference (claims C1, C10, C14, C19-C24).

    ``fn`` passes when ``|fn - ref| <= tol_ref + tol_fn`` entrywise on every case: the
    bound of the reference family (chosen by the options, see docs/attention.md) in
    float64 plus the same bound in the layer's rounding model.

    Parameters
    ----------
    fn : callable
        The layer ``fn(Q, K, V, *per_token_inputs, **fn_kwargs)``; with
        ``state=True`` it takes ``initial_state=`` and returns ``(out, state)``.
    kernel : callable, default None
        Exact kernelized attention with this kernel (C10).
    feature_map : callable or (callable, callable), default None
        Linear attention with this map (or ``(phi_q, phi_k)``), applied to float64 rows.
    causal : bool, default False
        Causal mask.
    normalize : bool, default None
        Normalised linear attention (C10) or not (C19); None: the family's own (linear: True).
    scale : float or callable, default None
        Softmax's logit scale, or a function of ``d`` (None: ``1/sqrt(d)``).
    stabilizer : float, default None
        An eps the layer adds to its normaliser (its exact effect is allowed).
    feature_ops : int, default None
        Roundings per feature entry (None: the map's ``ops``, else ``2 d + 8``).
    seed : int, SeedSequence or Generator, default 0
        Seed of the generated cases and checks.
    n : int, default 16
        Length of the ``random`` case (>= 2).
    d : int, default None
        The layer's fixed key size (None: 8, and a case with ``d = 1``).
    d_v : int, default None
        Value size (None: ``d``).
    batch_shape : tuple of int, default ()
        Leading (batch, head) dimensions.
    layout : {"...nd", "bnhd"}, default "...nd"
        The layout of the arrays handed to ``fn``.
    qk_heads : int, default None
        Query/key heads when fewer than the value heads ``batch_shape[-1]``.
    offsets : sequence of int or callable, default None
        Packed sequences: ``cu_seqlens`` (handed to ``fn`` by that name), or ``offsets(rng, n)``.
    cases : str or list of str, default None
        Case names to run (None: all).
    inputs : (Q, K, V), default None
        One user case in float64 instead of the generated ones.
    dtype : str or framework dtype, default None
        Input precision (None: float64 for NumPy, float32 for torch and jax); ``"tf32"``:
        products of TF32 operands, ``"tf32-nearest"``: operands rounded to nearest, not truncated.
    framework : {"numpy", "torch", "jax"}, default "numpy"
        The layer's framework.
    device : str, default None
        The framework device the inputs are put on.
    accumulate : str, default None
        The precision ``fn`` accumulates in (None: float32 for 16-bit inputs).
    storage_ops : int, default None
        Roundings to ``dtype`` per term where the bounds count them (None: the family's count).
    error_model : {"worst-case", "probabilistic"}, default "worst-case"
        The rounding model of the tolerance.
    failure_probability : float, default 1e-9
        The probabilistic model's failure rate per case.
    state : bool, default False
        Check the final state and a prefill-then-decode hand-over.
    read_state : callable, default None
        ``read_state(layer_state) -> S or (S, z)`` for a layout of its own.
    state_layout : {"key-major", "value-major"}, default "key-major"
        ``S`` of shape (..., D, d_v), or transposed (Mamba-2).
    check_causality : bool, default True
        With ``causal=True``, perturb future tokens and report a leak.
    grad : bool, default False
        Check the gradients along a random cotangent against the family's VJP.
    vjp : callable, default None
        A NumPy layer's backward pass ``vjp(Q, K, V, G) -> (dQ, dK, dV)``.
    fn_kwargs : dict, default None
        Keyword arguments for every call of ``fn``.
    log_gates : bool, default False
        Hand the layer the logarithms of its gates (flash-linear-attention's convention).
    timeout : float, default None
        Seconds each call of a user callable may take.
    progress : callable, default None
        ``progress(done, total, step)`` after each step (ints and the step's name).
    **family_options
        The recurrent families' per-token inputs and flags by registry name (``decay``,
        ``key_decay``, ``value_decay``, ``bonus``, ``beta``, ``dplr_a``, ``dplr_b``,
        ``qk_l2norm``): a constant per head, or a sampler ``f(rng, shape)`` handed to ``fn``.

    Returns
    -------
    AttentionReport

    Examples
    --------
    >>> from kernelcheck import verify
    >>> from kernelcheck.attention import softmax
    >>> verify.attention(lambda Q, K, V: softmax(Q, K, V, causal=True), causal=True).passed
    True
    """
    opts = attention_options(
        fn, kernel=kernel, feature_map=feature_map, causal=causal, normalize=normalize,
        scale=scale, stabilizer=stabilizer, feature_ops=feature_ops, storage_ops=storage_ops,
        seed=seed, n=n, d=d, d_v=d_v, batch_shape=batch_shape, layout=layout, qk_heads=qk_heads,
        offsets=offsets, cases=cases, progress=progress, inputs=inputs, dtype=dtype,
        framework=framework, device=device, accumulate=accumulate, error_model=error_model,
        failure_probability=failure_probability, state=state, read_state=read_state, vjp=vjp,
        state_layout=state_layout, check_causality=check_causality, grad=grad,
        fn_kwargs=fn_kwargs, log_gates=log_gates, family=family_options)  # fmt: skip
    with memo_scope():  # a case's bounds computed once for every check that reads them
        return _run(opts)


def _run(opts: AttentionOptions) -> AttentionReport:
    """Every case, then the extra checks, each with a child seed of its own; the report.

    ``opts.progress`` (if any) is told after each step: each case, the stress
    cases, the extra checks and the systematic-error test.
    """
    steps = len(opts.cases) + 3
    tell = opts.progress or (lambda done, total, step: None)
    judged = []
    for i, c in enumerate(opts.cases):
        rng = np.random.default_rng(child_seed(opts.root, 1, i))
        judged.append(run_case(opts.run, c, _extras(opts, c, rng)))
        tell(i + 1, steps, f"case '{c.name}'")
    judged += _stress_cases(opts, np.random.default_rng(child_seed(opts.root, 3)))
    tell(steps - 2, steps, "stress cases")
    checks = _extra_checks(opts, judged, np.random.default_rng(child_seed(opts.root, 2)))
    tell(steps - 1, steps, "extra checks")
    extras, root = functools.partial(_extras, opts), child_seed(opts.root, 4)
    checks += systematic_checks(opts.run, judged, root, extras, opts.grad, opts.vjp)
    tell(steps, steps, "systematic-error test")
    return _report(opts, [j.case for j in judged], checks)


def _stress_cases(opts: AttentionOptions, rng: np.random.Generator) -> list:
    """The ``random`` case again with each stress value of each per-token input handed to fn.

    Only inputs the layer takes (drawn per case, not its own constants) are
    stressed; the other per-token inputs are drawn as for any case.  The
    stress values are drawn independently per token, so what they break
    shows within a few blocks: unpacked, they run on the random case's first
    ``min(n, ACROSS_BLOCKS)`` tokens (long enough to cross every block size
    layers use, and a multiple of none), and their cost does not grow with n.
    """
    base = next((c for c in opts.cases if c.name == "random" and not c.skip), None)
    if base is None or base.Q is None:
        return []
    if opts.run.offsets is None and base.Q.shape[-2] > ACROSS_BLOCKS:
        Q, K, V = (np.asarray(X)[..., :ACROSS_BLOCKS, :] for X in (base.Q, base.K, base.V))
        base = base._replace(Q=Q, K=K, V=V)
    out = []
    for ti in opts.run.passed:
        if ti.stress is None:
            continue
        shape = _extras(opts, base, rng)[ti.name].shape
        for label, values in ti.stress(rng, shape).items():
            extras = _extras(opts, base, rng)
            extras[ti.name] = np.asarray(ti.validate(values, shape, label), dtype=np.float64)
            out.append(run_case(opts.run, base._replace(name=f"random, {label}"), extras))
    return out


def _extra_checks(opts: AttentionOptions, judged, rng) -> list[AttentionCase]:
    base = next((j for j in judged if j.reference is not None and j.case.name in
                 ("random", "user inputs")), None)  # fmt: skip
    if base is None:
        return _not_run(opts, judged)
    checks: list[AttentionCase] = []
    if opts.check_causality:
        checks.append(causality_check(opts.run, base, rng))
    if opts.state:
        read = state_reader(opts.run.adapter, opts.read_state, opts.state_layout)
        checks += state_checks(opts.run, judged, read, ("random", "user inputs", "across blocks"))
    if takes(opts.run.fn, "chunk_size", explicitly=True):
        checks += chunk_size_checks(opts.run, base)
    if opts.grad:
        for j in judged:
            if j.case.name in ("random", "positive values", "user inputs", "across blocks"):
                checks += grad_checks(opts.run, j, rng, opts.vjp)
    return checks


def _not_run(opts: AttentionOptions, judged) -> list[AttentionCase]:
    """The extra checks asked for, listed as skipped when their case could not be judged."""
    first = next((j.case for j in judged if j.case.name in ("random", "user inputs")), None)
    if first is None:  # `cases=` left the random case out: the checks were not asked for
        return []
    asked = [("causality", opts.check_causality), ("state hand-over", opts.state),
             ("chunk sizes", takes(opts.run.fn, "chunk_size", explicitly=True)),
             ("gradients", opts.grad)]  # fmt: skip
    outcome = "failed" if first.passed is False else "was not judged"
    why = f"it runs on case '{first.name}', which {outcome}"
    return [skipped_case(name, first.shape, why) for name, on in asked if on]


def _report(opts: AttentionOptions, results, checks) -> AttentionReport:
    run = opts.run
    everything = [*results, *checks]
    judged = [c for c in results if c.passed is not None]
    not_checked = _not_checked(checks)
    passed = bool(judged) and all(c.passed for c in everything if c.passed is not None)
    passed = passed and not not_checked
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
            f"stabilizer eps = {run.reference.stabilizer:g} in the normaliser: the reference "
            "is the stabilised output num / (den + eps), its gradient likewise"
        )
    common: dict[str, Any] = dict(
        largest_error=largest.max_error if largest else math.nan,
        largest_error_case=largest.name if largest else None,
        checks=tuple(checks),
        framework=run.adapter.framework,
        precision=prec,
        notes=tuple(notes),
        not_checked=not_checked,
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


#: The checks a call asks for by an option (``grad=True``, ``state=True``), by name prefix.
_REQUESTED = ("gradient", "final state", "state hand-over")


def _not_checked(checks) -> tuple[str, ...]:
    """The requested checks that could not be judged, each with its reason.

    A check skipped because its case itself could not be judged (a
    generated case outside the layer's range) is the case's business, not a
    requested check left out.
    """
    return tuple(
        f"{c.name} ({c.note})"
        for c in checks
        if c.passed is None and c.name.startswith(_REQUESTED) and not c.note.startswith("case '")
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


def assert_attention_matches(
    fn: Any, *, allow_inconclusive: bool = False, **kwargs: Any
) -> AttentionReport:
    """Assert that ``fn`` matches the reference attention; the pytest twin of :func:`attention`.

    Parameters
    ----------
    fn : callable
        The layer, as for :func:`attention`.
    allow_inconclusive : bool, default False
        Return a report that could judge no case instead of raising
        :class:`~kernelcheck.errors.Inconclusive`.
    **kwargs
        The keyword arguments of :func:`attention`.

    Returns
    -------
    AttentionReport
        The report, when every judged case and check passes.

    Raises
    ------
    AssertionError
        When a case or check fails: the first line is ``"refuted: "`` and the
        first failing case with its output index, error and tolerance (and
        the known bug shape it matches), then the report's line and one line
        per case.  kernelcheck's own frames are hidden from pytest's traceback.
    kernelcheck.errors.Inconclusive
        When no case could be judged (unless ``allow_inconclusive``).

    Examples
    --------
    >>> from kernelcheck.testing import assert_attention_matches
    >>> from kernelcheck.attention import softmax
    >>> layer = lambda Q, K, V: softmax(Q, K, V, causal=True)
    >>> assert_attention_matches(layer, causal=True).passed
    True
    """
    from kernelcheck._src.core.results import assert_result
    from kernelcheck._src.core.validate import as_bool

    __tracebackhide__ = True
    allow_inconclusive = as_bool(allow_inconclusive, "allow_inconclusive")
    report = attention(fn, **kwargs)
    return assert_result(report, allow_inconclusive=allow_inconclusive)
