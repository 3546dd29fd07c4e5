"""Attention in every form: exact, kernelized, parallel, recurrent, chunked, gated (C1, C10-C21).

* :func:`softmax` -- exact, numerically stable softmax attention (C1);
* :func:`kernelized` -- exact attention with any kernel object (C10);
* :func:`parallel` -- linear attention from feature matrices, causal by prefix sums;
* :func:`linear_recurrence` (an ``init`` / ``step`` pair, :class:`Recurrence`),
  :func:`recurrent` -- the recurrence over the state :class:`State` ``(S, z)``
  (C11, C14);
* :func:`chunked` -- causal, quadratic within chunks and recurrent across (C14);
  ``normalize=False`` for unnormalised linear attention and ``initial_state``
  for a state handed over between calls (C19);
* :func:`gated_recurrence` (an ``init`` / ``step`` pair), :func:`gated_recurrent`,
  :func:`gated_parallel`, :func:`gated_chunked` -- decayed and gated linear
  attention: retention, Mamba-2 / simple-GLA gating (C20);
* :func:`channel_gated_recurrence`, :func:`channel_gated_recurrent`,
  :func:`channel_gated_parallel`, :func:`channel_gated_chunked` -- gates on
  the key or value channels and RWKV-6's bonus: GLA, HGRN-2, RWKV-6 (C21);
* the delta rule and its kin (C22-C24): :func:`delta_recurrence`,
  :func:`delta_recurrent`, :func:`delta_chunked`, :func:`delta_parallel`
  (DeltaNet); the same with ``gated_delta_`` (Gated DeltaNet, one decay per
  token), ``kda_`` (Kimi Delta Attention, a decay per key channel) and
  ``dplr_`` (the diagonal-plus-rank-one transition of RWKV-7), each with its
  normwise error bound (``*_error_bound``) and reference backward pass
  (``*_vjp``, with bounds on request);
* :func:`linear_error_bound`, :func:`softmax_error_bound`,
  :func:`kernelized_error_bound`, :func:`gated_error_bound` -- a-priori
  rounding-error bounds of the forms;
* :func:`softmax_vjp`, :func:`linear_vjp`, :func:`gated_vjp`,
  :func:`channel_gated_vjp` and their error bounds -- the reference backward
  passes (vector-Jacobian products);
* :func:`cost_model` -- operation counts and state sizes (C2, C3, C11);
* :data:`FAMILIES` -- the registry: every family (:class:`Family`) with its
  forms, per-token inputs and what ``verify.attention`` needs of it;
  :data:`FORMS` its flat view, every form with its error bound, cost model
  and whether it is causal only (:class:`Form`, :func:`get_form`,
  :func:`get_family`).

Normalisers ``<= 0`` (C12) raise :class:`~kernelcheck.errors.BadNormalizer`, or
with ``on_bad_normalizer="report"`` come back in an :class:`AttentionOutput`.

Examples
--------
>>> import numpy as np
>>> from kernelcheck import attention
>>> rng = np.random.default_rng(0)
>>> pq, pk = rng.random((2, 12, 4))
>>> V = rng.normal(size=(12, 3))
>>> a = attention.parallel(pq, pk, V, causal=True)
>>> bool(np.allclose(a, attention.chunked(pq, pk, V, chunk_size=5)))
True
"""

