"""The registry of attention families and their forms: each family once, every form once.

A :class:`~kernelcheck._src.attention.records.Family` is one folder under
``attention/families/`` and one record here: its forms (each a
:class:`~kernelcheck._src.attention.records.Form` with its error bound and
cost model), the per-token inputs it takes beside ``Q, K, V``
(:class:`~kernelcheck._src.attention.common.spec.TokenInput`), the
``verify.attention`` options that select it, the storage roundings of its
error model, the specification through which ``verify.attention`` builds its
reference, range check, state, gradient and bug shapes
(:class:`~kernelcheck._src.attention.common.spec.FamilySpec`), and its claims.
:data:`FAMILIES` lists them in the essay's order; :data:`FORMS` is the flat
view of their forms by name.  ``verify``, ``scaling``, the claim checks and
the tests read these records: adding a family is its folder plus one record.
"""

from __future__ import annotations

from typing import Any

from kernelcheck._src.attention.common.blocking import auto_chunk_size
from kernelcheck._src.attention.common.transition_spec import TRANSITION_FLAGS
from kernelcheck._src.attention.common.types import AttentionCost
from kernelcheck._src.attention.families.channel_gated import bound as channel_bound
from kernelcheck._src.attention.families.channel_gated import cost as channel_cost
from kernelcheck._src.attention.families.channel_gated import forms as channel_forms
from kernelcheck._src.attention.families.channel_gated.reference import (
    BONUS,
    KEY_GATES,
    VALUE_GATES,
    ChannelGatedSpec,
)
from kernelcheck._src.attention.families.delta import bound as delta_bound
from kernelcheck._src.attention.families.delta import cost as delta_cost
from kernelcheck._src.attention.families.delta import forms as delta_forms
from kernelcheck._src.attention.families.delta.reference import BETA_INPUT, DeltaSpec
from kernelcheck._src.attention.families.dplr import bound as dplr_bound
from kernelcheck._src.attention.families.dplr import cost as dplr_cost
from kernelcheck._src.attention.families.dplr import forms as dplr_forms
from kernelcheck._src.attention.families.dplr.reference import DPLR_A, DPLR_B, DplrSpec
from kernelcheck._src.attention.families.gated import bound as gated_bound
from kernelcheck._src.attention.families.gated import cost as gated_cost
from kernelcheck._src.attention.families.gated import forms as gated_forms
from kernelcheck._src.attention.families.gated.reference import GATES, GatedSpec
from kernelcheck._src.attention.families.gated_delta import bound as gated_delta_bound
from kernelcheck._src.attention.families.gated_delta import cost as gated_delta_cost
from kernelcheck._src.attention.families.gated_delta import forms as gated_delta_forms
from kernelcheck._src.attention.families.gated_delta.reference import (
    GATED_DELTA_INPUTS,
    GatedDeltaSpec,
)
from kernelcheck._src.attention.families.kda import bound as kda_bound
from kernelcheck._src.attention.families.kda import cost as kda_cost
from kernelcheck._src.attention.families.kda import forms as kda_forms
from kernelcheck._src.attention.families.kda.reference import KEY_GATES as KDA_GATES
from kernelcheck._src.attention.families.kda.reference import KdaSpec
from kernelcheck._src.attention.families.kernelized import bound as kernelized_bound
from kernelcheck._src.attention.families.kernelized import cost as kernelized_cost
from kernelcheck._src.attention.families.kernelized import forms as kernelized_forms
from kernelcheck._src.attention.families.kernelized.reference import KernelizedSpec
from kernelcheck._src.attention.families.linear import bound as linear_bound
from kernelcheck._src.attention.families.linear import cost as linear_cost
from kernelcheck._src.attention.families.linear import forms as linear_forms
from kernelcheck._src.attention.families.linear.reference import LinearSpec
from kernelcheck._src.attention.families.softmax import bound as softmax_bound
from kernelcheck._src.attention.families.softmax import cost as softmax_cost
from kernelcheck._src.attention.families.softmax import forms as softmax_forms
from kernelcheck._src.attention.families.softmax.reference import SoftmaxSpec
from kernelcheck._src.attention.records import Family, FamilyRegistry, Form, FormRegistry
from kernelcheck._src.core.validate import as_bool, as_int, check_choice
from kernelcheck.errors import InvalidArgument

