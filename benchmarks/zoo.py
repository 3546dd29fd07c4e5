"""Correct attention layers as users write them: the zoo the false-alarm counts are measured on.

Every layer here computes the reference formula; they differ in what they
store in the input's precision and how they accumulate:

* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` as PyTorch
  dispatches it on this machine, and ``sdpa math``: its math backend;
* ``flash``: a flash-style softmax in blocks of 64 keys with an online
  maximum and float32 accumulators, the probabilities ``P`` stored in the
  input's precision for ``P V``, and a custom backward pass that recomputes
  ``P`` and stores ``dS = P (dP - D)`` in the input's precision too;
* ``chunked linear``: causal linear attention (elu + 1 features) in chunks of
  64 tokens, the inputs in the layer's dtype and the state ``(S, z)`` in
  float32 (as flash-linear-attention's chunk kernels keep it);
* ``cumsum linear``: the same by cumulative sums in float32;
* ``compiled sdpa``, ``compiled chunked linear``: ``torch.compile`` of the two;
* ``flash tf32``, ``chunked linear tf32``: ``flash`` and ``chunked linear``
  with every matrix product rounding its float32 operands to TF32, to
  nearest (judged with ``dtype="tf32-nearest"``);
* ``jax sdpa``, ``jax cumsum linear``, ``jax scan linear``: JAX's
  ``dot_product_attention``, cumulative sums and a ``lax.scan`` recurrence
  with a float32 state.

:func:`zoo` lists ``(name, layer, options)``, the options being those of
``verify.attention`` that describe the layer (reference family, causal mask,
layout).
"""

from __future__ import annotations

import numpy as np

from kernelcheck._src.verify.attention.cases import CASES

BLOCK = 64


def elu1_np(X):
    """elu(x) + 1 on float64 rows: the reference's feature map."""
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def elu1_any(X):
    """elu(x) + 1 on NumPy arrays or torch tensors: a map verify.attention can differentiate.

    verify.attention evaluates the reference's map on float64 NumPy rows and
    takes its Jacobian (for the reference dQ, dK) from torch's automatic
    differentiation, which needs the map in torch operations.
    """
    if isinstance(X, np.ndarray):
        return elu1_np(X)
    return elu1(X)


def _torch():
    import torch

    return torch


def elu1(x):
    torch = _torch()
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def _store(x, dtype):
    """Round a float32 tensor to the layer's storage dtype and back (a stored intermediate)."""
    return x.to(dtype).to(x.dtype) if dtype != x.dtype else x


def _hook(bug, name, x):
    """``bug(name, x)`` on a float32 result before it is rounded (None: no bug)."""
    return x if bug is None else bug(name, x)


def to_tf32(x):
    """A float32 tensor rounded to TF32 (10 fraction bits, to nearest, ties to even).

    What a TF32 matrix product does to its float32 operands (NVIDIA tensor
    cores, PyTorch's ``allow_tf32``); emulated here on the CPU.
    """
    torch = _torch()
    bits = x.float().contiguous().view(torch.int32)
    keep = (bits >> 13) & 1
    rounded = ((bits + 0x0FFF + keep) >> 13) << 13
    return rounded.view(torch.float32)


def _tf32_operand(x):
    """``x`` rounded to TF32, its gradient passed through unchanged (the rounding is no op of
    the formula: a float32 backward pass differentiates the exact product)."""
    return x + (to_tf32(x) - x).detach() if x.requires_grad else to_tf32(x)


def _mm(a, b, tf32):
    """``a @ b``, its operands rounded to TF32 first when ``tf32``."""
    return _tf32_operand(a) @ _tf32_operand(b) if tf32 else a @ b


