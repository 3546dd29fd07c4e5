"""flash-linear-attention's naive references pass verify.attention as they are (claims C19, C20).

The installed fla-core ships pure-PyTorch reference implementations next to
its Triton kernels: ``ops/linear_attn/naive.py`` (plain linear attention,
normalised or not, with a state), ``ops/retention/naive.py`` (one decay per
head) and ``ops/simple_gla/naive.py`` (one gate per token and head).  Their
package imports Triton, which a CPU machine does not have, so each file is
loaded by its path; the functions are then called by ``verify.attention``
with no wrapper: only options (layout, feature maps, decay, fn_kwargs).

Their conventions, read from the source: layout (batch, n, heads, dim)
except retention's (batch, heads, n, dim); ``scale`` (default
``dim ** -0.5``) multiplies the queries, so the reference's query map is
``x * dim ** -0.5`` and its key map ``x``; the normalised linear attention
adds ``1e-10`` to its normaliser (declared as ``stabilizer``); simple GLA
takes log gates; retention's decay of head h is ``1 - 2^(-5 - h)``; all
compute in float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelcheck import verify
from tests.fla_naive import load

torch = pytest.importorskip("torch")
pytest.importorskip("einops")


def _naive(family: str):
    return load(family)


def _scaled(X):
    return X * X.shape[-1] ** -0.5


def _identity(X):
    return X


DTYPES = ("float32", "bfloat16")


@pytest.mark.parametrize("dtype", DTYPES)
def test_fla_recurrent_linear_attention_unnormalised_with_state(dtype):
    fla = _naive("linear_attn")
    report = verify.attention(
        fla.naive_recurrent_linear_attn,
        framework="torch",
        dtype=dtype,
        causal=True,
        layout="bnhd",
        batch_shape=(2, 3),
        feature_map=(_scaled, _identity),
        normalize=False,
        state=True,
        read_state=lambda S: S,
        fn_kwargs={"output_final_state": True},
        cases=("random", "positive values", "n=1"),
    )
    assert report.passed, report.details()
    assert {c.name.split(" (")[0] for c in report.checks} >= {"final state", "state hand-over"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_fla_normalised_linear_attention_with_its_stabilizer(dtype):
    fla = _naive("linear_attn")
    rng = np.random.default_rng(0)
    q, k = np.exp(0.3 * rng.standard_normal((2, 2, 32, 2, 8)))  # positive features
    v = rng.standard_normal((2, 32, 2, 8))
    common = dict(
        framework="torch",
        dtype=dtype,
        causal=True,
        layout="bnhd",
        batch_shape=(2, 2),
        feature_map=(_scaled, _identity),
        inputs=(q, k, v),
        fn_kwargs={"normalize": True},
    )
    assert verify.attention(fla.naive_recurrent_linear_attn, stabilizer=1e-10, **common).passed
    if dtype == "float32":  # the eps is far below float32's resolution: no allowance needed
        assert verify.attention(fla.naive_recurrent_linear_attn, **common).passed


def test_fla_chunked_linear_attention():
    fla = _naive("linear_attn")
    report = verify.attention(
        fla.naive_chunk_linear_attn,
        framework="torch",
        dtype="float32",
        causal=True,
        layout="bnhd",
        batch_shape=(1, 2),
        n=128,  # its chunk size is 64 and it does not pad
        feature_map=(_scaled, _identity),
        normalize=False,
        cases=("random", "positive values"),
    )
    assert report.passed, report.details()


@pytest.mark.parametrize("dtype", DTYPES)
def test_fla_retention(dtype):
    fla = _naive("retention")
    H = 4
    decay = 1.0 - 2.0 ** (-5.0 - np.arange(H))
    report = verify.attention(
        fla.naive_retention,
        framework="torch",
        dtype=dtype,
        causal=True,
        batch_shape=(2, H),
        feature_map=(_scaled, _identity),
        normalize=False,
        decay=decay,
        cases=("random", "positive values", "odd length"),
    )
    assert report.passed, report.details()
    off = verify.attention(
        fla.naive_retention, framework="torch", dtype=dtype, causal=True, batch_shape=(2, H),
        feature_map=(_scaled, _identity), normalize=False, decay=decay ** 2, cases=("random",),
    )  # fmt: skip
    assert not off.passed  # the wrong decay is caught


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["naive_recurrent_simple_gla", "naive_chunk_simple_gla"])
def test_fla_simple_gla(name, dtype):
    fla = _naive("simple_gla")
    report = verify.attention(
        getattr(fla, name),
        framework="torch",
        dtype=dtype,
        causal=True,
        layout="bnhd",
        batch_shape=(2, 2),
        feature_map=(_scaled, _identity),
        normalize=False,
        decay=lambda rng, shape: rng.uniform(0.8, 1.0, size=shape),
        log_gates=True,
        cases=("random", "positive values", "odd length"),
    )
    assert report.passed, report.details()
