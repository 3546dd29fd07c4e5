"""The options of ``verify.attention``, validated once into one record passed down by name.

Every option is checked here, before any case is drawn: the family the
options select (:func:`~kernelcheck._src.attention.registry.select_family`)
and its per-token inputs (constants per head, or samplers drawn per case),
the reference, the precision the layer computes in, the sizes of the cases,
the state and gradient checks.  Bad input raises ``InvalidArgument`` naming
the option.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.registry import FAMILY_OPTIONS, SELECTING_OPTIONS, select_family
from kernelcheck._src.core.memory import check_size
from kernelcheck._src.core.rounding import (
    PRECISIONS,
    PRODUCT_ONLY,
    Precision,
    given_precision,
    precision,
)
from kernelcheck._src.core.seeds import as_seed_sequence, child_seed
from kernelcheck._src.core.validate import (
    as_bool,
    as_int,
    as_int_tuple,
    as_probability,
    as_real,
    check_callable,
    check_choice,
    to_numpy,
)
from kernelcheck._src.verify.adapters import adapter, round_to
from kernelcheck._src.verify.attention.cases import (
    ACROSS_BLOCKS,
    CASES,
    LAYOUTS,
    Case,
    generate_cases,
    user_case,
)
from kernelcheck._src.verify.attention.checks import (
    takes,
)
from kernelcheck._src.verify.attention.reference import Reference, scale_option
from kernelcheck._src.verify.attention.run import Run
from kernelcheck.errors import InvalidArgument

#: Error models of :func:`attention`.
ERROR_MODELS = ("worst-case", "probabilistic")

#: Layouts of a layer's state matrix: ``S`` of shape (..., D, d_v), or its transpose.
STATE_LAYOUTS = ("key-major", "value-major")

#: The most leading (batch, head) axes a case may have.  NumPy holds at most 32 axes
#: in an array (64 from NumPy 2.0, but ``np.broadcast`` still 32), and the cases and
#: the references' intermediates add up to five of their own (tokens, features,
#: chunks, the state's two): 16 leaves room on every NumPy version.
MAX_BATCH_AXES = 16


class AttentionOptions(NamedTuple):
    """The validated options of one call, by name, passed down as one record."""

    run: Run
    root: np.random.SeedSequence  # the call's seed: cases (child 0), inputs (1, i), checks (2)
    cases: list[Case]
    constants: dict[str, np.ndarray]  # per-token inputs fixed per head by the options
    samplers: dict[str, Any]  # per-token inputs drawn per case, handed to fn
    state: bool
    read_state: Any
    state_layout: str  # "key-major" (S is D x d_v) or "value-major" (d_v x D)
    check_causality: bool
    grad: bool
    vjp: Any
    progress: Any = None  # progress(done, total, step) after each step, or None


def _batch_iv(value, user: Case | None) -> tuple[int, ...]:
    """The batch of the cases: ``batch_shape``, or the leading axes of the user's ``inputs``.

    At most :data:`MAX_BATCH_AXES` positive sizes; with ``inputs``, a
    ``batch_shape`` other than ``()`` must be theirs (the per-head constants
    are read against it).
    """
    batch = as_int_tuple(value, "batch_shape", minimum=1)
    if user is not None and user.Q is not None:
        given, batch = batch, tuple(user.Q.shape[:-2])
        if given not in ((), batch):
            raise InvalidArgument(
                f"`batch_shape` {given} differs from the batch {batch} of `inputs` (their "
                "leading axes): user inputs carry their own batch; leave batch_shape out"
            )
    if len(batch) > MAX_BATCH_AXES:
        raise InvalidArgument(
            f"`batch_shape` may hold at most {MAX_BATCH_AXES} leading (batch, head) axes, got "
            f"{len(batch)} axes {batch}: NumPy arrays hold at most 32 axes and the cases add "
            "their own; merge batch axes into one (every batch entry is checked alike)"
        )
    return batch


def _family_options_iv(family_options: dict) -> dict:
    """The recurrent families' per-token inputs and flags, by their registry names.

    An unknown name is refused with the closest known ones; a value of None
    is the same as leaving the option out.
    """
    known = FAMILY_OPTIONS
    for name in family_options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
            raise InvalidArgument(
                f"`{name}` is not an option of verify.attention: the families take "
                f"{', '.join(known)}{hint}"
            )
    return {k: v for k, v in family_options.items() if v is not None}


def _family_iv(o: dict):
    """The family the selecting options choose (``kernel``, ``feature_map``, ``decay``, ...)."""
    given = {name for name in ("kernel", "feature_map") if o.get(name) is not None}
    given |= {name for name in o["family"] if name in SELECTING_OPTIONS}
    family = select_family(frozenset(given))
    for name in o["family"]:
        if name not in family.options and name not in family.flags:
            raise InvalidArgument(
                f"`{name}` does not apply to the {family.name} family ({family.summary}); it "
                f"takes {', '.join(sorted(family.options | set(family.flags))) or 'no option'}"
            )
    return family


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
        value = o["family"].get(ti.option)
        if value is None:  # an input the family accepts but the call leaves out
            continue
        if callable(value):
            samplers[ti.name] = value
            continue
        value = to_numpy(value, ti.option)  # a tensor of any dtype or device, read once
        values = ti.validate(value, np.shape(value), ti.option)
        head_shape = np.shape(values)[: np.ndim(values) - ti.trailing]
        if ti.per_token:
            _per_head_iv(ti, head_shape, batch)
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


def _per_head_iv(ti, head_shape: tuple[int, ...], batch: tuple[int, ...]) -> None:
    """Refuse a constant whose last axis could be read as the token axis of the forms' gates.

    A constant's axes are batch_shape's, right-aligned as NumPy broadcasts:
    ``(H,)`` or ``(1, H)`` is one value per head, ``(B, H)`` one per batch
    entry and head.  kernelcheck.attention's forms take gates of shape
    ``(..., n)``, where ``(H, 1)`` is one value per head; here the same array
    would be one value per batch entry (B = H) or be refused.  So a constant
    ending in an axis of 1 where the batch has several heads is refused,
    whatever B is, with the shape that says what it means.
    """
    if not (batch and batch[-1] > 1 and head_shape and head_shape[-1] == 1):
        return
    if math.prod(head_shape) == 1:  # one value: the same under either reading
        return
    H = batch[-1]
    width = f" + ({ti.width},)" if ti.width else ""
    raise InvalidArgument(
        f"`{ti.option}` of shape {head_shape}{width} ends in an axis of 1 where batch_shape "
        f"{batch} has {H} heads: verify.attention reads a constant's axes as batch_shape's "
        f"(right-aligned), not with a token axis as kernelcheck.attention's gates (where "
        f"({H}, 1) is one value per head); write one {ti.option} per head as shape ({H},), "
        f"one per batch entry and head as {batch}, or pass a function {ti.option}(rng, shape) "
        "for values per token"
    )


def _decimals_iv(family, o: dict, constants: dict[str, np.ndarray]) -> tuple:
    """The constants given in a format narrower than float64, with the decimals they round from.

    ``decay=torch.tensor(0.9)`` is 0.899999976 (float32's nearest); the
    reference uses that value, as given, and a layer computing with 0.9 in
    float64 differs from it.  For each such constant, the shortest decimal
    numbers that round to its values in its format: a failing case is
    checked against them (see :func:`~kernelcheck._src.verify.attention.run.run_case`).
    Returns ``(token input, format name, given values, decimals)`` for each
    constant whose decimals differ from its values.
    """
    out = []
    for ti in family.token_inputs:
        if ti.name not in constants:
            continue
        p = given_precision(o["family"][ti.option])
        values = constants[ti.name]
        if p is None or p.u <= PRECISIONS["float64"].u:
            continue
        decimals = values.copy()
        todo = np.ones(values.shape, dtype=bool)
        for digits in range(1, 18):
            if not todo.any():
                break
            guess = np.array([float(f"{v:.{digits}g}") for v in values.ravel()]).reshape(
                values.shape
            )
            hit = todo & (round_to(guess, p) == values)
            decimals[hit], todo = guess[hit], todo & ~hit
        if not np.array_equal(decimals, values):
            out.append((ti, p.name, values, decimals))
    return tuple(out)


def _precision_iv(framework, dtype, device, accumulate):
    """The adapter (inputs handed over), the declared precision and the accumulation one.

    A product-only format (``dtype="tf32"``: float32 inputs whose products
    round their operands to TF32) hands the layer float32 arrays and is the
    storage format of the error model, with float32 accumulation.
    """
    if dtype is None:
        prec = precision("float64" if framework == "numpy" else "float32")
    else:
        prec = precision(dtype)
    handed = precision("float32") if prec.name in PRODUCT_ONLY else prec
    ad = adapter(framework, handed, device)
    try:
        acc = None if accumulate is None else precision(accumulate)
    except InvalidArgument as exc:  # precision() speaks of a dtype; this one is `accumulate`
        raise InvalidArgument(f"`accumulate`: {exc}") from None
    if acc is not None and acc.name in PRODUCT_ONLY:
        raise InvalidArgument(
            f"`accumulate` {acc.name} is the operand format of matrix products, whose sums are "
            "float32: pass accumulate='float32' (and dtype='tf32' for a layer whose products "
            "round their operands to TF32)"
        )
    declared: Precision | None = None if dtype is None and framework == "numpy" else prec
    return ad, declared, acc


def _reference_iv(o: dict, family) -> Reference:
    """The reference of the family, from the options its specification reads."""
    selecting = set(o["family"]) & family.options
    flags = {name: check(o["family"][name], name) for name, check in family.flags.items()
             if name in o["family"]}  # fmt: skip
    kernel, feature_map = o["kernel"], o["feature_map"]
    if kernel is not None:
        check_callable(kernel, "kernel")
    scale = o["scale"]
    if scale is not None and (kernel is not None or feature_map is not None):
        raise InvalidArgument(
            "`scale` applies to the softmax reference only; the kernel or feature map carries "
            "its own scale"
        )
    allowed = family.spec.normalizes
    normalize = allowed[0] if o["normalize"] is None else as_bool(o["normalize"], "normalize")
    if normalize not in allowed:
        if not normalize:  # a family that always divides by a normaliser
            raise InvalidArgument(
                "`normalize=False` applies to linear attention: pass `feature_map`"
            )
        raise InvalidArgument(
            f"`normalize={normalize}` does not apply to the {family.name} family "
            f"({family.summary}): it is {'normalised' if allowed[0] else 'unnormalised'}"
        )
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
    ref = Reference.of(
        causal=o["causal"], feature_map=_feature_pair(feature_map), selecting=selecting,
        normalize=normalize, scale=scale_option(scale), kernel=kernel, stabilizer=stabilizer,
        feature_ops=feature_ops, flags=flags,
    )  # fmt: skip
    if stabilizer is not None and not ref.normalize:
        other = (", or pass normalize=True for a layer that divides by its normaliser"
                 if True in allowed else "")  # fmt: skip
        raise InvalidArgument(
            f"`stabilizer`={stabilizer:g} is an eps added to a normaliser, but the reference, "
            f"{ref.name}, divides by none{' (normalize=False)' if o['normalize'] is False else ''}"
            f": leave `stabilizer` out{other}"
        )
    return ref


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
        if not state:
            raise InvalidArgument(
                "`read_state` reads the layer's state for the checks of state=True: pass "
                "state=True with it"
            )
    return state


def _widths_iv(spec, family, constants: dict[str, np.ndarray], cases: list[Case]) -> None:
    """A constant per channel (gates on the key or value channels, a bonus) must fit every case.

    Its last axis is the width (``D``, ``d`` or ``d_v``) or 1; the ``d = 1``
    case of a call without a fixed ``d`` has ``D = d = 1``, which a constant
    with one value per channel of a wider key cannot fill.
    """
    for ti in family.token_inputs:
        value = constants.get(ti.name)
        if value is None or not ti.width or value.ndim == 0 or value.shape[-1] == 1:
            continue
        for case in cases:
            if case.skip or case.Q is None or case.V is None:
                continue
            want = spec.sizes(case.Q.shape[-1], case.V.shape[-1])[ti.width]
            if value.shape[-1] != want:
                raise InvalidArgument(
                    f"`{ti.option}` of shape {value.shape} holds {value.shape[-1]} values per "
                    f"head on its last axis, one per channel of width {ti.width}, but case "
                    f"'{case.name}' has {ti.width} = {want}: give a last axis of {want} (or "
                    f"1), pass d= to fix the layer's key size (the case with d = 1 is then "
                    f"left out), or pass a function {ti.option}(rng, shape)"
                )


def attention_options(fn, **o) -> AttentionOptions:
    """The options of one ``verify.attention`` call, validated, as one record.

    Parameters
    ----------
    fn : callable
        The layer.
    **o
        The options of :func:`~kernelcheck._src.verify.attention.api.attention`
        by name, ``family`` holding its family options.

    Returns
    -------
    AttentionOptions
    """
    check_callable(fn, "fn")
    progress = None if o["progress"] is None else check_callable(o["progress"], "progress")
    o["family"] = _family_options_iv(o["family"])
    family = _family_iv(o)
    o["causal"] = causal = as_bool(o["causal"], "causal")
    ref = _reference_iv(o, family)
    root = as_seed_sequence(o["seed"])
    n = as_int(o["n"], "n", minimum=2)
    layout = check_choice(o["layout"], "layout", LAYOUTS)
    user = None if o["inputs"] is None else user_case(o["inputs"], layout)
    offsets = _packed_iv(o["offsets"], user)
    if offsets is not None and not callable(offsets):
        n = int(offsets[-1])  # the cases run at the offsets' length
    fixed_d = o["d"] is not None
    d = 8 if o["d"] is None else as_int(o["d"], "d", minimum=1)
    d_v = d if o["d_v"] is None else as_int(o["d_v"], "d_v", minimum=1)
    batch = _batch_iv(o["batch_shape"], user)
    if layout == "bnhd" and len(batch) != 2:
        raise InvalidArgument(
            f"layout='bnhd' needs batch_shape=(batch, heads), got batch_shape={batch}"
        )
    ad, declared, acc = _precision_iv(o["framework"], o["dtype"], o["device"], o["accumulate"])
    storage_ops = o["storage_ops"]
    if storage_ops is not None:  # at least the result's own rounding to the storage format
        storage_ops = as_int(storage_ops, "storage_ops", minimum=1)
    error_model = check_choice(o["error_model"], "error_model", ERROR_MODELS)
    failure = as_probability(o["failure_probability"], "failure_probability")
    constants, samplers = _token_inputs_iv(family, o, causal, batch)
    group = _qk_group_iv(o["qk_heads"], batch, o["inputs"])
    state = _state_iv(fn, o, ref, causal)
    fn_kwargs = _fn_kwargs_iv(o["fn_kwargs"], state)
    grad = _grad_iv(o["grad"], o["vjp"], ad.framework)
    log_gates = _log_gates_iv(o["log_gates"], family, samplers)
    names = _case_names(o["cases"], o["inputs"])
    if user is not None:
        cases = [user]
    else:
        _check_case_sizes(n, d, d_v, batch)
        rng = np.random.default_rng(child_seed(root, 0))
        cases = generate_cases(rng, n, d, d_v, batch, fixed_d=fixed_d, names=names)
        if offsets is not None and not callable(offsets):
            cases = [_packed_length(c, n) for c in cases]
    _widths_iv(ref.spec, family, constants, cases)
    seed = o["seed"]
    seed_value = (
        int(seed) if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else None
    )
    run = Run(
        fn=fn, adapter=ad, reference=ref, layout=layout, dtype=declared, accumulate=acc,
        failure=failure if error_model == "probabilistic" else None,
        passed=tuple(ti for ti in family.token_inputs if ti.name in samplers),
        seed_value=seed_value, state=state, fn_kwargs=fn_kwargs, log_gates=log_gates,
        qk_group=group, offsets=offsets, decimals=_decimals_iv(family, o, constants),
        storage_ops=storage_ops,
    )  # fmt: skip
    check = as_bool(o["check_causality"], "check_causality")
    return AttentionOptions(
        run=run, root=root, cases=cases, constants=constants, samplers=samplers, state=state,
        read_state=o["read_state"], check_causality=check and causal, grad=grad, vjp=o["vjp"],
        state_layout=check_choice(o["state_layout"], "state_layout", STATE_LAYOUTS),
        progress=progress,
    )  # fmt: skip


def _fn_kwargs_iv(fn_kwargs, state: bool) -> dict:
    """``fn_kwargs``: keyword arguments by name, none that ``state=True`` passes itself."""
    if fn_kwargs is None:
        return {}
    if not (isinstance(fn_kwargs, dict) and all(isinstance(k, str) for k in fn_kwargs)):
        raise InvalidArgument(
            f"`fn_kwargs` must be a dict of keyword arguments (names as strings), got {fn_kwargs!r}"
        )
    if state and "initial_state" in fn_kwargs:
        raise InvalidArgument(
            "`fn_kwargs` holds initial_state, which state=True passes to fn itself (None, then "
            "the states fn hands back): leave it out of `fn_kwargs`"
        )
    return dict(fn_kwargs)


def _grad_iv(grad, vjp, framework: str) -> bool:
    """``grad`` and ``vjp``: a backward pass of a NumPy layer, used by the gradient check."""
    grad = as_bool(grad, "grad")
    if vjp is None:
        return grad
    check_callable(vjp, "vjp")
    if framework != "numpy":
        raise InvalidArgument(
            f"`vjp` is a NumPy layer's backward pass; with framework={framework!r} the "
            "gradients come from the framework (autograd of fn): leave `vjp` out"
        )
    if not grad:
        raise InvalidArgument("`vjp` is used by the gradient check: pass grad=True with it")
    return grad


def _log_gates_iv(log_gates, family, samplers: dict) -> bool:
    """``log_gates``: the logarithms of gates handed to the layer, which needs such gates."""
    log_gates = as_bool(log_gates, "log_gates")
    handed = [ti for ti in family.token_inputs if ti.loggable and ti.name in samplers]
    if log_gates and not handed:
        loggable = [ti.option for ti in family.token_inputs if ti.loggable]
        if not loggable:
            raise InvalidArgument(
                f"`log_gates=True` hands fn the logarithms of its gates, but the {family.name} "
                "family has none: leave it out"
            )
        raise InvalidArgument(
            f"`log_gates=True` hands fn the logarithms of the gates it is handed, but fn is "
            f"handed none: a constant `{loggable[0]}` is the layer's own; pass a sampler "
            f"{loggable[0]}=f(rng, shape), or leave log_gates out"
        )
    return log_gates


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


def _packed_length(case: Case, n: int) -> Case:
    """A generated case of another length than fixed offsets give is skipped, saying so."""
    if case.Q is None or case.Q.shape[-2] == n:
        return case
    reason = f"packed sequences: the offsets give every case n = {n} tokens"
    return Case(case.name, None, None, None, reason)


def _packed_iv(offsets, user: Case | None):
    """``offsets``: None, a sampler ``offsets(rng, n)``, or fixed offsets (checked here)."""
    if offsets is None or callable(offsets):
        return offsets
    arr = offsets_iv(offsets, "offsets")
    if user is not None and user.Q is not None and user.Q.shape[-2] != arr[-1]:
        raise InvalidArgument(
            f"`offsets` must end at the length of the user inputs, "
            f"{user.Q.shape[-2]}, got {arr.tolist()}"
        )
    return arr


def offsets_iv(value, name: str, n: int | None = None) -> np.ndarray:
    """Sequence offsets (``cu_seqlens``): integers ``0 = o_0 < o_1 < ... < o_N`` (``= n``).

    Parameters
    ----------
    value : sequence of int
        The offsets.
    name : str
        The option's name for messages.
    n : int, optional
        The number of tokens they must partition.

    Returns
    -------
    numpy.ndarray of int64
    """
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.size < 2 or arr.dtype.kind not in "iu":
        raise InvalidArgument(
            f"`{name}` must be a 1-D sequence of at least two integers (cu_seqlens), got {value!r}"
        )
    arr = arr.astype(np.int64)
    if arr[0] != 0 or not np.all(np.diff(arr) > 0):
        raise InvalidArgument(
            f"`{name}` must start at 0 and increase strictly (one sequence between two "
            f"offsets), got {arr.tolist()}"
        )
    if n is not None and arr[-1] != n:
        raise InvalidArgument(
            f"`{name}` must end at the number of tokens n = {n}, got {arr.tolist()}"
        )
    return arr


def _qk_group_iv(qk_heads, batch: tuple[int, ...], inputs) -> int:
    """Value heads per query/key head: ``batch_shape[-1] / qk_heads`` (1 without grouping)."""
    if qk_heads is None:
        return 1
    qk_heads = as_int(qk_heads, "qk_heads", minimum=1)
    if inputs is not None:
        raise InvalidArgument(
            "`qk_heads` applies to the generated cases; user `inputs` carry their own heads"
        )
    if not batch or batch[-1] % qk_heads:
        raise InvalidArgument(
            f"`qk_heads` must divide the value heads, the last entry of batch_shape {batch}, "
            f"got qk_heads={qk_heads}"
        )
    return batch[-1] // qk_heads


def _check_case_sizes(n: int, d: int, d_v: int, batch: tuple[int, ...]) -> None:
    """Refuse, before any draw, cases that cannot fit in memory.

    The generated cases hold about ``9 n + 7 + ACROSS_BLOCKS`` tokens of
    ``2 d + d_v`` numbers per batch entry (``odd length`` has ``2 n + 5``);
    the layer's inputs in its framework, its output and the float64 reference
    hold a few times as much again (a factor 3 is counted).
    """
    per_token = 2 * d + d_v
    elements = 3 * math.prod(batch) * (9 * n + 7 + ACROSS_BLOCKS) * per_token
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
