"""Third-party implementations of the delta rule and its kin, loaded for the family tests.

flash-linear-attention (fla-core) ships pure-PyTorch naive references beside
its Triton kernels; its packages import Triton, which a CPU machine does not
have, so each ``naive.py`` is loaded by its path.  transformers' Qwen3-Next
and Kimi-Linear layers hold pure-PyTorch paths behind a decorator that would
dispatch to fla whenever it imports; ``__wrapped__`` reaches the torch path
deliberately.  Every one of them computes in float32, so their outputs are
judged with the float32 error model (inputs given as float32 numbers, so
their own casts are exact).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("einops")


def fla_naive(relative: str):
    """The module ``fla/ops/<relative>`` loaded by its path (skip when fla-core is absent)."""
    found = importlib.util.find_spec("fla")
    roots = [] if found is None else list(found.submodule_search_locations or [])
    paths = [Path(root, "ops", relative) for root in roots]
    if not any(p.exists() for p in paths):
        pytest.skip(f"no fla-core with ops/{relative} is installed")
    path = next(p for p in paths if p.exists())
    loader = importlib.util.spec_from_file_location("fla_" + path.stem + str(abs(hash(path))), path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def run_layer(fn, family: str, args, kw, S0, **options):
    """``fn`` on ``(q, k, v, log g, beta)`` in layout ``bnhd`` from a state ``S0``: judged.

    The reference is the family's recurrent form with ``kw`` (its scale and
    normalisation the layer's own); outputs and the final state must lie
    within the float32 tolerances of :func:`tolerances`.
    """
    from kernelcheck._src.attention.registry import FAMILIES
    from kernelcheck.attention import State

    kw = {**kw, "initial_state": State(S0)}
    recurrent = next(f for f in FAMILIES[family].forms if f.name.endswith("recurrent"))
    ref, S = recurrent.call(*args, causal=True, return_state=True, **kw)
    q, k, v, g, beta = args
    lg = np.log(g) if g.ndim == q.ndim else np.log(g)[..., None]
    T = [tensor(x, "bnhd") for x in (q, k, v, lg)]
    if g.ndim != q.ndim:
        T[-1] = T[-1][..., 0]
    b = tensor(beta[..., None], "bnhd")[..., 0]
    o, Sf = fn(*T, b, initial_state=tensor(S0), output_final_state=True, **options)
    tol, state_tol = tolerances(family, args, kw)
    within(array(o, "bnhd"), ref, tol, f"{fn.__name__} output")
    within(array(Sf), S.S, state_tol, f"{fn.__name__} final state")


def transformers_model(name: str):
    """``transformers.models.<name>.modeling_<name>`` (skip when transformers is absent)."""
    pytest.importorskip("transformers")
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


def f32(*arrays):
    """The arrays rounded to float32 numbers, kept as float64 (the reference's inputs)."""
    return tuple(np.asarray(a, dtype=np.float32).astype(np.float64) for a in arrays)


def tensor(x, layout: str = "bhnd"):
    """A float32 torch tensor in the layout ``bhnd`` (as given) or ``bnhd`` (axes 1, 2 swapped)."""
    t = torch.tensor(np.asarray(x, dtype=np.float32))
    return t.transpose(1, 2).contiguous() if layout == "bnhd" else t


def array(t, layout: str = "bhnd") -> np.ndarray:
    """A torch tensor back in float64, ``bnhd`` swapped back to ``(b, h, n, ...)``."""
    t = t.detach().to(torch.float64)
    return (t.transpose(1, 2) if layout == "bnhd" else t).numpy()


def within(got, ref, tol, what: str) -> None:
    """Every entry of ``got`` within ``tol`` of ``ref`` (with the worst ratio in the message)."""
    err = np.abs(np.asarray(got) - ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    assert (err <= tol).all(), f"{what}: {float((err / tol).max()):.3g} x the tolerance"


def tolerances(family: str, args, kw) -> tuple[np.ndarray, np.ndarray]:
    """The float32 layer's tolerance on outputs and on the final state (float64's share added).

    From the family's normwise model with the options ``kw`` (a handed-over
    state included); the final state's column bound bounds each entry.
    """
    from kernelcheck._src.attention.common.spec import SpecOptions
    from kernelcheck._src.attention.registry import FAMILIES

    spec = FAMILIES[family].spec(SpecOptions(causal=True))
    b64, b32 = spec.bounds(args, kw, np.float32)
    e = b64.state[..., -1, :] + b32.state[..., -1, :]
    D = args[0].shape[-1]
    return b64.out + b32.out, np.broadcast_to(e[..., None, :], e.shape[:-1] + (D, e.shape[-1]))


def grads_within(family: str, layer, args, kw, G, what: str) -> None:
    """A float32 torch layer's gradients of ``<G, y>`` within the family's float32 tolerance.

    ``layer(*tensors)`` maps float32 tensors of ``args`` (requiring
    gradients, in the reference's layout) to the outputs in that layout;
    the gates' gradient is taken with respect to their logarithms when
    ``kw["log_gates"]`` (the tensors then hold ``log g``).
    """
    from kernelcheck._src.attention.common.spec import SpecOptions
    from kernelcheck._src.attention.common.transition_spec import family_vjp
    from kernelcheck._src.attention.registry import FAMILIES

    logs = kw.pop("log_gates", False)
    spec = FAMILIES[family].spec(SpecOptions(causal=True))
    grads, (bound,) = family_vjp(spec, args, kw, G, models=((np.float32, 0),))
    names = ["q", "k", "v"] + [lim.name for lim in spec.limits]
    ts = []
    for name, a in zip(names, args, strict=True):
        value = np.log(a) if (logs and name == "gates") else a
        ts.append(torch.tensor(np.asarray(value, dtype=np.float32), requires_grad=True))
    out = layer(*ts)
    out.backward(torch.tensor(np.asarray(G, dtype=np.float32)))
    for name, t, a in zip(names, ts, args, strict=True):
        ref, tol = grads[name], bound[name]
        if logs and name == "gates":
            ref, tol = np.asarray(a) * ref, np.asarray(a) * tol
        got = t.grad.to(torch.float64).numpy()
        within(got, np.broadcast_to(ref, got.shape), np.broadcast_to(tol, got.shape),
               f"{what}: d{name}")  # fmt: skip