__all__ = [
    "Form",
    "Family",
    "FamilyRegistry",
    "FAMILIES",
    "FormRegistry",
    "FORMS",
    "get_form",
    "get_family",
    "family_of",
    "select_family",
    "cost_model",
]


_DELTA_OPTIONS = ("chunk_size", "initial_state", "return_state", "qk_l2norm", "scale")
_TRANSITION_MODEL = (
    "normwise through the transitions (C24): e_t = rho_t e_(t-1) + lambda_t, "
    "|y_t| error <= |q_t| (e_t + ...); inf where the transitions expand"
)


def _transition_forms(family, modules, claims, requires, summaries):
    """The chunked, recurrent (and parallel) forms of a family of transitions (C22, C23).

    ``modules`` are the family's ``forms``, ``bound`` and ``cost`` modules,
    whose functions follow one naming: ``<family>_<kind>``,
    ``<family>_error_bound`` (``<family>_parallel_error_bound`` for the
    parallel form, one chunk of n tokens) and ``<family>_<kind>_cost``.
    ``summaries`` has one line per kind; the chunked form comes first: the
    reference of ``verify.attention`` (fast, and covered by the same bound).
    """
    forms, bound, cost = modules
    out = []
    for kind, line in summaries.items():
        options = {"chunked": _DELTA_OPTIONS, "recurrent": _DELTA_OPTIONS[1:]}.get(
            kind, ("qk_l2norm", "scale")
        )
        error_bound = (
            f"{family}_parallel_error_bound" if kind == "parallel" else f"{family}_error_bound"
        )
        out.append(
            Form(
                f"{family}_{kind}",
                getattr(forms, f"{family}_{kind}"),
                getattr(bound, error_bound),
                getattr(cost, f"{family}_{kind}_cost"),
                causal_only=True,
                inputs="features",
                claims=claims,
                summary=line,
                model=_TRANSITION_MODEL,
                options=options,
                requires=requires,
            )
        )
    return tuple(out)


_LINEAR_MODEL = "linear_error_bound: gamma_(2n+2D+4) |phi_q| |phi_k|^T |V|, quotient bound"
_GATED_MODEL = "gated_error_bound: ((1 + gamma_(3n+2D+8))(1 + rho_i) - 1) |phi_q| (|phi_k| d)^T |V|"
_CHANNEL_MODEL = (
    "channel_gated_error_bound: ((1 + gamma_(3n+D+10))(1 + rho_a,i)(1 + rho_b,i) - 1) M, "
    "M the decayed sums of absolute values"
)
_CHANNEL_INPUTS = ("key_gates", "value_gates", "bonus")


