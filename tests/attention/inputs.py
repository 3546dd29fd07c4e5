"""Inputs and checks shared by the attention rooms' tests of bad and extreme input.

* ``Q, K, V`` (five tokens, ``d = 3``, ``d_v = 2``), positive feature matrices
  ``PQ, PK`` (``D = 4``: every normaliser > 0), a linear state ``S0``, gates
  ``GATES`` and a cotangent ``G_OUT`` of the output's shape: valid everywhere,
  so that the one bad argument of a bad-input row is the one refused;
* :func:`gram_of` -- a user "kernel" returning a given Gram block;
* ``EXTREME`` and :func:`extreme_arrays` -- Hypothesis draws of finite floats
  from 5e-324 to 1e300, with the values where ``exp`` and products leave the
  float range;
* :func:`answer_or_clean_error` -- the contract of every public function:
  a finite answer with the (read-only) inputs unchanged, or a clean
  ``InvalidArgument``, ``NumericalFailure`` or ``BadNormalizer``;
* :func:`masks` and :func:`form_options` -- the masks a registry form computes
  and the keyword options it takes (normalised where it can be);
* ``VJP_BLOCKS`` and :func:`set_vjp_blocks` -- the block sizes the backward
  passes are run with, so that every multi-block path is taken.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernelcheck import attention as att
from kernelcheck._src.attention.common import vjp as common_vjp
from kernelcheck.errors import BadNormalizer, InvalidArgument, NumericalFailure

CLEAN = (InvalidArgument, NumericalFailure, BadNormalizer)
RNG = np.random.default_rng(20240611)
Q = RNG.normal(size=(5, 3))
K = RNG.normal(size=(5, 3))
V = RNG.normal(size=(5, 2))
PQ = np.abs(RNG.normal(size=(5, 4))) + 0.1  # positive features: normalisers > 0
PK = np.abs(RNG.normal(size=(5, 4))) + 0.1
S0 = att.linear_recurrence().init(4, 2)
GATES = np.full(5, 0.9)
G_OUT = np.ones((5, 2))


def gram_of(value):
    """A user 'kernel' returning ``value(n, m)`` as its Gram block for every request."""
    return lambda X, Y: value(X.shape[0], Y.shape[0])


EXTREME = st.one_of(
    st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1e-300, -1e-300, 5e-324, 1e-160, 1e154, -1e154, 700.0, -750.0]),
)


@st.composite
def extreme_arrays(draw, positive=False):
    """``(a, b, c)`` of shapes ``(n, d)``, ``(n, d)``, ``(n, d_v)`` with extreme entries
    (``a`` and ``b`` non-negative when ``positive``: feature matrices)."""
    n = draw(st.integers(1, 4))
    d = draw(st.integers(1, 3))
    dv = draw(st.integers(1, 2))
    elems = EXTREME.map(abs) if positive else EXTREME
    a = draw(hnp.arrays(np.float64, (n, d), elements=elems))
    b = draw(hnp.arrays(np.float64, (n, d), elements=elems))
    c = draw(hnp.arrays(np.float64, (n, dv), elements=EXTREME))
    return a, b, c


def answer_or_clean_error(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on read-only arrays: a finite answer or a clean error.

    Returns the answer, or None after a clean error; the arrays must be
    unchanged either way.
    """
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    copies = [np.array(a, copy=True) for a in arrays]
    for a in arrays:
        a.setflags(write=False)
    try:
        out = fn(*args, **kwargs)
    except CLEAN:
        out = None
    for a, c in zip(arrays, copies, strict=True):
        assert np.array_equal(a, c)
    if out is not None:
        arr = out.out if isinstance(out, att.AttentionOutput) else out
        if isinstance(out, att.AttentionOutput):
            assert out.ok  # "report" only without bad normalisers here
        assert np.isfinite(arr).all(), "an answer with NaN or Inf in it"
    return out


#: Blocks of the VJP passes, (entries, fewest rows): the defaults (one block at the
#: tests' sizes), 8 or 9 rows a block (the last one partial), one row a block.
VJP_BLOCKS = [(1 << 18, 64), (1120, 1), (1, 1)]


def set_vjp_blocks(monkeypatch, blocks):
    """Run the backward passes in blocks of ``blocks = (entries, fewest rows)``."""
    monkeypatch.setattr(common_vjp, "_VJP_BLOCK_ELEMENTS", blocks[0])
    monkeypatch.setattr(common_vjp, "_VJP_MIN_ROWS", blocks[1])


def masks(form) -> tuple[bool, ...]:
    """The masks a form of the registry computes: causal only, or both."""
    return (True,) if form.causal_only else (False, True)


def form_options(form, **extra) -> dict:
    """The keyword options a form takes among ``extra`` (normalised where it can be)."""
    out = {"normalize": True} if "normalize" in form.options else {}
    out.update({k: v for k, v in extra.items() if k in form.options})
    return out
