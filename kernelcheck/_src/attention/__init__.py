"""Attention in every form: exact, kernelized, parallel, recurrent, chunked.

Claims C1, C2, C3, C10, C11, C12, C14, C15.  With rows ``q_i, k_j, v_j`` of
``Q, K`` (shape (..., n, d)) and ``V`` (shape (..., n, d_v)), every form
computes

    a_i = sum_{j in J(i)} kappa(q_i, k_j) v_j / sum_{j in J(i)} kappa(q_i, k_j),

with ``J(i) = {1..n}`` (bidirectional) or ``{1..i}`` (causal):

* :func:`softmax` -- ``kappa(q, k) = exp(scale q . k)``, computed stably (C1);
* :func:`kernelized` -- any kernel object, quadratically from its Gram block (C10);
* :func:`parallel` -- ``kappa(q, k) = phi(q) . phi(k)`` from feature matrices:
  ``phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1)``; causal by prefix sums (C10);
* :func:`init` / :func:`step` / :func:`recurrent` -- the same as a recurrence
  over the state ``(S, z)`` whose size does not depend on n (C11, C14);
* :func:`chunked` -- causal: quadratic within a chunk, the recurrent state
  across chunks (C14); the fast causal form.

Leading (batch, head) dimensions are allowed and must agree between the three
inputs.  Every form takes ``Q, K, V`` (or ``phi_q, phi_k, V``) of one length n.

Normalisers.  ``phi(q_i) . z_i`` can be zero or negative for feature maps that
are not positive (odd Taylor orders, trigonometric random features; C12).  No
``eps`` is ever added: by default :class:`~kernelcheck.errors.BadNormalizer`
is raised; with ``on_bad_normalizer="report"`` the forms return an
:class:`AttentionOutput` holding the raw quotient, the normalisers and the
positions of the bad ones.

Error models (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3;
``u`` the unit roundoff, ``gamma_k = k u / (1 - k u)``), each an a-priori
entrywise bound on ``|computed - exact|`` for inputs taken as exact:

* :func:`linear_error_bound` -- the parallel, recurrent and chunked forms;
* :func:`softmax_error_bound` -- :func:`softmax`;
* :func:`kernelized_error_bound` -- :func:`kernelized`.

:func:`cost_model` states each form's operation count and state size.
"""
