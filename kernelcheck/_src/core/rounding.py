"""The floating-point error model behind every tolerance in kernelcheck.

Standard model (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., ch. 2-3): for a basic operation, ``fl(a op b) = (a op b)(1 + delta)``
with ``|delta| <= u``, the unit roundoff (2**-53 for float64, 2**-24 for
float32).  Products of ``k`` such factors are covered by

    gamma_k = k u / (1 - k u),   valid while k u < 1,

and an inner product of length ``k``, computed in any order, satisfies

    |fl(x . y) - x . y| <= gamma_k |x| . |y|.

So a matrix product ``A @ B`` with inner dimension ``k`` is accurate entrywise
to ``gamma_k (|A| @ |B|)``.  Tolerances built here are *a priori worst-case*
bounds: a test that uses them cannot fail from rounding, and any failure beyond
them is a real discrepancy.  BLAS implementations that use FMA or blocked
summation only do better than the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelcheck.errors import InvalidArgument

__all__ = [
    "Precision",
    "PRECISIONS",
    "PRODUCT_ONLY",
    "TRUNCATABLE",
    "ARRAY_FORMATS",
    "ieee_format",
    "ieee_formats",
    "precision",
    "given_precision",
    "unit_roundoff",
    "eta",
    "gamma",
    "NoUsefulBound",
    "inner_product_factor",
    "matmul_error_bound",
    "feature_product_bound",
    "default_feature_ops",
    "RoundingModel",
    "probabilistic_lambda",
    "model_for_data",
    "STRUCTURED_DATA",
    "Tolerance",
]


@dataclass(frozen=True)
class Precision:
    """A binary floating-point format as the error model sees it.

    Attributes
    ----------
    name : str
        ``"float64"``, ``"float32"``, ``"float16"``, ``"bfloat16"``, ``"tf32"`` or
        ``"tf32-nearest"``.
    u : float
        Unit roundoff ``2**-p`` for ``p`` significand bits (with the hidden bit).
    eta : float
        The smallest positive subnormal: with gradual underflow
        ``fl(a op b) = (a op b)(1 + delta) + eta'``, ``|eta'| <= eta``
        (Higham, sec. 2.1; half of it in exact arithmetic, which is not a float).
    tiny : float
        The smallest positive normal number.
    max : float
        The largest finite number.
    """

    name: str
    u: float
    eta: float
    tiny: float
    max: float


def ieee_format(name: str, p: int, emin: int, emax: int) -> Precision:
    """The :class:`Precision` of a binary format with ``p`` significand bits
    (the hidden bit included) and normal exponents ``emin .. emax``.

    ``u = 2**-p``, the smallest subnormal ``2**(emin - p + 1)``, the smallest
    normal ``2**emin`` and the largest finite ``(2 - 2**(1 - p)) 2**emax``
    (IEEE 754-2019, sec. 3.3).

    Examples
    --------
    >>> ieee_format("float32", 24, -126, 127).max == float(np.finfo(np.float32).max)
    True
    """
    return Precision(
        name=name,
        u=2.0**-p,
        eta=2.0 ** (emin - p + 1),
        tiny=2.0**emin,
        max=(2.0 - 2.0 ** (1 - p)) * 2.0**emax,
    )


def ieee_formats() -> dict[str, Precision]:
    """The formats kernelcheck's error models know, by name: IEEE 754 binary64,
    binary32, binary16, bfloat16 (binary32's exponent with 8 significand bits) and
    TF32 (binary32's exponent with 11 significand bits).

    TF32 (NVIDIA's TensorFloat-32) is the format the operands of a float32
    matrix product are rounded to on GPU tensor cores (PyTorch's
    ``allow_tf32``, JAX's default matmul precision on NVIDIA GPUs): 1 sign bit, 8
    exponent bits, 10 stored fraction bits, so ``u = 2**-11`` as in float16
    but with float32's range; the products of two TF32 numbers are exact in
    float32 and are accumulated in float32.  No array is stored in it (see
    :data:`PRODUCT_ONLY`).  ``"tf32-nearest"`` is the same format with its
    operands declared rounded to nearest (:data:`TRUNCATABLE`: plain
    ``"tf32"`` also allows truncation); the worst-case bounds of the two are
    the same.  Its subnormals are binary32's subnormals with 10
    fraction bits (spacing ``2**-136``); like every format here it is modelled
    with gradual underflow.

    Called once at import to build :data:`PRECISIONS`; each call builds the
    table anew from the formats' bit layouts.

    Examples
    --------
    >>> ieee_formats()["bfloat16"].u == 2.0**-8
    True
    >>> ieee_formats()["tf32"].u == 2.0**-11
    True
    """
    layouts = {
        "float64": (53, -1022, 1023),
        "float32": (24, -126, 127),
        "float16": (11, -14, 15),
        "bfloat16": (8, -126, 127),
        "tf32": (11, -126, 127),
        "tf32-nearest": (11, -126, 127),
    }
    return {name: ieee_format(name, *layout) for name, layout in layouts.items()}


#: The formats kernelcheck's error models know, by name (see :func:`ieee_formats`).
PRECISIONS: dict[str, Precision] = ieee_formats()

#: Formats that exist only inside a matrix product: no array holds them, so they are
#: never a layer's input or output dtype, only the rounding of a product's operands
#: (a :class:`RoundingModel`'s ``storage``).
PRODUCT_ONLY: tuple[str, ...] = ("tf32", "tf32-nearest")

#: Product-only formats whose operands an implementation may truncate (round toward
#: zero) rather than round to nearest: their roundings may keep one sign.  ``"tf32"``
#: allows either (tensor cores fed float32 registers keep the top 19 bits; some
#: conversions round); ``"tf32-nearest"`` is TF32 declared rounded to nearest, ties to
#: even or away (a conversion such as PTX's ``cvt.rna.tf32.f32`` before the product).
TRUNCATABLE: tuple[str, ...] = ("tf32",)

#: The formats an array can be stored in: :data:`PRECISIONS` without :data:`PRODUCT_ONLY`.
ARRAY_FORMATS: tuple[str, ...] = tuple(n for n in PRECISIONS if n not in PRODUCT_ONLY)

#: Other spellings of a format's name, as frameworks and vendors write them.
_ALIASES = {"tensorfloat32": "tf32", "tfloat32": "tf32", "tf32_nearest": "tf32-nearest"}


def precision(dtype: Any = np.float64) -> Precision:
    """The :class:`Precision` of a dtype: a NumPy dtype or type, its name, or a
    PyTorch / JAX dtype object (read by its name, e.g. ``torch.bfloat16``).

    ``"tf32"`` (also spelled ``"tensorfloat32"``, ``"tfloat32"``) names the
    operand format of TF32 matrix products; it is a format of the error model,
    not an array dtype (:data:`PRODUCT_ONLY`).  ``"tf32-nearest"`` (or
    ``"tf32_nearest"``) is TF32 whose operands are rounded to nearest, never
    truncated (:data:`TRUNCATABLE`).

    Raises
    ------
    InvalidArgument
        For anything that is not one of the formats of :data:`PRECISIONS`.

    Examples
    --------
    >>> precision("bfloat16").u == 2.0**-8
    True
    >>> precision(np.float32).eta == float(np.finfo(np.float32).smallest_subnormal)
    True
    >>> precision("TF32").u == precision("float16").u and precision("tf32").max > 3e38
    True
    """
    if isinstance(dtype, Precision):
        return dtype
    name = None
    if isinstance(dtype, str):
        name = dtype.lower()
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            # torch.float32 prints as "torch.float32", jnp.bfloat16 has __name__
            text = getattr(dtype, "__name__", None) or str(dtype)
            name = text.rsplit(".", 1)[-1].lower()
    found = PRECISIONS.get(_ALIASES.get(name, name))
    if found is None:
        listed = ", ".join(ARRAY_FORMATS)
        raise InvalidArgument(
            f"`dtype` must be one of {listed} (or their dtype objects), got {dtype!r} "
            f"(the error model also knows {', '.join(PRODUCT_ONLY)}, the operand format of "
            "matrix products on tensor cores)"
        )
    return found


def given_precision(value: Any) -> Precision | None:
    """The floating format an array or tensor came in, read before any conversion.

    Validation widens what NumPy cannot compute in (float16 to float64, a
    PyTorch bfloat16 tensor to float32) -- exactly, but the precision the
    values were rounded to is then no longer visible.  A tolerance that
    models that rounding reads it here first: the :class:`Precision` of
    ``value.dtype`` when that is a storage format (float64, float32,
    float16, bfloat16; NumPy, PyTorch, JAX or ml_dtypes dtypes), else None
    (no dtype, an integer or boolean one: exact data, read as the converted
    array's precision).

    Parameters
    ----------
    value : object
        An array-like as the caller passed it.

    Returns
    -------
    Precision or None

    Examples
    --------
    >>> given_precision(np.zeros(2, dtype=np.float16)).name
    'float16'
    >>> given_precision([1.0, 2.0]) is None, given_precision(np.arange(3)) is None
    (True, True)
    """
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    try:
        p = precision(dtype)
    except InvalidArgument:
        return None
    return p if p.name in ARRAY_FORMATS else None


def unit_roundoff(dtype: Any = np.float64) -> float:
    """Unit roundoff ``u`` of a floating format (2**-53 for float64, 2**-8 for bfloat16).

    For a :class:`RoundingModel`, the larger of its two precisions' (the last
    rounding of a result is to storage).
    """
    if isinstance(dtype, RoundingModel):
        return max(dtype.accumulate.u, dtype.storage.u)
    return precision(dtype).u


def eta(dtype: Any = np.float64) -> float:
    """Bound on the absolute underflow error of one operation: the smallest subnormal.

    The standard model with gradual underflow is ``fl(a op b) = (a op b)(1 + delta) + eta'``
    with ``|eta'|`` at most half the smallest subnormal for multiplication and division
    (Higham, sec. 2.1); half of it is not a float, so the smallest subnormal is used.
    """
    if isinstance(dtype, RoundingModel):
        return max(dtype.accumulate.eta, dtype.storage.eta)
    return precision(dtype).eta


class NoUsefulBound(InvalidArgument):
    """:func:`gamma` asked for ``k`` roundings with ``k u >= 1/2``: no useful worst-case bound.

    A verifier that meets it on one of its cases reports that case as not
    judged, with what to change, instead of refusing the whole call.
    """


def gamma(k: float, dtype: Any = np.float64) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)`` for ``k`` rounding errors.

    For a :class:`RoundingModel` ``dtype``, its :meth:`RoundingModel.gamma`.

    Raises
    ------
    NoUsefulBound
        An :class:`InvalidArgument`, when ``k u >= 1/2``: the model gives no
        useful bound that far out.
    """
    if isinstance(dtype, RoundingModel):
        return dtype.gamma(k)
    p = precision(dtype)
    ku = float(k) * p.u
    if not ku < 0.5:
        raise NoUsefulBound(
            f"gamma_k is not a useful bound for k = {k} operations in {p.name} "
            f"(k u = {ku:.3g} >= 1/2)"
        )
    return ku / (1.0 - ku)


def inner_product_factor(k: int, extra_ops: int = 0, dtype: Any = np.float64) -> float:
    """``gamma_(k + extra_ops) (1 + gamma_k)``: the relative factor of every inner-product bound.

    An inner product of length ``k``, computed in any order, of terms that
    each carry ``extra_ops`` further roundings (e.g. ``2 ops`` for two
    factors with ``ops`` roundings behind each) is accurate to
    ``gamma_(k + extra_ops) |x| . |y|`` (Higham, Lemmas 3.1 and 3.3); the
    non-negative ``|x| . |y|`` is itself evaluated in floating point with a
    relative error of at most ``gamma_k``, absorbed by the factor
    ``(1 + gamma_k)``.  Every inner-product tolerance of kernelcheck (exact
    feature maps, user feature maps, Monte Carlo rounding scales) is this
    factor times ``|x| . |y|``.
    """
    return gamma(k + extra_ops, dtype) * (1.0 + gamma(k, dtype))


def matmul_error_bound(
    A: np.ndarray, B: np.ndarray, *, extra_ops: int = 0, dtype=None
) -> np.ndarray:
    """Entrywise bound on ``|fl(A @ B) - A @ B|`` for float inputs taken as exact.

    ``inner_product_factor(k, extra_ops) (|A| @ |B|)`` with ``k = A.shape[-1]``,
    the inner dimension, in the unit roundoff of ``dtype`` (default: the
    inputs' result type).
    """
    dtype = np.result_type(A, B) if dtype is None else dtype
    return inner_product_factor(A.shape[-1], extra_ops, dtype) * (np.abs(A) @ np.abs(B))


def feature_product_bound(PX: np.ndarray, PY: np.ndarray, ops: int) -> np.ndarray:
    """Entrywise bound on ``|fl(PX @ PY.T) - phi(X) phi(Y)^T|`` for feature matrices.

    ``PX, PY`` (shape (n, D), (m, D)) are feature matrices whose entries each
    carry at most ``ops`` roundings: ``inner_product_factor(D, 2 ops) (|PX| @
    |PY|.T)`` in the unit roundoff of their dtype (claims C4, C7-C9: the bound
    of every feature-map check), plus the underflow term
    ``(D + ops (|PX| 1)_i + ops (|PY| 1)_j) eta (1 + gamma_(D+1))``.

    The underflow term: a rounding in the subnormal range has an absolute
    error of at most ``eta / 2`` instead of a relative one (Higham, section
    2.1), so a feature entry carries ``gamma_ops |p| + ops eta`` (its last
    roundings are not magnified: every kernelcheck map, and the default
    model of a user map, forms an entry as a weight times a product of
    inputs, the weight applied last), which the length-``D`` product turns
    into ``ops eta sum_k (|q_k| + |p_k|)``; each of the ``D`` products
    ``p_k q_k`` may underflow by ``eta / 2`` more (sums of subnormals are
    exact).  The row sums are themselves rounded (``gamma_(D+1)``).
    Without it a correct map whose features, products or Gram entries are
    subnormal is reported as wrong.

    The term is formed in float64 and rounded *upward* into the features'
    format (one step up after the cast): ``eta (1 + gamma_(D+1))`` lies
    strictly between two multiples of ``eta``, so a cast to the nearest
    would drop the factor, and the term would be below the formula above.
    """
    bound = matmul_error_bound(PX, PY.T, extra_ops=2 * int(ops))
    dtype = bound.dtype
    D = PX.shape[-1]
    sx = np.abs(PX).sum(axis=-1, dtype=np.float64)
    sy = np.abs(PY).sum(axis=-1, dtype=np.float64)
    under = (D + int(ops) * (sx[:, None] + sy[None, :])) * (1.0 + gamma(D + 1, dtype))
    under *= eta(dtype)  # float64: eta of every format is a float64 number
    under = np.nextafter(under.astype(dtype), np.asarray(np.inf, dtype=dtype))
    return bound + under


def probabilistic_lambda(terms: float, failure: float) -> float:
    """Higham and Mary's ``lambda`` for ``terms`` products that fail with probability ``failure``.

    Their Theorem 2.4 (Higham and Mary, "A new approach to probabilistic
    rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019): for
    independent rounding errors of mean zero, ``prod_{i<=k} (1 + delta_i) =
    1 + theta_k`` with ``|theta_k| <= exp(lambda sqrt(k) u + k u^2 / (1 - u)) - 1``
    except with probability at most ``2 exp(-lambda^2 (1 - u)^2 / 2)``.  A
    union bound over ``terms`` such products gives ``lambda =
    sqrt(2 log(2 terms / failure))`` (u small, the ``(1 - u)^2`` folded into a
    one-percent margin).  Which data the model may be used on at all:
    :func:`model_for_data`.
    """
    terms = max(float(terms), 1.0)
    # a difference of logarithms: 2 terms / failure overflows for a subnormal failure
    return 1.01 * math.sqrt(2.0 * (math.log(2.0 * terms) - math.log(float(failure))))


@dataclass(frozen=True)
class RoundingModel:
    """How a computation rounds: the precision it accumulates in, the one it stores in.

    Mixed precision (16-bit storage, float32 accumulation, as PyTorch
    kernels do): each term of a sum passes ``k`` roundings in the
    accumulation precision and at most ``storage_ops`` more when
    intermediates are stored, so its relative error is at most
    ``(1 + gamma_k(accumulate)) (1 + gamma_storage_ops(storage)) - 1``.
    With ``lam`` set, the accumulation factor is Higham and Mary's
    probabilistic ``exp(lam sqrt(k) u + k u^2 / (1 - u)) - 1`` (see
    :func:`probabilistic_lambda`), which holds except with the stated
    probability under their model of independent, mean-zero rounding errors;
    the few storage roundings stay worst-case.  Every kernelcheck error bound
    that takes ``dtype`` accepts a RoundingModel.

    TF32 matrix products (float32 operands rounded to TF32, ``u = 2**-11``,
    their exact products accumulated in float32) are the same composition
    with ``storage = precision("tf32")``: each term of such a sum carries the
    TF32 roundings of the operands along its path (two per matrix product it
    passes through) and ``k`` float32 accumulation roundings, so
    ``RoundingModel(precision("float32"), precision("tf32"), storage_ops=s)``
    with ``s`` that count.  An implementation that truncates the operands to
    TF32 instead of rounding them to nearest errs by less than ``2 u`` per
    operand: two roundings each (``gamma_2`` covers ``2 u``).

    Attributes
    ----------
    accumulate, storage : Precision
    storage_ops : int
        Storage roundings per term beyond those counted in ``k``.
    lam : float or None
        None for the worst-case model.
    failure : float or None
        The probability the probabilistic model's bound fails (None: worst case).
    fallback : str
        Why a worst-case model stands where the probabilistic one was asked
        for ("" otherwise; see :func:`model_for_data`).

    Examples
    --------
    >>> tf32 = RoundingModel(precision("float32"), precision("tf32"), storage_ops=4)
    >>> g = tf32.gamma(100)   # 100 float32 accumulations, 4 TF32 operand roundings
    >>> bool(gamma(4, "tf32") < g < gamma(4, "tf32") + 2 * gamma(100, "float32"))
    True
    """

    accumulate: Precision
    storage: Precision
    storage_ops: int = 0
    lam: float | None = None
    failure: float | None = None
    fallback: str = ""

    def gamma(self, k: float) -> float:
        """The relative factor of ``k`` accumulation roundings and the storage roundings."""
        if self.lam is None:
            g = gamma(k, self.accumulate)
        else:
            u = self.accumulate.u
            g = math.expm1(self.lam * math.sqrt(max(float(k), 0.0)) * u + k * u * u / (1.0 - u))
        if self.storage_ops:
            g = (1.0 + g) * (1.0 + gamma(self.storage_ops, self.storage)) - 1.0
        return g

    def describe(self) -> str:
        """The model in words, for reports."""
        kind = (
            "worst case"
            if self.lam is None
            else f"probabilistic (Higham-Mary, lambda = {self.lam:.3g}, fails with "
            f"probability <= {self.failure:.1g})"
        )
        text = f"accumulate in {self.accumulate.name}, {kind}"
        if self.fallback:
            text += f" ({self.fallback})"
        if self.storage_ops:
            text += f"; {self.storage_ops} roundings per term stored in {self.storage.name}"
        return text


#: Why :func:`model_for_data` judges data that was not drawn at random with the worst case.
STRUCTURED_DATA = (
    "worst case: the probabilistic model assumes independent rounding errors, which "
    "data that is not an independent random draw per token (repeated, constant or "
    "given tokens) need not have"
)


def model_for_data(
    accumulate: Any,
    storage: Any,
    storage_ops: int = 0,
    *,
    failure: float | None = None,
    terms: float = 1.0,
    iid: bool = False,
) -> RoundingModel:
    """The rounding model to judge a computation on given data: probabilistic only where it holds.

    The model behind ``verify.attention``'s tolerances (claims C1, C10, C14,
    C19, C20).
    The probabilistic model (``failure`` given; Higham and Mary's bound with
    ``lambda = probabilistic_lambda(terms, failure)``) assumes that the
    rounding errors of a sum are independent with mean zero.  Data decides
    whether they are.  While a running sum ``s`` stays in one binade it is a
    multiple of ``ulp(s)``, so the error of ``fl(s + x)`` depends on ``x mod
    ulp(s)`` alone: terms that repeat (a constant sequence, a few tokens
    repeated) or vary slowly repeat their rounding errors, which then add up
    like ``n u`` instead of ``sqrt(n) u``.  A correct float32 prefix-sum layer
    on a constant sequence of n = 4096 tokens errs by ``0.50 n u``, 1.24
    times the probabilistic tolerance at ``failure = 1e-9``, on every run.
    No test of the data can tell all such structure apart (a slowly varying
    sequence has distinct terms and coherent errors), so the rule goes by
    where the data came from:

    * ``iid=True`` -- every token drawn independently from a continuous law
      by the checker itself: the terms' low-order bits, and with them the
      rounding errors, are then independent draws, and the model's
      probability is a probability over that draw: the probabilistic model;
    * ``iid=False`` -- anything else (the caller's own inputs, tokens
      repeated by construction): the worst-case model, which holds for every
      input, with :data:`STRUCTURED_DATA` as its ``fallback`` so reports say why.

    The rule never lowers a tolerance: on data it does not trust it gives
    the worst case, on random data exactly the probabilistic model.

    Parameters
    ----------
    accumulate, storage : Precision, str or dtype
        The precisions of the sums and of stored intermediates.
    storage_ops : int, default 0
        Storage roundings per term (see :class:`RoundingModel`).
    failure : float or None, default None
        The probabilistic model's failure probability; None for the worst case.
    terms : float, default 1.0
        The number of products its union bound covers (see :func:`probabilistic_lambda`).
    iid : bool, default False
        Whether the data was drawn by the checker, independently per token from
        a continuous law.

    Returns
    -------
    RoundingModel

    Examples
    --------
    >>> model_for_data("float32", "float32", failure=1e-9, terms=1e6, iid=True).lam is None
    False
    >>> given = model_for_data("float32", "float32", failure=1e-9, terms=1e6, iid=False)
    >>> given.lam is None, given.fallback == STRUCTURED_DATA
    (True, True)
    """
    acc, sto = precision(accumulate), precision(storage)
    if failure is None:
        return RoundingModel(acc, sto, storage_ops)
    if not iid:
        return RoundingModel(acc, sto, storage_ops, fallback=STRUCTURED_DATA)
    return RoundingModel(acc, sto, storage_ops, probabilistic_lambda(terms, failure), failure)


def default_feature_ops(d: int) -> int:
    """Rounded operations assumed behind one entry of a user's feature map on R^d: ``2 d + 8``.

    The model of a map with no error model of its own: a projection ``w . x``
    (d roundings), a squared norm ``|x|^2`` (d), and up to 8 elementwise
    operations (a subtraction, ``exp`` to within 4 ulp, a scale, a
    normalisation).  The positive, trigonometric and hyperbolic random
    features of the essay fit it; a map that does more passes its own count.
    """
    return 2 * int(d) + 8


@dataclass(frozen=True)
class Tolerance:
    """A tolerance and where it came from.

    Attributes
    ----------
    value : float
        The tolerance (absolute unless ``kind`` says otherwise).
    source : str
        The error model that produced it, as a formula with its numbers.
    kind : str
        ``"absolute"`` or ``"relative"``.
    """

    value: float
    source: str
    kind: str = "absolute"

    def __str__(self) -> str:
        return f"{self.value:.3g} ({self.kind}; {self.source})"

    def to_dict(self) -> dict:
        return {"value": _json_float(self.value), "source": self.source, "kind": self.kind}


def _json_float(x: float):
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
