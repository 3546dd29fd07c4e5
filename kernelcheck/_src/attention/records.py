"""The records of the attention registry: a form, a family, and the two read-only views.

:class:`Form` is one attention form with its error bound and cost model;
:class:`Family` one folder under ``attention/families/`` with its forms and
what ``verify.attention`` needs of it; :class:`FamilyRegistry` and
:class:`FormRegistry` hold them in the essay's order.  The one table of
families, :data:`~kernelcheck._src.attention.registry.FAMILIES`, and the
look-ups are in :mod:`~kernelcheck._src.attention.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kernelcheck._src.attention.common.spec import FamilySpec, TokenInput
from kernelcheck.errors import InvalidArgument

__all__ = ["Form", "Family", "FamilyRegistry", "FormRegistry"]


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
    options : tuple of str, default ()
        The keyword options the form takes beyond ``causal`` and
        ``on_bad_normalizer`` (e.g. ``"chunk_size"``, ``"scale"``).
    requires : tuple of str, default ()
        Positional arguments after the three inputs (``"kernel"``, ``"gates"``).
    scaling : tuple of bool, default ()
        The masks (False: bidirectional, True: causal) the scaling
        experiment measures the form with (none: not measured).
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
    scaling: tuple[bool, ...] = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def call(self, a: Any, b: Any, V: Any, *required: Any, causal: bool, **kwargs: Any) -> Any:
        """Run the form; ``causal`` goes to the forms that take it (not the causal-only ones).

        Parameters
        ----------
        a : array_like, shape (..., n, d) or (..., n, D)
            The queries ``Q`` (``inputs == "queries"``) or their features ``phi(Q)``.
        b : array_like, shape (..., n, d) or (..., n, D)
            The keys ``K`` or their features ``phi(K)``, as ``a``.
        V : array_like, shape (..., n, d_v)
            The values.
        *required
            The positional arguments named by :attr:`requires` (a kernel, the gates).
        causal : bool
            Causal mask; a causal-only form refuses False.
        **kwargs
            The form's options (:attr:`options`, ``on_bad_normalizer``).
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
        """The form's error bound on the same arguments as :meth:`call`.

        Parameters
        ----------
        a : array_like, shape (..., n, d) or (..., n, D)
            The queries ``Q`` or their features ``phi(Q)``, as in :meth:`call`.
        b : array_like, shape (..., n, d) or (..., n, D)
            The keys ``K`` or their features ``phi(K)``, as ``a``.
        V : array_like, shape (..., n, d_v)
            The values.
        *required
            The positional arguments named by :attr:`requires` (a kernel, the gates).
        causal : bool
            Causal mask; a causal-only form refuses False.
        **kwargs
            The bound's options (``dtype``, ``extra_ops``, the form's own).
        """
        if self.causal_only and not causal:
            raise InvalidArgument(f"form {self.name!r} is causal only; pass causal=True")
        return self.error_bound(a, b, V, *required, causal=causal, **kwargs)


@dataclass(frozen=True)
class Family:
    """One attention family: its forms and everything ``verify.attention`` needs of it.

    Attributes
    ----------
    name : str
        The family's name (its folder under ``attention/families/``).
    summary : str
        One line, for reports and documentation.
    claims : tuple of str
        The claims the family belongs to.
    forms : tuple of Form
        Its forms; the first is the reference ``verify.attention`` compares
        a layer with (computed in float64 on the inputs the layer received).
    spec : type
        Its :class:`~kernelcheck._src.attention.common.spec.FamilySpec`
        subclass: the reference's arguments, the range check (largest
        intermediates), the diagnosis's bug shapes, the state's bound and
        propagation, the reference gradient.
    requires : frozenset of str, default frozenset()
        The ``verify.attention`` options that must all be given to choose
        this family (softmax none, kernelized ``kernel``, gated
        ``feature_map`` and ``decay``, ...).
    accepts : frozenset of str, default frozenset()
        Further selecting options the family takes when given (a feature
        map of a family whose default map is the identity, ...).
    any_of : frozenset of str, default frozenset()
        Options of which at least one must be given (gates on the key
        channels, on the value channels, or both).
    flags : Mapping of str to callable, default {}
        ``verify.attention`` options the family's specification reads (keys
        normalised inside the layer, the layer's chunk length, ...), each with
        its validator ``check(value, name)``, which returns the value or
        raises ``InvalidArgument`` naming it; they select nothing.
    token_inputs : tuple of TokenInput, default ()
        Per-token inputs beside ``Q, K, V`` (the gates of C20, ...).
    storage_ops : int, default 0
        Roundings per term to the storage precision in a layer that stores
        in 16 bits and accumulates in float32 (e.g. linear: the two feature
        matrices, the scores or state, the sums and the output).
    """

    name: str
    summary: str
    claims: tuple[str, ...]
    forms: tuple[Form, ...]
    spec: type[FamilySpec]
    requires: frozenset[str] = frozenset()
    token_inputs: tuple[TokenInput, ...] = ()
    storage_ops: int = 0
    accepts: frozenset[str] = frozenset()
    any_of: frozenset[str] = frozenset()
    flags: Mapping[str, Callable[[Any, str], Any]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def selects(self, given: frozenset[str]) -> bool:
        """Whether the selecting options ``given`` choose this family.

        Parameters
        ----------
        given : frozenset of str
            The selecting ``verify.attention`` options passed (not None).
        """
        return (
            self.requires <= given
            and given <= self.requires | self.accepts | self.any_of
            and (not self.any_of or bool(given & self.any_of))
        )

    @property
    def options(self) -> frozenset[str]:
        """Every selecting option the family takes."""
        return self.requires | self.accepts | self.any_of

    @property
    def reference(self) -> Form:
        """The form ``verify.attention`` compares a layer with."""
        return self.forms[0]

    @property
    def state_form(self) -> Form | None:
        """The family's form whose final state the state checks compare with (None: no state)."""
        name = self.spec.state_form
        return None if name is None else next(f for f in self.forms if f.name == name)


class FamilyRegistry(Sequence):
    """The attention families in the essay's order: a read-only sequence of :class:`Family`.

    Indexed by position or by name (``FAMILIES["gated"]``); iterating gives
    the records.  Every consumer (``verify.attention``, the scaling
    experiment, the claim checks, the tests) reads this one list.
    """

    def __init__(self, *families: Family):
        self._families = families
        self._by_name = {f.name: f for f in families}

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return self._by_name[key]
        return self._families[key]

    def __len__(self) -> int:
        return len(self._families)

    def __repr__(self) -> str:
        return f"FamilyRegistry({', '.join(self._by_name)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The families' names, in order."""
        return tuple(self._by_name)


class FormRegistry(Mapping):
    """The attention forms by name, in the essay's order: a read-only mapping of :class:`Form`.

    The flat view of :data:`~kernelcheck._src.attention.registry.FAMILIES`:
    ``FORMS["chunked"]`` is the chunked form; iterating gives the names.
    """

    def __init__(self, families: Sequence[Family]):
        self._forms = {f.name: f for fam in families for f in fam.forms}

    def __getitem__(self, name: str) -> Form:
        return self._forms[name]

    def __iter__(self):
        return iter(self._forms)

    def __len__(self) -> int:
        return len(self._forms)

    def __repr__(self) -> str:
        return f"FormRegistry({', '.join(self._forms)})"
