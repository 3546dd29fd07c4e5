"""What the scaling experiment measures: the forms, their sizes and their inputs (C2, C3).

:data:`SCALING_FORMS` names each measured form (one of the attention
registry's forms, with a mask and the claim it corroborates) and its *kind*:
``"quadratic"`` for the forms on queries and keys (exact attention, C2),
``"linear"`` for the forms on feature matrices (C3).  The kind gives the
exponent of the operation count (:data:`EXPECTED_EXPONENTS`) and the sizes
it is timed over (:data:`DEFAULT_SIZES`, :data:`QUICK_SIZES`): a linear form
is cheap enough to be timed over a wider range of n, which narrows its
accepted range (:func:`~kernelcheck._src.scaling.judge.accepted_range`).

:class:`Inputs` draws the inputs of the largest size once and hands out
their first n rows, so every size sees the same kind of data and the memory
is that of the largest size only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from kernelcheck._src.attention.registry import FORMS, family_of
from kernelcheck._src.core.seeds import child_seed
from kernelcheck._src.scaling.sizes import geometric_sizes
from kernelcheck.errors import InvalidArgument

__all__ = [
    "KINDS",
    "EXPECTED_EXPONENTS",
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "ScalingForm",
    "SCALING_FORMS",
    "DEFAULT_FORMS",
    "Inputs",
]

#: The kinds of form, by the exponent in n of their operation count.
KINDS = ("quadratic", "linear")
#: Exponent of the operation count of each kind (claims C2 and C3).
EXPECTED_EXPONENTS: Mapping[str, float] = MappingProxyType({"quadratic": 2.0, "linear": 1.0})

#: Default sizes of each kind.  Exact attention: n = 1024 .. 8192, seven sizes
#: sqrt(2) apart (a factor 8: accepted range 2 +- 1/3; below n = 1024 the fixed
#: cost of each of the causal form's query blocks bends its times); linear
#: attention: n = 512 .. 32768 doubling (a factor 64: 1 +- 1/6; beyond n = 32768
#: the feature matrices leave the caches and time per operation grows with n).
DEFAULT_SIZES: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {
        "quadratic": geometric_sizes(1024, 8192, num=7),
        "linear": geometric_sizes(512, 32768),
    }
)
#: Sizes of the quick run (and of the essay's C2/C3 check): n = 512 .. 4096 in
#: five sizes for exact attention (a factor 8: 2 +- 1/3), n = 512 .. 16384
#: doubling for linear attention (a factor 32: 1 +- 1/5).
QUICK_SIZES: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {
        "quadratic": geometric_sizes(512, 4096, num=5),
        "linear": geometric_sizes(512, 16384),
    }
)


class ScalingForm(NamedTuple):
    """One measured form: its label, registered form, mask, claim and kind."""

    label: str
    form: str
    causal: bool
    claim: str
    kind: str

    @property
    def exponent(self) -> float:
        """The exponent in n of the form's operation count."""
        return EXPECTED_EXPONENTS[self.kind]


def _scaling_forms() -> Mapping[str, ScalingForm]:
    """Every form the registry marks as measured (:attr:`Form.scaling`), under one key each.

    The key is the form's registry name, with ``-causal`` for the causal
    mask of a form that computes both; the label names its family and form
    ("linear chunked, causal"); the kind follows from the form:
    exact forms (queries and keys) are quadratic in n (claim C2), the ones
    on feature matrices linear (C3).
    """
    out = {}
    for name, form in FORMS.items():
        kind = "quadratic" if form.inputs == "queries" else "linear"
        claim = "C2" if kind == "quadratic" else "C3"
        family = family_of(name).name
        words = name if name == family else f"{family} {name.removeprefix(family + '_')}"
        for causal in form.scaling:
            key = f"{name}-causal" if causal and not form.causal_only else name
            mask = "causal" if causal else "bidirectional"
            out[key] = ScalingForm(f"{words}, {mask}", name, causal, claim, kind)
    return MappingProxyType(out)


