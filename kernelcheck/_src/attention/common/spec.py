"""How ``verify.attention`` meets a layer of one family: the base of every family's specification.

A family of attention (softmax, kernelized, linear, gated, ...) is one
folder under ``attention/families/`` and one :class:`~kernelcheck._src.attention.records.Family`
record.  Its ``reference.py`` subclasses :class:`FamilySpec`: given the
options of a ``verify.attention`` call (:class:`SpecOptions`), the spec
builds the arguments of the family's reference form from the inputs the
layer received, bounds the magnitudes the layer stores and accumulates
(the error model's range check), contributes the family's known bug shapes
to the diagnosis, and says how the family's state and gradients are
checked.  ``verify`` reads these through the record and never compares
family names.

Per-token inputs beside ``Q, K, V`` (the gates of a gated recurrence, ...)
are described by :class:`TokenInput` records: how a ``verify.attention``
option supplies them, their shape, their token axis (for slicing and
layouts), their rounding and validation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.common.blocking import chunked_products
from kernelcheck._src.attention.common.exact import mp_dot, mp_matrix, over_batch, weighted_rows
from kernelcheck._src.core.calls import call_user
from kernelcheck._src.core.rounding import gamma
from kernelcheck._src.core.validate import as_array, describe
from kernelcheck.errors import InvalidArgument

__all__ = ["SpecOptions", "TokenInput", "FamilySpec", "FeatureSpec", "callable_name"]


class SpecOptions(NamedTuple):
    """The options of a ``verify.attention`` call a family's reference is built from.

    Attributes
    ----------
    causal : bool
        Causal mask.
    normalize : bool
        Normalised output (linear-type families; softmax and kernelized always are).
    scale : None, float or callable
        Softmax's logit scale (None: ``1/sqrt(d)``; a callable: a function of ``d``).
    kernel : callable or None
        The kernel of kernelized attention.
    phi_q, phi_k : callable or None
        The feature maps of the queries and the keys (one map: the same object twice).
    stabilizer : float or None
        An eps the layer adds to its normaliser.
    feature_ops : int or None
        Rounded operations per feature entry of the layer's own feature map.
    flags : Mapping[str, Any]
        Options peculiar to a family (e.g. keys normalised inside the layer),
        by the name of their ``verify.attention`` option.
    """

    causal: bool
    normalize: bool = True
    scale: Any = None
    kernel: Any = None
    phi_q: Any = None
    phi_k: Any = None
    stabilizer: float | None = None
    feature_ops: int | None = None
    flags: Mapping[str, Any] = {}


class TokenInput(NamedTuple):
    """A per-token input of a family beside ``Q, K, V`` (e.g. the gates of C20).

    Attributes
    ----------
    name : str
        The input's name in the forms' signatures (``"gates"``).
    option : str
        The ``verify.attention`` option that supplies it (``"decay"``).
    validate : callable
        ``validate(value, shape, name) -> numpy.ndarray``: the values checked
        and broadcast to ``shape`` (float64), raising ``InvalidArgument``
        naming ``name``.
    width : str
        The size of a last axis after the token axis: ``""`` (none: one
        value per token and head, shape ``batch + (n,)``), ``"D"`` (the
        feature dimension: gates on the key channels), ``"d"`` (the key
        dimension) or ``"d_v"`` (the value dimension).
    sample : callable
        ``sample(rng, shape) -> numpy.ndarray``: typical values, for the
        scaling experiment and the tests.
    loggable : bool
        Whether ``verify.attention(log_gates=True)`` hands the layer its
        logarithms (flash-linear-attention's convention for gates).
    positive : bool
        Whether a value rounded to the layer's precision must stay above 0
        (a gate of 0 would be a different recurrence); the smallest positive
        number replaces a value that rounds to 0.
    per_token : bool
        False for a parameter of each head rather than of each token (RWKV-6's
        bonus ``u``): shape ``batch + (width,)``, no token axis.
    stress : callable or None
        ``stress(rng, shape) -> {label: values}``: values that break layers
        (gates near 0, exactly 0, near 1), each run by ``verify.attention``
        as a case of its own when the layer takes this input.
    required : bool
        False for an input its family takes only when its option is given
        (the decays of the diagonal-plus-rank-one transition): absent, the
        layer is not handed it and the specification supplies its default.
    """

    name: str
    option: str
    validate: Callable[..., np.ndarray]
    width: str = ""
    sample: Callable[..., np.ndarray] | None = None
    loggable: bool = False
    positive: bool = False
    per_token: bool = True
    stress: Callable[..., dict] | None = None
    required: bool = True

    @property
    def trailing(self) -> int:
        """The number of axes after the token axis (0 or 1)."""
        return 1 if self.width else 0

    @property
    def axis(self) -> int:
        """The token axis, counted from the end."""
        return -1 - self.trailing

    def shape(self, batch: tuple[int, ...], n: int, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """The input's shape for a case: ``batch (+ (n,)) (+ (sizes[width],))``."""
        return (
            batch + ((n,) if self.per_token else ()) + ((sizes[self.width],) if self.width else ())
        )

    def take(self, values: np.ndarray, a: int, b: int) -> np.ndarray:
        """Tokens ``a:b`` of ``values`` (a parameter of each head is the same for every piece)."""
        if not self.per_token:
            return values
        index = (Ellipsis, slice(a, b)) + (slice(None),) * self.trailing
        return values[index]

    def to_layout(self, values: np.ndarray, layout: str) -> np.ndarray:
        """Internal ``(..., h, n, ...)`` to the layer's layout (``bnhd``: ``(b, n, h, ...)``)."""
        if layout == "bnhd" and self.per_token:
            return np.swapaxes(values, self.axis - 1, self.axis)
        return values


class FamilySpec:
    """How ``verify.attention`` builds the reference of one family and reads its error model.

    Subclasses (one per family, in ``families/<family>/reference.py``)
    implement :meth:`describe`, :meth:`arguments` and
    :meth:`largest_intermediates`; the rest has defaults: no feature-map
    roundings, no state, no reference gradient, the generic weights of the
    diagnosis.

    Parameters
    ----------
    options : SpecOptions
        The validated options of the call.
    """

    #: Whether the family keeps a recurrent state (``state=True`` applies).
    has_state = False
    #: The values ``verify.attention(normalize=...)`` may take for the family, its
    #: default first: softmax and kernelized attention always divide by a normaliser.
    normalizes: tuple[bool, ...] = (True,)
    #: The registered form whose final state the state checks compare with.
    state_form: str | None = None
    #: The gradients :meth:`vjp` gives a reference for, of ``("dQ", "dK", "dV", ...)``.
    gradients: tuple[str, ...] = ()
    #: Whether :meth:`vjp`'s dQ and dK are with respect to the features ``phi(Q)``,
    #: ``phi(K)`` (the verifier carries them through the feature map's Jacobian).
    feature_gradients = False
    #: Why the other gradients are not checked (reported with them).
    gradients_not_checked = "no reference gradient for this family"

    def __init__(self, options: SpecOptions):
        self.options = options

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Typical leading arguments of the family's forms (for the tests and the scaling run).

        ``(Q, K, V, ...)`` of shapes ``batch + (n, d)`` for the families on
        queries and keys, ``(phi_q, phi_k, V, ...)`` of ``batch + (n, D)`` for
        those on feature matrices, then the per-token inputs and the other
        required arguments (a kernel, ...).
        """
        raise NotImplementedError

    @property
    def causal(self) -> bool:
        """The causal mask of the reference."""
        return self.options.causal

    @property
    def normalize(self) -> bool:
        """Whether the reference divides by a normaliser."""
        return True

    # ----- the reference -------------------------------------------------
    @classmethod
    def exact_output(cls, args, kw, causal: bool) -> np.ndarray:
        """The family's defining formula in high precision on ``args``, rounded to float64.

        ``args`` and ``kw`` are a form's (see :meth:`example_arguments`); the
        inputs are taken as exact binary numbers and the result is evaluated
        at :data:`~kernelcheck._src.attention.common.exact.DIGITS` digits
        (brute force: small inputs only).  The yardstick of the forms' bounds.
        """
        raise NotImplementedError

    def describe(self) -> str:
        """The reference in words (no object addresses)."""
        raise NotImplementedError

    def arguments(self, Q, K, V, extras: Mapping[str, np.ndarray]) -> tuple[tuple, dict]:
        """The reference form's leading arguments and keyword options for one case.

        ``extras`` holds the per-token inputs (:class:`TokenInput`) by name.
        """
        raise NotImplementedError

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """Upper bounds on the magnitudes a layer stores, and on those it accumulates."""
        raise NotImplementedError

    def extra_ops(self, d: int) -> int:
        """Roundings per term of the layer's own feature map (none for exact families)."""
        return 0

    def sizes(self, d: int, d_v: int) -> dict[str, int]:
        """The sizes of a per-token input's last axis: ``d``, ``d_v``, the features' ``D``."""
        return {"d": d, "D": d, "d_v": d_v}

    def bound_options(self, *, float64: bool) -> dict:
        """Options of the reference form's bound (``float64``: the reference's own share)."""
        return {}

    def judged(self, args, kw, tolerance: np.ndarray) -> str:
        """'' when a case can be judged with ``tolerance``, else the reason it is not.

        A family whose error model can give no bound (transitions that expand,
        C24) returns its reason where a tolerance is infinite: such a case is
        neither passed nor failed.
        """
        return ""

    # ----- the diagnosis -------------------------------------------------
    def scores(self, args, kw, *, swap: bool = False, scale: Callable | None = None):
        """The unmasked weights ``kappa(q_i, k_j)`` (softmax: the logits), shape (..., n, m).

        ``swap`` exchanges queries and keys; ``scale`` (softmax) a function
        of ``d`` replacing the logit scale.  None for a family whose output
        is no weighted sum of the values (the delta rule): the diagnosis then
        tries the family's own :meth:`bug_shapes` only.
        """
        return None

    def weigh(self, W, V, mask, normalize: bool, log_decay=None) -> np.ndarray:
        """``(W o M o D) V``, divided by the weights' row sums when normalised (empty rows: 0)."""
        E = np.where(mask, W, 0.0)
        if log_decay is not None:
            E = E * np.exp(np.where(mask, log_decay, -np.inf))
        return weighted_average(E, V, normalize)

    def decays(self, extras: Mapping[str, np.ndarray], n: int) -> dict:
        """Log decays of the weights: ``"correct"`` and the family's off-by-one variants."""
        return {"correct": None}

    def bug_shapes(self, args, kw, mask, normalize: bool) -> dict:
        """Outputs of bugs peculiar to the family, by description (shape (..., n, d_v))."""
        return {}

    def state_bug_shapes(self, args, kw) -> dict:
        """Final states of known state bugs, by description (shape of :meth:`state_bound`'s).

        For the diagnosis of a failing final-state check (a partial last
        chunk decayed as a full one, a state in the other layout, ...); none
        by default.
        """
        return {}

    def handover_bug_shapes(self, args, kw, state) -> dict:
        """Outputs of a continuation call under known hand-over bugs, by description.

        ``args``, ``kw`` are the reference's arguments for the tokens after
        the cut and ``state`` the state handed over (a cached state ignored,
        ...); none by default.
        """
        return {}

    # ----- the state -------------------------------------------------------
    def state_arguments(self, args) -> tuple:
        """The leading arguments of :attr:`state_form` from the reference's arguments."""
        raise InvalidArgument(f"{self.describe()} has no recurrent state")

    def state_options(self, kw) -> dict:
        """The keyword options of :attr:`state_form` (the normalisation by default)."""
        return {"normalize": self.normalize}

    def take_arguments(self, args, a: int, b: int) -> tuple:
        """Tokens ``a:b`` of the reference's leading arguments (the inputs, by default)."""
        return tuple(x[..., a:b, :] for x in args[:3])

    def state_bound(self, args, model, n: int) -> np.ndarray:
        """Bound on the rounding of the state (as one matrix) after ``n`` tokens."""
        raise InvalidArgument(f"{self.describe()} has no recurrent state")

    def prefix_state_bound(self, args, model, a: int) -> np.ndarray:
        """:meth:`state_bound` of the first ``a`` tokens of ``args`` (a state handed over)."""
        return self.state_bound(self.take_arguments(args, 0, a), model, a)

    def propagate(self, args, E0, extras, normalize: bool, ref, den) -> np.ndarray:
        """Effect on each output of an error ``E0`` in the state handed in before ``args``."""
        raise InvalidArgument(f"{self.describe()} has no recurrent state")

    # ----- the gradients -----------------------------------------------------
    def vjp(self, args, kw, Q, K, V, G, model) -> list:
        """The reference VJP along ``G``, one entry per name of :attr:`gradients`.

        A list of ``(name, index, reference, tolerance)``, ``index`` the
        position of the layer's gradient in ``(dQ, dK, dV)``, the tolerance
        the bound in the layer's model plus the float64 reference's own.
        """
        return []


def weighted_average(E: np.ndarray, V: np.ndarray, normalize: bool) -> np.ndarray:
    """``E V``, divided by the row sums of ``E`` when normalised (rows summing to 0 give 0)."""
    num = E @ V
    if not normalize:
        return num
    den = E.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), 0.0)


