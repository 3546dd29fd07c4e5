"""The delta-rule families' chunked forms next to flash-linear-attention's naive chunked references.

Groups (``benchmark.group``), each measured in the same run, n = 8192 tokens,
d = d_v = 64, one head, BLAS and torch at one thread:

* ``delta-chunked``: :func:`~kernelcheck.attention.delta_chunked` (float64)
  against fla-core's ``delta_rule_chunkwise`` in torch float64 (it keeps its
  inputs' precision);
* ``gated-delta-chunked``: :func:`~kernelcheck.attention.gated_delta_chunked`
  against ``naive_chunk_gated_delta_rule`` (it casts to float32 inside:
  the float64 form is timed against float32 torch);
* ``kda-chunked``: :func:`~kernelcheck.attention.kda_chunked` against
  ``naive_chunk_kda`` (float32 inside as well);
* ``dplr-chunked``: :func:`~kernelcheck.attention.dplr_chunked` against
  ``dplr_chunkwise`` (float32 inside).

Target: each form at least as fast as its reference (measured, never
asserted).  Where fla's reference casts to float32, the form's float32 run
(its inputs in float32: the engine keeps their precision) is timed beside
it as well, the like-for-like comparison.  Every benchmark checks its output against the family's
recurrent form within the bound (float64's, or float32's for a reference
computing in float32), so under ``--benchmark-disable`` (n = 256, one run) the
file is a correctness test.  The recurrent forms' constant cost per token is
asserted from their cost model (a deterministic claim, C3, C11).

Reproduce: ``python3 -m pytest benchmarks/bench_delta.py --benchmark-only``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import attention as att

torch = pytest.importorskip("torch")
pytest.importorskip("einops")

D = 64


def _naive(relative: str):
    found = importlib.util.find_spec("fla")
    roots = [] if found is None else list(found.submodule_search_locations or [])
    paths = [Path(root, "ops", relative) for root in roots if Path(root, "ops", relative).exists()]
    if not paths:
        pytest.skip(f"no fla-core with ops/{relative}")
    spec = importlib.util.spec_from_file_location("bench_" + paths[0].stem, paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rounds(benchmark) -> dict:
    if benchmark.disabled:
        return {"rounds": 1, "iterations": 1}
    return {"rounds": 5, "iterations": 1, "warmup_rounds": 1}


@pytest.fixture
def one_thread():
    """BLAS and torch at one thread each (the comparison is of algorithms, not of threading)."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


def _inputs(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 1, 1, n, D))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    kappa = k
    return {
        "q": q, "k": k, "v": rng.standard_normal((1, 1, n, D)),
        "beta": rng.uniform(0.1, 1.0, (1, 1, n)), "g": rng.uniform(0.9, 1.0, (1, 1, n)),
        "G": rng.uniform(0.9, 1.0, (1, 1, n, D)),
        "a": -kappa, "b": kappa * rng.uniform(0.0, 1.0, (1, 1, n, D)),
    }  # fmt: skip


def _bnhd(x):
    return torch.tensor(np.asarray(x)).transpose(1, 2).contiguous()


def _check(out, family, args, float32=False):
    form = next(f for f in att.FAMILIES[family].forms if f.name.endswith("recurrent"))
    ref = form.call(*args, causal=True)
    tol = form.bound(*args, causal=True)
    if float32:
        tol = tol + form.bound(*args, causal=True, dtype="float32", extra_ops=2)
    assert (np.abs(out - ref) <= tol).all()