#: The forms the experiment can measure, each one of :data:`kernelcheck.attention.FORMS`.
SCALING_FORMS = _scaling_forms()
#: The forms measured by default: softmax both ways, linear parallel and chunked, and
#: the gated chunked form (C20: linear in n as C3).
DEFAULT_FORMS = ("softmax", "softmax-causal", "parallel", "chunked", "gated_chunked")


class Inputs:
    """The inputs at each size n: the first n rows of inputs drawn once at the largest size.

    Gaussian ``Q, K, V`` of shape (n, d); their positive random features of
    exp(q.k / sqrt d) for the linear forms; the per-token inputs of the form's
    family (gates in (0.9, 1) for the gated forms, from the family's
    :class:`~kernelcheck._src.attention.common.spec.TokenInput`).  Each matrix, and
    the feature map, has its own stream, the child of ``root`` at its path in
    :data:`_PATHS` (the i-th per-token input of a family at ``(tokens, i)``), so the
    first n rows are the same bytes whatever the largest size is.
    """

    #: Child paths below ``root``: queries, keys, values, the feature map, and the
    #: per-token inputs (one level deeper: their index in the family's list).
    _PATHS = {"Q": 0, "K": 1, "V": 2, "features": 3, "tokens": 4}

    def __init__(self, d: int, D: int, root: np.random.SeedSequence, largest: Mapping[str, int]):
        self.d, self.D, self.root = d, D, root
        self.largest = dict(largest)
        self._cache: dict[str, tuple] = {}

    def _rng(self, which: str, *below: int) -> np.random.Generator:
        return np.random.default_rng(child_seed(self.root, self._PATHS[which], *below))

    def _normal(self, which: str, n: int) -> np.ndarray:
        return self._rng(which).standard_normal((n, self.d))

    def _exact(self) -> tuple:
        if "quadratic" not in self._cache:
            n = self.largest["quadratic"]
            self._cache["quadratic"] = tuple(self._normal(w, n) for w in ("Q", "K", "V"))
        return self._cache["quadratic"]

    def _linear(self) -> tuple:
        if "linear" not in self._cache:
            n = self.largest["linear"]
            phi = _feature_map(self.d, self.D, self._rng("features"))
            pq, pk = phi(self._normal("Q", n)), phi(self._normal("K", n))
            self._cache["linear"] = (pq, pk, self._normal("V", n))
        return self._cache["linear"]

    def _token_inputs(self, entry: Any) -> tuple:
        """The per-token inputs of the form's family (the gates of C20, ...), drawn once."""
        family = family_of(entry.name)
        key = f"tokens {family.name}"
        if key not in self._cache:
            n = self.largest["linear"]
            draws = []
            for i, ti in enumerate(family.token_inputs):
                if ti.sample is None:
                    raise InvalidArgument(
                        f"the {ti.name} of the {family.name} family have no sampler"
                    )
                draws.append(ti.sample(self._rng("tokens", i), (n,)))
            self._cache[key] = tuple(draws)
        return self._cache[key]

    def for_form(self, entry: Any) -> Callable[[int], tuple]:
        """The inputs a registered form takes: queries and keys, or features and token inputs."""
        if entry.inputs == "queries":
            return lambda n: tuple(a[:n] for a in self._exact())
        arrays = self._linear() + self._token_inputs(entry)
        return lambda n: tuple(a[:n] for a in arrays)

    def nbytes(self, kinds) -> int:
        """Bytes of the inputs of ``kinds`` at their largest sizes (before drawing them)."""
        total = 0
        for kind in set(kinds):
            n = self.largest[kind]
            total += 8 * n * (3 * self.d if kind == "quadratic" else 2 * self.D + self.d + 1)
        return total


def _feature_map(d: int, D: int, seed: np.random.Generator):
    """Positive random features of exp(q.k / sqrt d), the softmax kernel (C13)."""
    from kernelcheck._src.features.random import PositiveRandomFeatures

    return PositiveRandomFeatures(d, D, seed=seed, scale=1.0 / math.sqrt(d))