class FeatureSpec(FamilySpec):
    """The families on feature maps (linear, gated, ...): ``phi`` applied to float64 rows.

    Their reference gradients dQ, dK are with respect to the features
    (:attr:`feature_gradients`); ``verify.attention`` carries them through
    the map's Jacobian.

    Their reference takes ``(phi(Q), phi(K), V, ...)``; the layer's own feature
    map adds ``2 ops`` roundings per term (one map on each side); the state
    ``[S, z]`` (``S`` alone unnormalised) is handed over and bounded as the
    sum ``sum_j d_j phi(k_j) [v_j, 1]^T`` with decays ``d_j <= 1``.
    """

    has_state = True
    feature_gradients = True
    normalizes: tuple[bool, ...] = (True, False)

    @property
    def normalize(self) -> bool:
        return self.options.normalize

    @classmethod
    def example_arguments(cls, rng, n: int, d: int, D: int, d_v: int, batch=()) -> tuple:
        """Positive features in [0.5, 1.5] (positive normalisers), Gaussian values."""
        pq, pk = rng.uniform(0.5, 1.5, (2, *batch, n, D))
        return (pq, pk, rng.standard_normal((*batch, n, d_v)))

    @classmethod
    def exact_output(cls, args, kw, causal: bool) -> np.ndarray:
        """``sum_j w_ij d_ij v_j`` (over ``sum_j w_ij d_ij`` normalised), ``w = phi_q . phi_k``.

        ``d_ij`` are the exact decays of :meth:`exact_decays` (1 ungated).
        """
        normalize = kw.get("normalize", True)
        decays = cls.exact_decays(args)

        def one(pq, pk, V, *rest):
            Pq, Pk = mp_matrix(pq), mp_matrix(pk)
            decay = decays(*rest) if rest else None

            def weight(i, j):
                w = mp_dot(Pq[i], Pk[j])
                return w if decay is None else w * decay(i, j)

            return weighted_rows(weight, V, pq.shape[0], causal=causal, normalize=normalize)

        return over_batch(one, *(np.asarray(a, dtype=np.float64) for a in args))

    @classmethod
    def exact_decays(cls, args):
        """A maker of the exact decays ``d_ij`` from one batch entry's per-token inputs, or None."""
        return None

    def features(self, Q, K) -> tuple[np.ndarray, np.ndarray]:
        """``(phi_q(Q), phi_k(K))`` in float64, checked (shape (..., n, D), finite)."""
        return (
            _phi(self.options.phi_q, Q, "Q"),
            _phi(self.options.phi_k, K, "K"),
        )

    def sizes(self, d: int, d_v: int) -> dict[str, int]:
        """``d``, ``d_v`` and the feature dimension ``D`` (the map applied to one zero row)."""
        D = _phi(self.options.phi_q, np.zeros((1, d)), "Q").shape[-1]
        return {"d": d, "D": D, "d_v": d_v}

    def identity_maps(self) -> bool:
        """Whether both feature maps are the identity (none given, or the linear kernel's map).

        Then the gradients by ``phi(Q)``, ``phi(K)`` are those by ``Q``, ``K``
        (the family's reference gradient checks ``dQ`` and ``dK``).
        """
        from kernelcheck._src.kernels.leaves import Linear

        def identity(phi) -> bool:
            return phi is None or isinstance(getattr(phi, "kernel", None), Linear)

        return identity(self.options.phi_q) and identity(self.options.phi_k)

    def feature_vjp(self, ref, bound, bound64) -> list:
        """The :meth:`vjp` entries of a family on feature maps: ``dQ``, ``dK``, ``dV``.

        ``ref``, ``bound``, ``bound64``: a family's VJP record (fields
        ``dphi_q``, ``dphi_k``, ``dV``) and its bounds in the layer's model
        and in float64, whose sum is the tolerance; ``dQ``, ``dK`` are with
        respect to the features (:attr:`feature_gradients`).
        """
        return [
            ("dQ", 0, ref.dphi_q, bound.dphi_q + bound64.dphi_q),
            ("dK", 1, ref.dphi_k, bound.dphi_k + bound64.dphi_k),
            ("dV", 2, ref.dV, bound.dV + bound64.dV),
        ]

    def maps_text(self) -> str:
        """The feature map(s) in words."""
        if self.options.phi_q is None:
            return "the identity"
        maps = callable_name(self.options.phi_q)
        if self.options.phi_k is not self.options.phi_q:
            maps = f"({maps}, {callable_name(self.options.phi_k)})"
        return maps

    def extra_ops(self, d: int) -> int:
        from kernelcheck._src.core.rounding import default_feature_ops

        if self.options.feature_ops is not None:
            return 2 * self.options.feature_ops
        ops = getattr(self.options.phi_q, "ops", None)
        if isinstance(ops, (int, np.integer)) and not isinstance(ops, bool):
            return 2 * int(ops)
        return 2 * default_feature_ops(d)

    def largest_intermediates(self, args, kw) -> tuple[float, float]:
        """The features, scores, values (and unnormalised outputs) stored; the state and sums.

        The first number bounds what a layer rounds to its storage format:
        the features, the scores ``|phi(q_i)| . max_j |phi(k_j)|``, the values
        and (unnormalised) the output.  The second bounds the running sums,
        held in the accumulation precision: the state
        ``sum_j |phi(k_j)| |[v_j, 1]|`` and the numerators ``|phi(q)| . state``
        (full sums bound every prefix; decays are at most 1).
        """
        with np.errstate(over="ignore"):
            aq, ak, V = np.abs(args[0]), np.abs(args[1]), np.abs(args[2])
            W = np.concatenate([V, np.ones(V.shape[:-1] + (1,))], axis=-1)
            state = np.swapaxes(ak, -1, -2) @ W
            sums = aq @ state
            kmax = ak.max(axis=-2, keepdims=True)
            stored = max(aq.max(), ak.max(), (aq * kmax).sum(-1).max(), V.max())
            if not self.normalize:
                stored = max(stored, sums[..., :-1].max())
            return float(stored), float(max(state.max(), sums.max()))

    def scores(self, args, kw, *, swap: bool = False, scale: Callable | None = None):
        pq, pk = args[0], args[1]
        if swap:
            pq, pk = pk, pq
        return pq @ np.swapaxes(pk, -1, -2)

    def state_bound(self, args, model, n: int) -> np.ndarray:
        """Bound on the rounding of ``[S, z]`` after ``n`` tokens, in the layer's model and float64.

        Every entry ``sum_j d_j phi(k_j) w_j`` (decays ``d_j <= 1``, ``w = [v, 1]``)
        passes through at most ``3 n + 2 D + 8`` roundings in any of the forms.
        """
        pk, V = args[1], args[2]
        D = pk.shape[-1]
        k = 3 * n + 2 * D + 8
        W = np.concatenate([np.abs(V), np.ones(V.shape[:-1] + (1,))], axis=-1)
        mag = np.swapaxes(np.abs(pk), -1, -2) @ W
        E = (gamma(k, model) + gamma(k)) * mag * (1.0 + gamma(k))
        return E if self.normalize else E[..., :-1]

    def propagate(self, args, E0, extras, normalize: bool, ref, den) -> np.ndarray:
        """Effect on each output of an error ``E0`` (matrix ``[S, z]``) in the state handed in.

        The state's error reaches output i through ``|phi(q_i)|`` and the
        decays since the hand-over (:meth:`log_decays` of ``extras``); a
        normalised output ``num / den`` moves by at most
        ``(e_num + |a| e_den) / (den - e_den)``.
        """
        aq = np.abs(args[0])
        zeros = np.zeros(args[1].shape)
        W = np.zeros(args[2].shape[:-1] + (E0.shape[-1],))
        eff, _ = chunked_products(aq, zeros, W, 64, S0=E0, log_gates=self.log_decays(extras))
        if not normalize:
            return eff
        e_num, e_den = eff[..., :-1], eff[..., -1:]
        lo = den - e_den
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (e_num + np.abs(ref) * e_den) / lo
        return np.where(lo > 0, out, np.inf)

    def log_decays(self, extras) -> np.ndarray | None:
        """The logarithms of the per-token decays of the state (None: no decay)."""
        return None


