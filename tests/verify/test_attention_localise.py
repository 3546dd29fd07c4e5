"""Where a failing layer stops agreeing, and the bug shapes of blocked layers and eps normalisers.

A failing case's note names the rows that agree, the first mismatch and
whether it sits on a block boundary (:mod:`kernelcheck._src.verify.attention.localise`);
the diagnosis recognises an eps added to the normaliser (and estimates it),
a blocked layer that loses the state between blocks or drops each block's
last token from it.  flash-linear-attention's ``naive_chunk_linear_attn``
(1e-10 added to its normaliser) is diagnosed as such.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import verify
from kernelcheck._src.verify.attention.localise import localise, mismatched_rows


def _err(n, rows):
    err = np.zeros((2, n, 3))
    err[1, rows, 2] = 1.0  # one entry of one head is enough
    return err, np.full(err.shape, 0.5)


def test_rows_that_agree_and_the_first_mismatch():
    assert localise(*_err(10, [])) == ""
    assert mismatched_rows(*_err(10, [3, 7])).tolist() == [3, 7]
    text = localise(*_err(100, range(64, 100)))
    assert text.startswith("rows 0-63 agree; first mismatch at t = 64, a multiple of 64")
    assert "block boundary" in text and "every row from there on" in text
    assert localise(*_err(10, range(10))) == "first mismatch at t = 0; every row"
    assert localise(*_err(10, [1, 2])).startswith("row 0 agrees; first mismatch at t = 1;")
    assert "block" not in localise(*_err(100, range(50, 100)))  # 50: no block size


def test_one_row_per_block_and_the_partial_last_block():
    periodic = localise(*_err(200, [63, 127, 191]))
    assert "one row per block of 64" in periodic
    partial = localise(*_err(197, range(192, 197)))
    assert "partial last block of 5 tokens" in partial and "64" in partial
    scattered = localise(*_err(100, [5, 17, 60]))
    assert "3 of the 95 rows from there on mismatch (the last at t = 60)" in scattered


def _elu1(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _chunked(block=64, lose_state=False, drop_last=False, eps=0.0):
    """Causal normalised linear attention in blocks (NumPy, float64), with optional bugs."""

    def fn(Q, K, V):
        fq, fk = _elu1(Q), _elu1(K)
        S, z, out = np.zeros((fk.shape[-1], V.shape[-1])), np.zeros(fk.shape[-1]), []
        for c0 in range(0, Q.shape[-2], block):
            q, k, v = fq[c0 : c0 + block], fk[c0 : c0 + block], V[c0 : c0 + block]
            A = np.tril(q @ k.T)
            if lose_state:
                S, z = 0 * S, 0 * z
            out.append((A @ v + q @ S) / (A.sum(-1, keepdims=True) + q @ z[:, None] + eps))
            keep = slice(None, -1) if drop_last else slice(None)
            S, z = S + k[keep].T @ v[keep], z + k[keep].sum(0)
        return np.concatenate(out)

    return fn


def _failing(fn, **kw):
    report = verify.attention(fn, feature_map=_elu1, causal=True, n=100, cases=("random",),
                              check_causality=False, **kw)  # fmt: skip
    assert not report.passed
    return report.cases[0]


def test_a_state_lost_between_blocks_is_located_and_named():
    case = _failing(_chunked(lose_state=True))
    assert "rows 0-63 agree; first mismatch at t = 64, a multiple of 64" in case.note
    assert "each block of 64 tokens computed alone" in case.diagnosis


def test_a_state_missing_each_blocks_last_token_is_named():
    case = _failing(_chunked(block=32, drop_last=True))
    assert "first mismatch at t = 32, a multiple of 32" in case.note
    assert "misses each block's last token" in case.diagnosis and "32" in case.diagnosis


def test_an_eps_in_the_normaliser_is_estimated_and_named():
    case = _failing(_chunked(eps=1e-10))
    assert "normaliser with an eps of 1e-10 added" in case.diagnosis
    assert "stabilizer=1e-10" in case.diagnosis
    assert verify.attention(_chunked(eps=1e-10), feature_map=_elu1, causal=True, n=100,
                            stabilizer=1e-10).passed  # fmt: skip


def test_fla_naive_chunk_linear_attention_is_diagnosed_as_its_eps():
    """fla's naive chunked layer adds 1e-10 to its normaliser: named, estimated, passes declared."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("fla-core is not installed")
    path = Path(spec.submodule_search_locations[0]) / "ops" / "linear_attn" / "naive.py"
    module_spec = importlib.util.spec_from_file_location("fla_naive_linear_attn", path)
    fla = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(fla)

    def layer(q, k, v):  # positive features: the normaliser is defined
        return fla.naive_chunk_linear_attn(torch.exp(q), torch.exp(k), v, normalize=True)

    kw = dict(framework="torch", dtype="float64", causal=True, layout="bnhd", batch_shape=(1, 2),
              n=128, feature_map=(lambda X: np.exp(X) * X.shape[-1] ** -0.5, np.exp),
              cases=("random",))  # fmt: skip
    report = verify.attention(layer, **kw)
    assert "stabilizer=1e-10" in report.cases[0].diagnosis, report.details()
    assert verify.attention(layer, stabilizer=1e-10, **kw).passed