def _flash_forward(q, k, v, causal, dtype, tf32=False):
    """Online softmax over key blocks: float32 accumulators, P rounded to ``dtype``."""
    torch = _torch()
    n, scale = q.shape[-2], q.shape[-1] ** -0.5
    m = torch.full(q.shape[:-1] + (1,), -torch.inf)
    den = torch.zeros(q.shape[:-1] + (1,))
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],))
    rows = torch.arange(n)[:, None]
    for c0 in range(0, n, BLOCK):
        kb, vb = k[..., c0 : c0 + BLOCK, :], v[..., c0 : c0 + BLOCK, :]
        s = _mm(q, kb.transpose(-1, -2), tf32) * scale
        if causal:
            s = s.masked_fill(torch.arange(c0, c0 + kb.shape[-2])[None, :] > rows, -torch.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        den = den * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + _mm(_store(p, dtype), vb, tf32)
        m = m_new
    return acc / den, m, den


class _Flash:
    """The autograd function, built once torch is imported."""

    fn = None

    @classmethod
    def get(cls):
        if cls.fn is None:
            torch = _torch()

            class Flash(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, k, v, causal, bug, tf32):
                    dtype = q.dtype
                    q32, k32, v32 = q.float(), k.float(), v.float()
                    o, m, den = _flash_forward(q32, k32, v32, causal, dtype, tf32)
                    o16 = _hook(bug, "O", o).to(dtype)
                    ctx.save_for_backward(q32, k32, v32, o16.float(), m, den)
                    ctx.causal, ctx.dtype, ctx.bug, ctx.tf32 = causal, dtype, bug, tf32
                    return o16

                @staticmethod
                def backward(ctx, do):
                    q, k, v, o, m, den = ctx.saved_tensors
                    dtype, causal, tf32 = ctx.dtype, ctx.causal, ctx.tf32
                    do = do.float()
                    n, scale = q.shape[-2], q.shape[-1] ** -0.5
                    s = _mm(q, k.transpose(-1, -2), tf32) * scale
                    if causal:
                        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
                    p = torch.exp(s - m) / den
                    p16 = _store(p, dtype)
                    dv = _mm(p16.transpose(-1, -2), do, tf32)
                    dp = _mm(do, v.transpose(-1, -2), tf32)
                    D = (do * o).sum(-1, keepdim=True)
                    ds = _store(p * (dp - D), dtype)
                    dq = _hook(ctx.bug, "dQ", _mm(ds, k, tf32) * scale)
                    dk = _hook(ctx.bug, "dK", _mm(ds.transpose(-1, -2), q, tf32) * scale)
                    dv = _hook(ctx.bug, "dV", dv)
                    return dq.to(dtype), dk.to(dtype), dv.to(dtype), None, None, None

            cls.fn = Flash
        return cls.fn


class _GradHook:
    """Identity forward; ``bug(name, g)`` on the float32 gradient flowing back."""

    fn = None

    @classmethod
    def get(cls):
        if cls.fn is None:
            torch = _torch()

            class GradHook(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, bug, name):
                    ctx.bug, ctx.name = bug, name
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, g):
                    return ctx.bug(ctx.name, g.float()).to(g.dtype), None, None

            cls.fn = GradHook
        return cls.fn


def flash(causal=True, bug=None, tf32=False):
    """A flash-style softmax layer with P and dS stored in the input's precision.

    ``bug(name, x)``, when given, is applied to the float32 result ``name``
    (``"O"``, ``"dQ"``, ``"dK"``, ``"dV"``) before it is rounded to the
    input's dtype: a systematic error inside the layer's arithmetic.  With
    ``tf32`` every matrix product rounds its float32 operands to TF32.
    """

    def layer(Q, K, V):
        return _Flash.get().apply(Q, K, V, causal, bug, tf32)

    return layer


def chunked_linear(Q, K, V, chunk=BLOCK, bug=None, tf32=False):
    """Causal normalised linear attention in chunks, inputs in their dtype, state in float32.

    ``bug(name, x)`` as for :func:`flash`: ``"O"`` on the float32 output,
    ``"dV"`` on the float32 gradient of the values, ``"dQ"`` and ``"dK"`` on the
    gradients of the queries and keys as autograd hands them back (in the
    inputs' dtype: the features' backward runs in it), applied in float32 and
    rounded again; ``tf32`` as for :func:`flash`.
    """
    torch = _torch()
    acc = torch.float32 if Q.element_size() < 4 else Q.dtype
    if bug is not None:  # dQ, dK: on the gradient as autograd hands it back (in Q's dtype)
        Q = _GradHook.get().apply(Q, bug, "dQ") if Q.requires_grad else Q
        K = _GradHook.get().apply(K, bug, "dK") if K.requires_grad else K
    fq, fk, V32 = elu1(Q), elu1(K), V.to(acc)
    if bug is not None and V32.requires_grad:
        V32 = _GradHook.get().apply(V32, bug, "dV")
    S = Q.new_zeros(Q.shape[:-2] + (fk.shape[-1], V.shape[-1]), dtype=acc)
    z = Q.new_zeros(Q.shape[:-2] + (fk.shape[-1],), dtype=acc)
    outs = []
    for c0 in range(0, Q.shape[-2], chunk):
        q, k, v = (x[..., c0 : c0 + chunk, :] for x in (fq, fk, V32))
        A = _mm(q, k.transpose(-1, -2), tf32).tril().to(acc)
        qs = q.to(acc)
        num = _mm(A, v, tf32) + _mm(qs, S, tf32)
        den = A.sum(-1, keepdim=True) + _mm(qs, z[..., :, None], tf32)
        outs.append(num / den)
        ks = k.to(acc)
        S, z = S + _mm(ks.transpose(-1, -2), v, tf32), z + ks.sum(-2)
    return _hook(bug, "O", torch.cat(outs, -2)).to(Q.dtype)