from kernelcheck._src.attention.common.engine import Recurrence
from kernelcheck._src.attention.common.types import AttentionCost, AttentionOutput, State
from kernelcheck._src.attention.common.vjp import VJP
from kernelcheck._src.attention.families.channel_gated.bound import channel_gated_error_bound
from kernelcheck._src.attention.families.channel_gated.forms import (
    channel_gated_chunked,
    channel_gated_parallel,
    channel_gated_recurrence,
    channel_gated_recurrent,
)
from kernelcheck._src.attention.families.channel_gated.vjp import (
    ChannelVJP,
    channel_gated_vjp,
    channel_gated_vjp_error_bound,
)
from kernelcheck._src.attention.families.delta.bound import delta_error_bound
from kernelcheck._src.attention.families.delta.forms import (
    delta_chunked,
    delta_parallel,
    delta_recurrence,
    delta_recurrent,
)
from kernelcheck._src.attention.families.delta.vjp import delta_vjp
from kernelcheck._src.attention.families.dplr.bound import dplr_error_bound
from kernelcheck._src.attention.families.dplr.forms import (
    dplr_chunked,
    dplr_recurrence,
    dplr_recurrent,
)
from kernelcheck._src.attention.families.dplr.vjp import dplr_vjp
from kernelcheck._src.attention.families.gated.bound import gated_error_bound
from kernelcheck._src.attention.families.gated.forms import (
    gated_chunked,
    gated_parallel,
    gated_recurrence,
    gated_recurrent,
)
from kernelcheck._src.attention.families.gated.vjp import (
    GatedVJP,
    gated_vjp,
    gated_vjp_error_bound,
)
from kernelcheck._src.attention.families.gated_delta.bound import gated_delta_error_bound
from kernelcheck._src.attention.families.gated_delta.forms import (
    gated_delta_chunked,
    gated_delta_parallel,
    gated_delta_recurrence,
    gated_delta_recurrent,
)
from kernelcheck._src.attention.families.gated_delta.vjp import (
    gated_delta_vjp,
)
from kernelcheck._src.attention.families.kda.bound import kda_error_bound
from kernelcheck._src.attention.families.kda.forms import (
    kda_chunked,
    kda_recurrence,
    kda_recurrent,
)
from kernelcheck._src.attention.families.kda.vjp import kda_vjp
from kernelcheck._src.attention.families.kernelized.bound import kernelized_error_bound
from kernelcheck._src.attention.families.kernelized.forms import kernelized
from kernelcheck._src.attention.families.linear.bound import linear_error_bound
from kernelcheck._src.attention.families.linear.forms import (
    chunked,
    linear_recurrence,
    parallel,
    recurrent,
)
from kernelcheck._src.attention.families.linear.vjp import linear_vjp, linear_vjp_error_bound
from kernelcheck._src.attention.families.softmax.bound import softmax_error_bound
from kernelcheck._src.attention.families.softmax.forms import softmax
from kernelcheck._src.attention.families.softmax.vjp import softmax_vjp, softmax_vjp_error_bound
from kernelcheck._src.attention.registry import (
    FAMILIES,
    FORMS,
    Family,
    Form,
    cost_model,
    get_family,
    get_form,
)

__all__ = [
    "softmax",
    "kernelized",
    "parallel",
    "linear_recurrence",
    "recurrent",
    "chunked",
    "State",
    "AttentionOutput",
    "AttentionCost",
    "linear_error_bound",
    "softmax_error_bound",
    "kernelized_error_bound",
    "cost_model",
    "gated_recurrence",
    "Recurrence",
    "gated_recurrent",
    "gated_parallel",
    "gated_chunked",
    "gated_error_bound",
    "channel_gated_recurrence",
    "channel_gated_recurrent",
    "channel_gated_parallel",
    "channel_gated_chunked",
    "channel_gated_error_bound",
    "delta_recurrence",
    "delta_recurrent",
    "delta_chunked",
    "delta_parallel",
    "delta_error_bound",
    "delta_vjp",
    "gated_delta_recurrence",
    "gated_delta_recurrent",
    "gated_delta_chunked",
    "gated_delta_parallel",
    "gated_delta_error_bound",
    "gated_delta_vjp",
    "kda_recurrence",
    "kda_recurrent",
    "kda_chunked",
    "kda_error_bound",
    "kda_vjp",
    "dplr_recurrence",
    "dplr_recurrent",
    "dplr_chunked",
    "dplr_error_bound",
    "dplr_vjp",
    "softmax_vjp",
    "linear_vjp",
    "softmax_vjp_error_bound",
    "linear_vjp_error_bound",
    "gated_vjp",
    "gated_vjp_error_bound",
    "GatedVJP",
    "channel_gated_vjp",
    "channel_gated_vjp_error_bound",
    "ChannelVJP",
    "VJP",
    "FAMILIES",
    "Family",
    "FORMS",
    "Form",
    "get_form",
    "get_family",
]
