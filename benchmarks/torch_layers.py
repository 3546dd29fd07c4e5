"""Reference layers shared by the verifier benchmark and the false-alarm sweep.

``elu1`` is the feature map elu(x) + 1 of linear-transformer layers (torch and NumPy
versions); ``chunked_state`` is a chunked causal linear-attention layer in torch that
takes and returns its recurrent state ``(S, z)``, the shape of layer users hand over
between calls.  A 16-bit layer keeps its running state in float32, as
flash-linear-attention's chunk kernels do (``state_dtype=None``); with
``state_dtype=torch.bfloat16`` the state is rounded to bfloat16 after every chunk,
an accumulation in bfloat16 that the verifier's default model (accumulation in
float32) does not cover.
"""

from __future__ import annotations

import numpy as np
import torch


def elu1(x):
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def elu1_np(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def chunked_state(Q, K, V, initial_state=None, chunk=64, state_dtype=None):
    fq, fk = elu1(Q), elu1(K)
    if state_dtype is None:
        state_dtype = torch.float32 if Q.element_size() < 4 else Q.dtype
    if initial_state is None:
        S = Q.new_zeros(Q.shape[:-2] + (fk.shape[-1], V.shape[-1]), dtype=state_dtype)
        z = Q.new_zeros(Q.shape[:-2] + (fk.shape[-1],), dtype=state_dtype)
    else:
        S, z = (x.to(state_dtype) for x in initial_state)
    outs = []
    for c0 in range(0, Q.shape[-2], chunk):
        q, k, v = (
            fq[..., c0 : c0 + chunk, :],
            fk[..., c0 : c0 + chunk, :],
            V[..., c0 : c0 + chunk, :],
        )
        A = (q @ k.transpose(-1, -2)).tril()
        qs = q.to(state_dtype)
        num = A.to(state_dtype) @ v.to(state_dtype) + qs @ S
        den = A.to(state_dtype).sum(-1, keepdim=True) + qs @ z[..., :, None]
        outs.append((num / den).to(Q.dtype))
        ks = k.to(state_dtype)
        S, z = S + ks.transpose(-1, -2) @ v.to(state_dtype), z + ks.sum(-2)
    return torch.cat(outs, -2), (S, z)
