"""ndarray subclasses given to the public array-taking calls: the base array's answer, or a refusal.

``np.matrix`` and a masked array without a mask give exactly the answer of the
base ndarray (``*`` of two ``np.matrix`` is a matrix product, so a kernel that
multiplied its inputs elementwise would differ); a masked array with a real
mask is refused by name.  One table of array-taking public calls, over
kernels, features, PSD, attention, statistics and the verifiers.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import attention, psd, stats, testing, verify
from kernelcheck.errors import InvalidArgument
from kernelcheck.features import (
    PositiveRandomFeatures,
    unweighted_monomials,
    weighted_monomials,
)
from kernelcheck.kernels import (
    Gaussian,
    Linear,
    Polynomial,
    exp,
    kernel_from_function,
)

RNG = np.random.default_rng(17)
X = RNG.normal(size=(4, 3))
Q, K, V = (RNG.normal(size=(5, 3)) for _ in range(3))
G = X @ X.T + np.eye(4)

pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")

#: id -> (call taking one 2-d array, the base array it is given)
ARRAY_CALLS = {
    "kernel-product": (lambda A: (Linear() * Linear())(A), X),
    "kernel-power": (lambda A: (Linear() ** 2)(A, A), X),
    "kernel-gaussian": (lambda A: Gaussian()(A), X),
    "kernel-exp": (lambda A: exp(Linear(), order=3)(A), X),
    "error_bound": (lambda A: (Linear() * Polynomial(2)).error_bound(A), X),
    "features": (lambda A: Polynomial(2).features()(A), X),
    "monomials-weighted": (lambda A: weighted_monomials(A, 2), X),
    "monomials-unweighted": (lambda A: unweighted_monomials(A, 2), X),
    "function-kernel": (lambda A: kernel_from_function(lambda x, y: x @ y)(A), X),
    "random-features": (lambda A: PositiveRandomFeatures(3, 8, seed=0)(A), X),
    "check_psd": (lambda A: psd.check_psd(A).verdict, G),
    "mercer": (lambda A: psd.mercer_features(A).phi, G),
    "nystrom": (lambda A: psd.Nystrom(Linear(), A)(A), X),
    "softmax": (lambda A: attention.softmax(A, K, V), Q),
    "kernelized": (lambda A: attention.kernelized(A, K, V, Gaussian()), Q),
    "parallel": (lambda A: attention.parallel(np.exp(A), np.exp(K), V), Q),
    "recurrent": (lambda A: attention.recurrent(np.exp(A), np.exp(K), V), Q),
    "chunked": (lambda A: attention.chunked(np.exp(A), np.exp(K), V, chunk_size=2), Q),
    "moments": (lambda A: stats.Moments.from_samples(A).mean, X),
    "verify.feature_map": (lambda A: verify.feature_map(Polynomial(2).features(), A).passed, X),
    "verify.kernel": (lambda A: verify.kernel(Linear(), A).passed, X),
    "assert_psd": (lambda A: testing.assert_psd(A).verdict, G),
    "assert_feature_map": (lambda A: testing.assert_feature_map(Linear().features(), A).passed, X),
}


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return type(a) is np.ndarray and np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("name", sorted(ARRAY_CALLS))
@pytest.mark.parametrize("kind", ["matrix", "masked-without-mask"])
def test_ndarray_subclasses_give_the_base_array_answer(name, kind):
    call, A = ARRAY_CALLS[name]
    sub = np.asmatrix(A) if kind == "matrix" else np.ma.masked_array(A, mask=False)
    assert _same(call(sub), call(A.copy())), name


@pytest.mark.parametrize("name", sorted(ARRAY_CALLS))
def test_a_masked_array_with_a_mask_is_refused_by_name(name):
    call, A = ARRAY_CALLS[name]
    mask = np.zeros(A.shape, dtype=bool)
    mask[0, -1] = True
    with pytest.raises(InvalidArgument, match=r"is a masked array with 1 masked entry"):
        call(np.ma.masked_array(A, mask=mask))


#: the rows of ARRAY_CALLS whose own lambda applies only kernelcheck to its array (the
#: attention forms' rows apply np.exp first, which a torch tensor does not take)
KERNELCHECK_ONLY = sorted(set(ARRAY_CALLS) - {"parallel", "recurrent", "chunked"})


@pytest.mark.parametrize("name", KERNELCHECK_ONLY)
def test_a_jax_bfloat16_array_gives_the_answer_of_a_torch_bfloat16_tensor(name):
    """bfloat16 is a storage format of every framework: JAX's (ml_dtypes') is read as torch's."""
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    call, A = ARRAY_CALLS[name]
    expected = call(torch.tensor(A, dtype=torch.bfloat16))
    assert _same(call(jnp.asarray(A, dtype=jnp.bfloat16)), expected), name