@pytest.mark.benchmark(group="delta-chunked")
def test_delta_chunked(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = (x["q"], x["k"], x["v"], x["beta"])
    out = benchmark.pedantic(att.delta_chunked, args, {"chunk_size": 64}, **_rounds(benchmark))
    _check(out, "delta", args)


@pytest.mark.benchmark(group="delta-chunked")
def test_fla_delta_rule_chunkwise_float64(benchmark, size_for, one_thread):
    fla = _naive("delta_rule/naive.py")
    x = _inputs(size_for(8192, 256))
    t = [torch.tensor(x[n]) for n in ("q", "k", "v", "beta")]
    o, _ = benchmark.pedantic(fla.delta_rule_chunkwise, t, {"chunk_size": 64}, **_rounds(benchmark))
    _check(o.numpy(), "delta", (x["q"] * D**-0.5, x["k"], x["v"], x["beta"]))


@pytest.mark.benchmark(group="gated-delta-chunked")
def test_gated_delta_chunked(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"])
    out = benchmark.pedantic(att.gated_delta_chunked, args, {"chunk_size": 64},
                             **_rounds(benchmark))  # fmt: skip
    _check(out, "gated_delta", args)


@pytest.mark.benchmark(group="gated-delta-chunked")
def test_gated_delta_chunked_float32(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = tuple(x[n].astype(np.float32) for n in ("q", "k", "v", "g", "beta"))
    out = benchmark.pedantic(att.gated_delta_chunked, args, {"chunk_size": 64},
                             **_rounds(benchmark))  # fmt: skip
    _check(out, "gated_delta", tuple(a.astype(np.float64) for a in args), float32=True)


@pytest.mark.benchmark(group="gated-delta-chunked")
def test_fla_naive_chunk_gated_delta_rule(benchmark, size_for, one_thread):
    fla = _naive("gated_delta_rule/naive.py")
    x = _inputs(size_for(8192, 256))
    t = [_bnhd(x[n]) for n in ("q", "k", "v")]
    lg, b = _bnhd(np.log(x["g"])[..., None])[..., 0], _bnhd(x["beta"][..., None])[..., 0]
    o, _ = benchmark.pedantic(fla.naive_chunk_gated_delta_rule, (*t, lg, b),
                              {"chunk_size": 64, "scale": 1.0}, **_rounds(benchmark))  # fmt: skip
    got = o.transpose(1, 2).double().numpy()
    _check(got, "gated_delta", (x["q"], x["k"], x["v"], x["g"], x["beta"]), float32=True)


@pytest.mark.benchmark(group="kda-chunked")
def test_kda_chunked(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = (x["q"], x["k"], x["v"], x["G"], x["beta"])
    out = benchmark.pedantic(att.kda_chunked, args, {"chunk_size": 64}, **_rounds(benchmark))
    _check(out, "kda", args)


@pytest.mark.benchmark(group="kda-chunked")
def test_kda_chunked_float32(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = tuple(x[n].astype(np.float32) for n in ("q", "k", "v", "G", "beta"))
    out = benchmark.pedantic(att.kda_chunked, args, {"chunk_size": 64}, **_rounds(benchmark))
    _check(out, "kda", tuple(a.astype(np.float64) for a in args), float32=True)


@pytest.mark.benchmark(group="kda-chunked")
def test_fla_naive_chunk_kda(benchmark, size_for, one_thread):
    fla = _naive("kda/naive.py")
    x = _inputs(size_for(8192, 256))
    t = [_bnhd(x[n]) for n in ("q", "k", "v")] + [_bnhd(np.log(x["G"]))]
    b = _bnhd(x["beta"][..., None])[..., 0]
    o, _ = benchmark.pedantic(fla.naive_chunk_kda, (*t, b), {"chunk_size": 64, "scale": 1.0},
                              **_rounds(benchmark))  # fmt: skip
    got = o.transpose(1, 2).double().numpy()
    _check(got, "kda", (x["q"], x["k"], x["v"], x["G"], x["beta"]), float32=True)


@pytest.mark.benchmark(group="dplr-chunked")
def test_dplr_chunked(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = (x["q"], x["k"], x["v"], x["a"], x["b"], x["G"])
    out = benchmark.pedantic(att.dplr_chunked, args, {"chunk_size": 64}, **_rounds(benchmark))
    _check(out, "dplr", args)


@pytest.mark.benchmark(group="dplr-chunked")
def test_dplr_chunked_float32(benchmark, size_for, one_thread):
    x = _inputs(size_for(8192, 256))
    args = tuple(x[n].astype(np.float32) for n in ("q", "k", "v", "a", "b", "G"))
    out = benchmark.pedantic(att.dplr_chunked, args, {"chunk_size": 64}, **_rounds(benchmark))
    _check(out, "dplr", tuple(a.astype(np.float64) for a in args), float32=True)


@pytest.mark.benchmark(group="dplr-chunked")
def test_fla_dplr_chunkwise(benchmark, size_for, one_thread):
    fla = _naive("generalized_delta_rule/dplr/naive.py")
    x = _inputs(size_for(8192, 256))
    names = ("q", "k", "v", "a", "b")
    t = [torch.tensor(x[n]).float() for n in names] + [torch.tensor(np.log(x["G"])).float()]
    o, _ = benchmark.pedantic(fla.dplr_chunkwise, t, {"chunk_size": 64}, **_rounds(benchmark))
    args = (x["q"] * D**-0.5, x["k"], x["v"], x["a"], x["b"], x["G"])
    _check(o.double().numpy(), "dplr", args, float32=True)


@pytest.mark.parametrize("family", ["delta", "gated_delta", "kda", "dplr"])
def test_the_recurrent_cost_per_token_does_not_depend_on_n(family):
    """C3, C11: the recurrent forms' flops per token and state size are constant in n."""
    name = f"{family}_recurrent"
    costs = [att.cost_model(name, n, D, D, D) for n in (1024, 4096, 16384)]
    assert len({c.flops_per_token() for c in costs}) == 1
    assert len({c.state_size for c in costs}) == 1
