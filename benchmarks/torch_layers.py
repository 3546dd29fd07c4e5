"""Reference layers shared by the verifier benchmark and the false-alarm sweep.

``elu1`` is the feature map elu(x) + 1 of linear-transformer layers (torch and NumPy
versions); ``chunked_state`` is a chunked causal linear-attention layer in torch that
takes and returns its recurrent state ``(S, z)``, the shape of layer users hand over
between calls.
"""

from __future__ import annotations

import numpy as np
import torch


def elu1(x):
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def elu1_np(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def chunked_state(Q, K, V, initial_state=None, chunk=64):
    fq, fk = elu1(Q), elu1(K)
    if initial_state is None:
        S = Q.new_zeros(Q.shape[:-2] + (fk.shape[-1], V.shape[-1]))
        z = Q.new_zeros(Q.shape[:-2] + (fk.shape[-1],))
    else:
        S, z = initial_state
    outs = []
    for c0 in range(0, Q.shape[-2], chunk):
        q, k, v = (
            fq[..., c0 : c0 + chunk, :],
            fk[..., c0 : c0 + chunk, :],
            V[..., c0 : c0 + chunk, :],
        )
        A = (q @ k.transpose(-1, -2)).tril()
        outs.append((A @ v + q @ S) / (A.sum(-1, keepdim=True) + q @ z[..., :, None]))
        S, z = S + k.transpose(-1, -2) @ v, z + k.sum(-2)
    return torch.cat(outs, -2), (S, z)
