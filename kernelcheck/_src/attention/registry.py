"""The one registry of attention forms: each form once, with its error bound and cost model.

A :class:`Form` pairs a function with everything a consumer needs to use it
without a table of its own: its error bound, its cost model, whether it is
causal only, what it takes (queries and keys, or feature matrices) and the
claims it belongs to.  ``verify.attention``, ``scaling``, the claim checks
and the tests read :data:`FORMS`; adding a form is one module plus one
entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernelcheck._src.attention import bounds, cost, exact, gated, linear
from kernelcheck._src.attention.blocking import auto_chunk_size
from kernelcheck._src.attention.types import AttentionCost
from kernelcheck._src.core.validate import as_bool, as_int, check_choice
from kernelcheck.errors import InvalidArgument

__all__ = ["Form", "FormRegistry", "FORMS", "get_form", "cost_model"]


@dataclass(frozen=True)
class Form:
    """One attention form and what goes with it.

    Attributes
    ----------
    name : str
        The registry key, e.g. ``"chunked"``.
    function : callable
        The form: ``function(Q, K, V, ...)`` for ``inputs == "queries"``,
        ``function(phi_q, phi_k, V, ...)`` for ``inputs == "features"``.
    error_bound : callable
        Its a-priori entrywise rounding-error bound, called with the same
        leading arguments (and ``causal=``).
    cost : callable
        ``cost(n, d, D, d_v, chunk_size, causal) -> (flops, state size)``.
    causal_only : bool
        True for forms that only compute causal attention (the recurrence).
    inputs : str
        ``"queries"`` (Q, K) or ``"features"`` (phi(Q), phi(K)).
    claims : tuple of str
        The claims the form computes (C1 ...).
    summary : str
        One line, for reports and documentation.
    model : str
        The error bound in one line (its function's docstring has the derivation).
    options : tuple of str
        The keyword options the form takes beyond ``causal`` and
        ``on_bad_normalizer`` (e.g. ``"chunk_size"``, ``"scale"``).
    requires : tuple of str
        Positional arguments after the three inputs (``"kernel"``, ``"gates"``).
    """

    name: str
    function: Callable[..., Any]
    error_bound: Callable[..., Any]
    cost: Callable[..., tuple[int, int]]
    causal_only: bool
    inputs: str
    claims: tuple[str, ...]
    summary: str
    model: str
    options: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def call(self, a: Any, b: Any, V: Any, *required: Any, causal: bool, **kwargs: Any) -> Any:
        """Run the form; ``causal`` goes to the forms that take it (not the causal-only ones).

        ``required`` are the positional arguments named by :attr:`requires`.
        """
        if len(required) != len(self.requires):
            raise InvalidArgument(
                f"form {self.name!r} takes {len(self.requires)} argument(s) after the inputs "
                f"({', '.join(self.requires) or 'none'}), got {len(required)}"
            )
        if self.causal_only:
            if not causal:
                raise InvalidArgument(f"form {self.name!r} is causal only; pass causal=True")
            return self.function(a, b, V, *required, **kwargs)
        return self.function(a, b, V, *required, causal=causal, **kwargs)

    def bound(self, a: Any, b: Any, V: Any, *required: Any, causal: bool, **kwargs: Any) -> Any:
        """The form's error bound on the same arguments as :meth:`call`."""
        if self.causal_only and not causal:
            raise InvalidArgument(f"form {self.name!r} is causal only; pass causal=True")
        return self.error_bound(a, b, V, *required, causal=causal, **kwargs)


class FormRegistry(Mapping):
    """The attention forms by name, in the essay's order: a read-only mapping of :class:`Form`.

    ``FORMS["chunked"]`` is the chunked form; iterating gives the names;
    :meth:`select` filters by what a consumer needs (e.g. the forms that
    take feature matrices).
    """

    def __init__(self, *forms: Form):
        self._forms = {f.name: f for f in forms}

    def __getitem__(self, name: str) -> Form:
        return self._forms[name]

    def __iter__(self):
        return iter(self._forms)

    def __len__(self) -> int:
        return len(self._forms)

    def __repr__(self) -> str:
        return f"FormRegistry({', '.join(self._forms)})"

    def select(self, *, inputs: str | None = None, causal_only: bool | None = None) -> tuple:
        """The forms with the given ``inputs`` ("queries" or "features") and causality."""
        return tuple(
            f
            for f in self._forms.values()
            if (inputs is None or f.inputs == inputs)
            and (causal_only is None or f.causal_only == causal_only)
        )


_GATED_MODEL = "gated_error_bound: ((1 + gamma_(3n+2D+8))(1 + rho_i) - 1) |phi_q| (|phi_k| d)^T |V|"

#: Every attention form, by name, in the essay's order (read-only).
FORMS = FormRegistry(
    Form(
        "softmax",
        exact.softmax,
        bounds.softmax_error_bound,
        cost.softmax_cost,
        causal_only=False,
        inputs="queries",
        claims=("C1", "C2"),
        summary="exact softmax attention, stable (row maxima subtracted), query blocks",
        model="softmax_error_bound: [expm1(2 theta) + 2 gamma_n + u] max_j |v_j|",
        options=("scale",),
    ),
    Form(
        "kernelized",
        exact.kernelized,
        bounds.kernelized_error_bound,
        cost.kernelized_cost,
        causal_only=False,
        inputs="queries",
        claims=("C10",),
        summary="exact kernelized attention from the kernel's Gram block",
        model="kernelized_error_bound: E_G |V| + gamma_(n+1) |G| |V|, quotient bound",
        requires=("kernel",),
    ),
    Form(
        "parallel",
        linear.parallel,
        bounds.linear_error_bound,
        cost.parallel_cost,
        causal_only=False,
        inputs="features",
        claims=("C10", "C14"),
        summary="linear attention from feature matrices; causal by blocks and the running sums",
        model="linear_error_bound: gamma_(2n+2D+4) |phi_q| |phi_k|^T |V|, quotient bound",
        options=("normalize",),
    ),
    Form(
        "recurrent",
        linear.recurrent,
        bounds.linear_error_bound,
        cost.linear_cost,
        causal_only=True,
        inputs="features",
        claims=("C11", "C14"),
        summary="the recurrence over the state (S, z), one token at a time",
        model="linear_error_bound: gamma_(2n+2D+4) |phi_q| |phi_k|^T |V|, quotient bound",
        options=("normalize", "initial_state", "return_state"),
    ),
    Form(
        "chunked",
        linear.chunked,
        bounds.linear_error_bound,
        cost.chunked_cost,
        causal_only=True,
        inputs="features",
        claims=("C14",),
        summary="causal: quadratic within chunks, the recurrent state across them",
        model="linear_error_bound: gamma_(2n+2D+4) |phi_q| |phi_k|^T |V|, quotient bound",
        options=("chunk_size", "normalize", "initial_state", "return_state"),
    ),
    Form(
        "gated_parallel",
        gated.gated_parallel,
        bounds.gated_error_bound,
        cost.gated_parallel_cost,
        causal_only=True,
        inputs="features",
        claims=("C20",),
        summary="gated linear attention, decayed weights exp(L_i - L_j) in blocks of rows",
        model=_GATED_MODEL,
        options=("normalize",),
        requires=("gates",),
    ),
    Form(
        "gated_recurrent",
        gated.gated_recurrent,
        bounds.gated_error_bound,
        cost.gated_recurrent_cost,
        causal_only=True,
        inputs="features",
        claims=("C20",),
        summary="the gated recurrence S_t = g_t S_(t-1) + phi(k_t) v_t^T, token by token",
        model=_GATED_MODEL,
        options=("normalize", "initial_state", "return_state"),
        requires=("gates",),
    ),
    Form(
        "gated_chunked",
        gated.gated_chunked,
        bounds.gated_error_bound,
        cost.gated_chunked_cost,
        causal_only=True,
        inputs="features",
        claims=("C20",),
        summary="gated, chunked: decays within a chunk from its log sums, state carried",
        model=_GATED_MODEL,
        options=("chunk_size", "normalize", "initial_state", "return_state"),
        requires=("gates",),
    ),
)


def get_form(name: Any) -> Form:
    """The registered :class:`Form` called ``name``; else an InvalidArgument listing the names."""
    return FORMS[check_choice(name, "form", tuple(FORMS))]


def cost_model(
    form: str,
    n: int,
    d: int,
    D: int,
    d_v: int,
    chunk_size: int | None = None,
    *,
    causal: bool | None = None,
) -> AttentionCost:
    """Operation count and state size of an attention form (claims C2, C3, C11).

    Counts per sequence (one batch entry), multiply-add = 2 flops, ``exp``,
    division and addition 1 each, feature maps not counted:

    * ``softmax``: bidirectional ``2 n^2 d + 3 n^2 + 2 n^2 d_v + n d_v``;
      causal, ``2 P d + 3 P + 2 P d_v + n d_v`` with ``P ~ n (n + r) / 2``
      pairs formed (r rows a query block, ``r <= n / 16`` for large n); both
      plus ``n d + 2 n d_v`` for the query scaling and the output check.
      State: the key/value cache ``n (d + d_v)`` (grows with n, C2).
    * ``kernelized``: ``P (2 d + 1)`` for the Gram block (a dot product or a
      distance and one elementwise map) and ``2 P (d_v + 1) + n d_v`` for the
      products, with ``P`` the pairs formed as for softmax.  State ``n (d + d_v)``.
    * ``parallel``: bidirectional ``4 n D d_v + 4 n D + 2 n (d_v + 1) + n d_v``
      (C3: ``phi_k^T V`` and ``1^T phi_k``, then ``phi_q`` times both in one
      product, the check's column sums, then the divisions); causal
      that of ``chunked`` with its block size (32, or 64 for D > 1024).
    * ``recurrent``: ``4 n D (d_v + 1) + n d_v`` (causal only).
    * ``chunked``: chunks ``c_1..c_k``: ``sum 2 c^2 (D + d_v + 1)``
      + ``4 n D (d_v + 1)`` + ``k D (d_v + 1) + n (d_v + 1) + n d_v``
      (causal only).

    The linear forms' state is ``D (d_v + 1)``, independent of n (C11).

    Parameters
    ----------
    form : {"softmax", "kernelized", "parallel", "recurrent", "chunked"}
    n, d, D, d_v : int >= 1
        ``D`` is ignored by the exact forms, ``d`` by the linear ones.
    chunk_size : int >= 1, optional
        The chunk size of ``chunked`` and ``gated_chunked``; default that of
        the forms (32, or 64 for D > 1024).
    causal : bool, optional
        Default False for softmax, kernelized and parallel; recurrent and
        chunked are causal (passing False raises).

    Returns
    -------
    AttentionCost

    Examples
    --------
    >>> from kernelcheck.attention import cost_model
    >>> n, d, D, dv = 1000, 64, 256, 64
    >>> flops = 4 * n * D * dv + 4 * n * D + 2 * n * (dv + 1) + n * dv
    >>> cost_model("parallel", n, d, D, dv).flops == flops
    True
    >>> short = cost_model("recurrent", 10, 64, 256, 64)
    >>> short.state_size == cost_model("recurrent", 10**6, 64, 256, 64).state_size
    True
    """
    f = get_form(form)
    n = as_int(n, "n", minimum=1)
    d = as_int(d, "d", minimum=1)
    D = as_int(D, "D", minimum=1)
    d_v = as_int(d_v, "d_v", minimum=1)
    C = auto_chunk_size(D) if chunk_size is None else as_int(chunk_size, "chunk_size", minimum=1)
    causal = f.causal_only if causal is None else as_bool(causal, "causal")
    if f.causal_only and not causal:
        raise InvalidArgument(f"`causal` must be True for form {f.name!r} (it is causal only)")
    flops, state = f.cost(n, d, D, d_v, C, causal)
    return AttentionCost(
        form=f.name,
        causal=causal,
        n=n,
        d=d,
        D=D,
        d_v=d_v,
        chunk_size=C,
        flops=int(flops),
        state_size=int(state),
    )