def _phi(which: Callable | None, X: np.ndarray, name: str) -> np.ndarray:
    """``which`` on the rows of ``X`` in float64, checked; None is the identity map."""
    if which is None:
        return np.array(X, dtype=np.float64)
    shape = X.shape
    flat = X.reshape(-1, shape[-1])
    P = as_array(
        call_user(lambda rows: _evaluate(which, rows), f"`feature_map` ({name})", flat),
        f"feature_map({name})",
        dtype=np.float64,
        allow_empty=True,
    )
    if P.ndim != 2 or P.shape[0] != flat.shape[0]:
        raise InvalidArgument(
            f"`feature_map` must return an array of shape (n, D) for input of shape "
            f"(n, d), got {describe(P)} for {flat.shape}"
        )
    if not np.isfinite(P).all():
        raise InvalidArgument(f"`feature_map` returned a non-finite feature on {name}")
    return P.reshape(shape[:-1] + (P.shape[1],))


def _evaluate(which: Callable, rows: np.ndarray):
    """``which(rows)``; a map written in torch or jax operations gets their float64 arrays.

    The map is tried on the NumPy rows first; if that raises, on the same
    rows as a float64 array of each framework already imported, its result
    read back to NumPy.  The first error is re-raised when none applies.
    """
    try:
        return which(rows)
    except Exception as first:  # noqa: BLE001 - tried in the frameworks, else re-raised
        for to, back in _framework_arrays():
            try:
                return back(which(to(rows.copy())))
            except Exception:  # noqa: BLE001, S112 - not a map of this framework
                continue
        raise first


def _framework_arrays():
    """``(to, back)`` conversions of float64 rows for torch and jax, if imported."""
    out = []
    if "torch" in sys.modules:
        import torch

        out.append((torch.from_numpy, lambda t: t.detach().cpu().numpy()))
    if "jax" in sys.modules:
        import jax
        import jax.numpy as jnp

        def to_jax(rows):
            with jax.enable_x64(True):
                return jnp.asarray(rows, dtype=jnp.float64)

        out.append((to_jax, np.asarray))
    return out


def callable_name(f) -> str:
    """A callable in words: its qualified name, "a lambda", or a kernelcheck object's repr."""
    if isinstance(f, type) or not callable(f):
        return repr(f)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None)
    if name is None or name == "<lambda>":
        cls = type(f)
        if cls.__module__.startswith("kernelcheck"):
            return repr(f)
        return "a lambda" if name == "<lambda>" else cls.__name__
    return name