#: Every attention family, in the essay's order (read-only).
FAMILIES = FamilyRegistry(
    Family(
        "softmax",
        "exact softmax attention",
        ("C1", "C2"),
        (
            Form(
                "softmax",
                softmax_forms.softmax,
                softmax_bound.softmax_error_bound,
                softmax_cost.softmax_cost,
                causal_only=False,
                inputs="queries",
                claims=("C1", "C2"),
                summary="exact softmax attention, stable (row maxima subtracted), query blocks",
                model="softmax_error_bound: [expm1(2 theta) + 2 gamma_n + u] max_j |v_j|",
                options=("scale",),
                scaling=(False, True),
            ),
        ),
        SoftmaxSpec,
        storage_ops=3,
    ),
    Family(
        "kernelized",
        "exact attention with the weights of a kernel",
        ("C10",),
        (
            Form(
                "kernelized",
                kernelized_forms.kernelized,
                kernelized_bound.kernelized_error_bound,
                kernelized_cost.kernelized_cost,
                causal_only=False,
                inputs="queries",
                claims=("C10",),
                summary="exact kernelized attention from the kernel's Gram block",
                model="kernelized_error_bound: E_G |V| + gamma_(n+1) |G| |V|, quotient bound",
                requires=("kernel",),
            ),
        ),
        KernelizedSpec,
        requires=frozenset({"kernel"}),
        storage_ops=3,
    ),
    Family(
        "linear",
        "linear attention from feature maps, normalised or not",
        ("C10", "C11", "C14", "C19"),
        (
            Form(
                "parallel",
                linear_forms.parallel,
                linear_bound.linear_error_bound,
                linear_cost.parallel_cost,
                causal_only=False,
                inputs="features",
                claims=("C10", "C14"),
                summary="linear attention from feature matrices; causal by blocks and the "
                "running sums",
                model=_LINEAR_MODEL,
                options=("normalize",),
                scaling=(False, True),
            ),
            Form(
                "recurrent",
                linear_forms.recurrent,
                linear_bound.linear_error_bound,
                linear_cost.linear_cost,
                causal_only=True,
                inputs="features",
                claims=("C11", "C14"),
                summary="the recurrence over the state (S, z), one token at a time",
                model=_LINEAR_MODEL,
                options=("normalize", "initial_state", "return_state"),
                scaling=(True,),
            ),
            Form(
                "chunked",
                linear_forms.chunked,
                linear_bound.linear_error_bound,
                linear_cost.chunked_cost,
                causal_only=True,
                inputs="features",
                claims=("C14",),
                summary="causal: quadratic within chunks, the recurrent state across them",
                model=_LINEAR_MODEL,
                options=("chunk_size", "normalize", "initial_state", "return_state"),
                scaling=(True,),
            ),
        ),
        LinearSpec,
        requires=frozenset({"feature_map"}),
        storage_ops=5,
    ),
    Family(
        "gated",
        "decayed or gated linear attention, one gate per token and head",
        ("C20",),
        (
            Form(
                "gated_parallel",
                gated_forms.gated_parallel,
                gated_bound.gated_error_bound,
                gated_cost.gated_parallel_cost,
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
                gated_forms.gated_recurrent,
                gated_bound.gated_error_bound,
                gated_cost.gated_recurrent_cost,
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
                gated_forms.gated_chunked,
                gated_bound.gated_error_bound,
                gated_cost.gated_chunked_cost,
                causal_only=True,
                inputs="features",
                claims=("C20",),
                summary="gated, chunked: decays within a chunk from its log sums, state carried",
                model=_GATED_MODEL,
                options=("chunk_size", "normalize", "initial_state", "return_state"),
                requires=("gates",),
                scaling=(True,),
            ),
        ),
        GatedSpec,
        requires=frozenset({"feature_map", "decay"}),
        token_inputs=(GATES,),
        storage_ops=6,
    ),
    Family(
        "channel_gated",
        "linear attention with gates on the key or value channels (GLA, HGRN-2, RWKV-6)",
        ("C21",),
        (
            Form(
                "channel_gated_recurrent",
                channel_forms.channel_gated_recurrent,
                channel_bound.channel_gated_error_bound,
                channel_cost.channel_gated_recurrent_cost,
                causal_only=True,
                inputs="features",
                claims=("C21",),
                summary="S_t = Diag(a_t) S_(t-1) Diag(b_t) + phi(k_t) v_t^T, token by token",
                model=_CHANNEL_MODEL,
                options=("initial_state", "return_state"),
                requires=_CHANNEL_INPUTS,
            ),
            Form(
                "channel_gated_parallel",
                channel_forms.channel_gated_parallel,
                channel_bound.channel_gated_error_bound,
                channel_cost.channel_gated_parallel_cost,
                causal_only=True,
                inputs="features",
                claims=("C21",),
                summary="per-channel decays exp(L_i - L_j) of every pair, in blocks of rows",
                model=_CHANNEL_MODEL,
                requires=_CHANNEL_INPUTS,
            ),
            Form(
                "channel_gated_chunked",
                channel_forms.channel_gated_chunked,
                channel_bound.channel_gated_error_bound,
                channel_cost.channel_gated_chunked_cost,
                causal_only=True,
                inputs="features",
                claims=("C21",),
                summary="per-channel gated, chunked: decays within a chunk, the state carried",
                model=_CHANNEL_MODEL,
                options=("chunk_size", "initial_state", "return_state"),
                requires=_CHANNEL_INPUTS,
            ),
        ),
        ChannelGatedSpec,
        accepts=frozenset({"feature_map", "bonus"}),
        any_of=frozenset({"key_decay", "value_decay"}),
        token_inputs=(KEY_GATES, VALUE_GATES, BONUS),
        storage_ops=6,
    ),
    Family(
        "delta",
        "the delta rule (DeltaNet): one step of gradient descent on the state per token",
        ("C22", "C24"),
        _transition_forms(
            "delta",
            (delta_forms, delta_bound, delta_cost),
            ("C22",),
            ("beta",),
            {
                "chunked": "the delta rule by the WY (UT) representation, chunk by chunk",
                "recurrent": "S_t = (I - beta_t k_t k_t^T) S_(t-1) + beta_t k_t v_t^T",
                "parallel": "the delta rule's quadratic form, one UT transform of all tokens",
            },
        ),
        DeltaSpec,
        requires=frozenset({"beta"}),
        accepts=frozenset({"feature_map"}),
        token_inputs=(BETA_INPUT,),
        storage_ops=4,
        flags=TRANSITION_FLAGS,
    ),
    Family(
        "gated_delta",
        "Gated DeltaNet: the delta rule with a decay per token and head (Qwen3-Next)",
        ("C22", "C23", "C24"),
        _transition_forms(
            "gated_delta",
            (gated_delta_forms, gated_delta_bound, gated_delta_cost),
            ("C22", "C23"),
            ("gates", "beta"),
            {
                "chunked": "Gated DeltaNet by the WY (UT) representation, the chunk's decays",
                "recurrent": "S_t = alpha_t (I - beta_t k_t k_t^T) S_(t-1) + beta_t k_t v_t^T",
                "parallel": "Gated DeltaNet's quadratic form, one UT transform of all tokens",
            },
        ),
        GatedDeltaSpec,
        requires=frozenset({"beta", "decay"}),
        accepts=frozenset({"feature_map"}),
        token_inputs=GATED_DELTA_INPUTS,
        storage_ops=4,
        flags=TRANSITION_FLAGS,
    ),
    Family(
        "kda",
        "Kimi Delta Attention: the delta rule after a decay on every key channel",
        ("C22", "C23", "C24"),
        _transition_forms(
            "kda",
            (kda_forms, kda_bound, kda_cost),
            ("C22", "C23"),
            ("gates", "beta"),
            {
                "chunked": "Kimi Delta Attention by the WY (UT) representation, channel decays",
                "recurrent": "S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_(t-1) + beta_t k v^T",
            },
        ),
        KdaSpec,
        requires=frozenset({"beta", "key_decay"}),
        accepts=frozenset({"feature_map"}),
        token_inputs=(KDA_GATES, BETA_INPUT),
        storage_ops=4,
        flags=TRANSITION_FLAGS,
    ),
    Family(
        "dplr",
        "the diagonal-plus-rank-one transition of RWKV-7, the general case of C23",
        ("C23", "C24"),
        _transition_forms(
            "dplr",
            (dplr_forms, dplr_bound, dplr_cost),
            ("C23",),
            ("a", "b", "gates"),
            {
                "chunked": "the DPLR transition by the WY (UT) representation, general case",
                "recurrent": "S_t = (Diag(w_t) + b_t a_t^T) S_(t-1) + k_t v_t^T",
            },
        ),
        DplrSpec,
        requires=frozenset({"dplr_a", "dplr_b"}),
        accepts=frozenset({"feature_map", "key_decay"}),
        token_inputs=(DPLR_A, DPLR_B, KDA_GATES._replace(required=False)),
        storage_ops=4,
        flags=TRANSITION_FLAGS,
    ),
)


