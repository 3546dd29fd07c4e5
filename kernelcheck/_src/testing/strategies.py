"""Hypothesis strategies for kernelcheck's objects, usable from other projects.

Plural nouns with keyword-only ``min_*``/``max_*`` bounds, validated when the
strategy is built (messages echo the values), in the manner of
``hypothesis.extra.numpy``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck._src.core.validate import as_int, as_real
from kernelcheck._src.kernels.base import Kernel
from kernelcheck._src.kernels.catalog import LEAVES, Leaf, LeafParam
from kernelcheck._src.kernels.combinators import Exp, Power, Product, Scaled, Sum
from kernelcheck._src.kernels.featuremap import EXACT_MAP_FORMS
from kernelcheck.errors import InvalidArgument

__all__ = ["point_sets", "point_set_pairs", "kernels", "feature_maps", "rows_within_norm"]


def _bounds(name: str, lo: int, hi: int, *, minimum: int) -> tuple[int, int]:
    lo = as_int(lo, f"min_{name}", minimum=minimum)
    hi = as_int(hi, f"max_{name}", minimum=minimum)
    if lo > hi:
        raise InvalidArgument(f"min_{name}={lo} is larger than max_{name}={hi}")
    return lo, hi


def rows_within_norm(arr: np.ndarray, max_norm: float) -> np.ndarray:
    """Scale rows (along the last axis) longer than ``max_norm`` back inside the ball.

    A computed norm carries a relative error up to ``gamma_(d+1)`` depending on
    the summation order, so rescaled rows are pulled in by ``(d + 4) eps``: any
    norm routine then reports them ``<= max_norm``.

    Parameters
    ----------
    arr : numpy.ndarray, shape (..., d)
        Rows of floats.
    max_norm : float
        The largest Euclidean norm of a row.

    Returns
    -------
    numpy.ndarray
        ``arr`` itself when every row is within, else a copy with the long rows scaled.
    """
    norms = np.sqrt(np.einsum("...i,...i->...", arr, arr))
    too_big = norms > max_norm
    if too_big.any():
        arr = arr.copy()
        margin = 1.0 - (arr.shape[-1] + 4) * float(np.finfo(arr.dtype).eps)
        arr[too_big] *= (max_norm * margin / norms[too_big])[:, None].astype(arr.dtype)
    return arr


@st.composite
def _points(draw, n, d, max_norm, dtype):
    elements = st.floats(
        min_value=-max_norm,
        max_value=max_norm,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=False,
        width=np.dtype(dtype).itemsize * 8,
    )
    arr = draw(hnp.arrays(dtype, (n, d), elements=elements))
    return rows_within_norm(arr, max_norm)


def point_sets(
    *,
    min_points: int = 1,
    max_points: int = 8,
    min_dim: int = 1,
    max_dim: int = 6,
    dim: int | None = None,
    max_norm: float = 2.0,
    dtype=np.float64,
) -> st.SearchStrategy[np.ndarray]:
    """Point sets ``X`` of shape (n, d) whose rows have Euclidean norm ``<= max_norm``.

    Rows longer than ``max_norm`` are scaled back onto the ball, so the
    strategy shrinks toward small, simple point sets (zeros, repeated rows).

    Parameters
    ----------
    min_points : int, default 1
        The fewest points.
    max_points : int, default 8
        The most points.
    min_dim : int, default 1
        The smallest dimension d.
    max_dim : int, default 6
        The largest dimension d.
    dim : int or None, default None
        A fixed dimension (then ``min_dim`` and ``max_dim`` are not used).
    max_norm : float, default 2.0
        The largest Euclidean norm of a row.
    dtype : numpy dtype, default numpy.float64
        float64 or float32.

    Examples
    --------
    >>> from hypothesis import given
    >>> from kernelcheck.strategies import point_sets
    >>> strategy = point_sets(max_points=4, dim=3)
    """
    n_lo, n_hi = _bounds("points", min_points, max_points, minimum=1)
    if dim is not None:
        dim = as_int(dim, "dim", minimum=1)
        d_lo = d_hi = dim
    else:
        d_lo, d_hi = _bounds("dim", min_dim, max_dim, minimum=1)
    max_norm = as_real(max_norm, "max_norm", positive=True)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise InvalidArgument(f"`dtype` must be float32 or float64, got {dtype!r}") from None
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise InvalidArgument(f"`dtype` must be float32 or float64, got {dtype}")
    return st.tuples(st.integers(n_lo, n_hi), st.integers(d_lo, d_hi)).flatmap(
        lambda nd: _points(nd[0], nd[1], max_norm, dtype)
    )


def point_set_pairs(
    *,
    min_points: int = 1,
    max_points: int = 8,
    min_dim: int = 1,
    max_dim: int = 6,
    max_norm: float = 2.0,
    dtype=np.float64,
) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Pairs ``(X, Y)`` of point sets sharing one dimension d (see :func:`point_sets`).

    Parameters
    ----------
    min_points : int, default 1
        The fewest points.
    max_points : int, default 8
        The most points.
    min_dim : int, default 1
        The smallest dimension d.
    max_dim : int, default 6
        The largest dimension d.
    max_norm : float, default 2.0
        The largest Euclidean norm of a row.
    dtype : numpy dtype, default numpy.float64
        float64 or float32.
    """
    d_lo, d_hi = _bounds("dim", min_dim, max_dim, minimum=1)
    _bounds("points", min_points, max_points, minimum=1)

    def pair(d):
        one = point_sets(
            min_points=min_points, max_points=max_points, dim=d, max_norm=max_norm, dtype=dtype
        )
        return st.tuples(one, one)

    return st.integers(d_lo, d_hi).flatmap(pair)