def cumsum_linear(Q, K, V):
    """Causal normalised linear attention by cumulative sums, kept in float32 for 16-bit inputs."""
    torch = _torch()
    acc = torch.float32 if Q.element_size() < 4 else Q.dtype
    fq, fk, v = elu1(Q).to(acc), elu1(K).to(acc), V.to(acc)
    S = torch.einsum("...nd,...ne->...nde", fk, v).cumsum(dim=-3)
    num = torch.einsum("...nd,...nde->...ne", fq, S)
    return (num / (fq * fk.cumsum(dim=-2)).sum(-1, keepdim=True)).to(Q.dtype)


def sdpa(causal=True, math_backend=False):
    """PyTorch's scaled_dot_product_attention (its math backend when asked)."""
    torch = _torch()
    F = torch.nn.functional

    def layer(Q, K, V):
        if math_backend:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)

    return layer


def compiled(fn):
    """``torch.compile(fn)`` (one compilation per shape and dtype).

    verify.attention hands a layer a dozen shapes per dtype (its cases, the
    state and causality checks): the recompilation limit is raised so that
    every one of them runs compiled rather than falling back to eager.
    """
    torch = _torch()
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.accumulated_recompile_limit = 4096
    return torch.compile(fn, dynamic=False)


def jax_layers():
    """JAX's dot_product_attention, cumulative sums and a scan with a float32 state."""
    import jax
    import jax.numpy as jnp

    def phi(x):
        return jnp.where(x > 0, x + 1.0, jnp.exp(jnp.minimum(x, 0.0)))

    @jax.jit
    def jax_sdpa(Q, K, V):  # (batch, n, heads, d)
        return jax.nn.dot_product_attention(Q, K, V, is_causal=True)

    @jax.jit
    def jax_cumsum(Q, K, V):
        acc = jnp.float32 if Q.dtype.itemsize < 4 else Q.dtype
        fq, fk, v = phi(Q).astype(acc), phi(K).astype(acc), V.astype(acc)
        S = jnp.cumsum(fk[..., :, None] * v[..., None, :], axis=-3)
        num = jnp.einsum("...nd,...nde->...ne", fq, S)
        return (num / (fq * jnp.cumsum(fk, -2)).sum(-1, keepdims=True)).astype(Q.dtype)

    @jax.jit
    def jax_scan(Q, K, V):
        acc = jnp.float32 if Q.dtype.itemsize < 4 else Q.dtype
        fq, fk = phi(Q), phi(K)
        init = (jnp.zeros((fk.shape[-1], V.shape[-1]), acc), jnp.zeros(fk.shape[-1], acc))

        def step(carry, x):
            S, z = carry
            q, k, v = (y.astype(acc) for y in x)
            S, z = S + jnp.outer(k, v), z + k
            return (S, z), ((q @ S) / (q @ z)).astype(Q.dtype)

        return jax.lax.scan(step, init, (fq, fk, V))[1]

    bnhd = {"layout": "bnhd", "batch_shape": (1, 1)}
    # dot_product_attention takes values of the key's size (d fixed at 8), and XLA's CPU
    # backend cannot run a one-token bfloat16 dot: the n=1 case is left out for it
    cases = tuple(c for c in CASES if c != "n=1")
    return [
        ("jax sdpa", jax_sdpa, {"causal": True, "d": 8, "cases": cases, **bnhd}),
        ("jax cumsum linear", jax_cumsum, {"causal": True, "feature_map": elu1_np}),
        ("jax scan linear", jax_scan, {"causal": True, "feature_map": elu1_np}),
    ]


def torch_layers(compile_too: bool = False):
    """The PyTorch layers of the zoo (``compile_too``: with their ``torch.compile`` versions)."""
    linear = {"causal": True, "feature_map": elu1_any}
    out = [
        ("sdpa", sdpa(), {"causal": True}),
        ("sdpa math", sdpa(math_backend=True), {"causal": True}),
        ("flash", flash(), {"causal": True}),
        ("chunked linear", chunked_linear, linear),
        ("cumsum linear", cumsum_linear, linear),
    ]
    if compile_too:
        out += [
            ("compiled sdpa", compiled(sdpa()), {"causal": True}),
            ("compiled chunked linear", compiled(chunked_linear), linear),
        ]
    return out


def tf32_layers():
    """The zoo's layers whose matrix products round their operands to TF32, to nearest."""
    import functools

    linear = {"causal": True, "feature_map": elu1_any}
    return [
        ("flash tf32", flash(tf32=True), {"causal": True}),
        ("chunked linear tf32", functools.partial(chunked_linear, tf32=True), linear),
    ]