#: Every attention form by name, in the essay's order: the flat view of :data:`FAMILIES`.
FORMS = FormRegistry(FAMILIES)

_FAMILY_OF = {f.name: fam for fam in FAMILIES for f in fam.forms}


def get_form(name: Any) -> Form:
    """The registered :class:`Form` called ``name``; else an InvalidArgument listing the names.

    Parameters
    ----------
    name : str
        A key of :data:`FORMS` (``"softmax"``, ``"chunked"``, ...).
    """
    return FORMS[check_choice(name, "form", tuple(FORMS))]


def get_family(name: Any) -> Family:
    """The registered :class:`Family` called ``name``; else an InvalidArgument listing the names.

    Parameters
    ----------
    name : str
        A name of :data:`FAMILIES` (``"softmax"``, ``"linear"``, ...).
    """
    return FAMILIES[check_choice(name, "family", FAMILIES.names)]


def family_of(form: Any) -> Family:
    """The family a registered form belongs to."""
    return _FAMILY_OF[get_form(form).name]


#: Every option that selects a family, in the order the families name them.
SELECTING_OPTIONS: tuple[str, ...] = tuple(
    dict.fromkeys(o for fam in FAMILIES for o in sorted(fam.options))
)


#: Every per-token input and flag ``verify.attention`` takes for the recurrent families.
FAMILY_OPTIONS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [ti.option for fam in FAMILIES for ti in fam.token_inputs]
        + [flag for fam in FAMILIES for flag in fam.flags]
    )
)