def _argument(param: LeafParam) -> st.SearchStrategy:
    """The values of one leaf argument: its catalogue ``draws``."""
    if isinstance(param.draws, range):
        return st.integers(param.draws.start, param.draws.stop - 1)
    return st.sampled_from(param.draws)


def _leaf(leaf: Leaf) -> st.SearchStrategy[Kernel]:
    """The leaves of one catalogue row, with arguments drawn from the row."""
    if not leaf.params:
        return st.just(leaf.cls())
    return st.builds(leaf.cls, *(_argument(p) for p in leaf.params))


def kernels(
    *,
    max_depth: int = 4,
    finite: bool = True,
    max_features: int = 2000,
    feature_dim_at: int = 6,
) -> st.SearchStrategy[Kernel]:
    """Random expression trees of the kernel algebra (every tree is a true kernel).

    Parameters
    ----------
    max_depth : int, default 4
        Largest depth of the tree (a leaf has depth 1).
    finite : bool, default True
        Only nodes with finite feature maps (the catalogue's leaves with
        finite features -- ``Linear``, ``Constant``, ``Polynomial`` -- sums,
        positive scalings, products, powers and truncated ``exp``) when
        True; else also the other leaves (``Exponential``, ``Gaussian``,
        ``Laplacian``) and untruncated ``exp``.
    max_features : int, default 2000
        With ``finite=True``, keep only trees whose symmetric feature dimension
        at input dimension ``feature_dim_at`` is at most this (so that feature
        maps stay cheap to build).
    feature_dim_at : int, default 6
        The input dimension at which ``max_features`` is judged.
    """
    max_depth = as_int(max_depth, "max_depth", minimum=1, maximum=8)
    max_features = as_int(max_features, "max_features", minimum=1)
    feature_dim_at = as_int(feature_dim_at, "feature_dim_at", minimum=1)
    # finite leaves first: Hypothesis shrinks toward the first strategies of one_of
    leaves = [row for row in LEAVES if row.finite_features]
    if not finite:
        leaves += [row for row in LEAVES if not row.finite_features]
    leaf = st.one_of([_leaf(row) for row in leaves])

    def extend(children: st.SearchStrategy[Kernel]) -> st.SearchStrategy[Kernel]:
        options = [
            st.builds(Sum, children, children),
            st.builds(Scaled, st.sampled_from([0.25, 0.5, 2.0]), children),
            st.builds(Product, children, children),
            st.builds(Power, children, st.integers(0, 3)),
            st.builds(Exp, children, st.integers(0, 3)),
        ]
        if not finite:
            options.append(st.builds(Exp, children, st.none()))
        return st.one_of(options)

    def depth(k: Kernel) -> int:
        kids = k._children()
        return 1 + max((depth(c) for c in kids), default=0)

    strategy = st.recursive(leaf, extend, max_leaves=2 ** (max_depth - 1)).filter(
        lambda k: depth(k) <= max_depth
    )
    if finite:
        strategy = strategy.filter(
            lambda k: k.has_finite_features and k.feature_dim(feature_dim_at) <= max_features
        )
    return strategy


def feature_maps(
    *, max_depth: int = 3, max_features: int = 2000, feature_dim_at: int = 6
) -> st.SearchStrategy:
    """Exact feature maps ``k.features(form)`` of random finite kernels (both forms).

    Tensor forms larger than ``max_features`` at ``feature_dim_at`` fall back
    to the symmetric form.

    Parameters
    ----------
    max_depth : int, default 3
        Largest depth of the kernel's tree (a leaf has depth 1).
    max_features : int, default 2000
        Largest feature dimension at input dimension ``feature_dim_at``.
    feature_dim_at : int, default 6
        The input dimension at which ``max_features`` is judged.
    """

    def build(pair):
        k, form = pair
        if form == "tensor" and k.feature_dim(feature_dim_at, "tensor") > max_features:
            form = "symmetric"
        return k.features(form)

    return st.tuples(
        kernels(max_depth=max_depth, max_features=max_features, feature_dim_at=feature_dim_at),
        st.sampled_from(EXACT_MAP_FORMS),
    ).map(build)