def select_family(given: frozenset[str]) -> Family:
    """The family chosen by the selecting options ``given`` (those passed, not None).

    Among the families that take exactly these options
    (:meth:`Family.selects`), the one requiring the most of them; otherwise
    an InvalidArgument says what another option needs (``decay`` needs
    ``feature_map``) or which options exclude each other.
    """
    chosen = [fam for fam in FAMILIES if fam.selects(given)]
    if chosen:
        return max(chosen, key=lambda fam: len(fam.requires))
    wider = [fam for fam in FAMILIES if given < fam.requires]
    if wider:
        fam = wider[0]
        alone = {o for o in given if any(f.requires == {o} for f in FAMILIES)}
        option = sorted(given - alone or given)[-1]
        missing = " and ".join(f"`{o}`" for o in sorted(fam.requires - given))
        raise InvalidArgument(f"`{option}` needs {missing}: the {fam.name} family is {fam.summary}")
    names = " and ".join(f"`{o}`" for o in SELECTING_OPTIONS if o in given)
    raise InvalidArgument(
        f"pass at most one of {names}, got both: no attention family takes them together"
    )


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
    form : str
        A key of :data:`FORMS` (``"softmax"``, ``"parallel"``, ``"chunked"``, ...).
    n : int
        Sequence length (>= 1).
    d : int
        Query/key size (>= 1); ignored by the linear forms.
    D : int
        Feature dimension (>= 1); ignored by the exact forms.
    d_v : int
        Value size (>= 1).
    chunk_size : int, default None
        The chunk size of ``chunked`` and ``gated_chunked`` (>= 1; None: that
        of the forms, 32, or 64 for D > 1024).
    causal : bool, default None
        None: False for softmax, kernelized and parallel; recurrent and
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
