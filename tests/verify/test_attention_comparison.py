"""verify.attention against what users do today: torch.testing.assert_close and fla's ratio test.

For one set of correct and buggy PyTorch layers in float32 and bfloat16,
three checkers judge the layer's output on the same inputs:

* kernelcheck: ``verify.attention`` (its cases, worst-case and probabilistic
  error models);
* ``torch.testing.assert_close(out, reference)`` at its default tolerances
  for the layer's dtype, the float64 reference cast to that dtype;
* flash-linear-attention's rule (``fla/utils.py`` ``assert_close``): pass
  when the largest absolute error is at most 1e-6 or the RMS of the error
  over the RMS of the reference is at most ``ratio`` (0.005 here, the value
  its forward tests use for bfloat16).

A bug counts as caught by a checker only where that checker passes the
correct layer of the same configuration (failing everything is no power).
The test produces the table of ``docs/verify-comparison.md`` and requires
the page to hold it exactly, and requires kernelcheck to catch every bug
another checker catches, with no false alarm.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernelcheck import attention as att
from kernelcheck import verify

torch = pytest.importorskip("torch")
F = torch.nn.functional

PAGE = Path(__file__).resolve().parents[2] / "docs" / "verify-comparison.md"
N = 256


def elu1(x):
    return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))


def elu1_np(X):
    return np.where(X > 0, X + 1.0, np.exp(np.minimum(X, 0.0)))


def _sdpa(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True)


def _linear(Q, K, V, normalize=True):
    fq, fk = elu1(Q), elu1(K)
    S = torch.einsum("...nd,...ne->...nde", fk, V).cumsum(dim=-3)
    num = torch.einsum("...nd,...nde->...ne", fq, S)
    return num / (fq * fk.cumsum(dim=-2)).sum(-1, keepdim=True) if normalize else num


def _relative(fn, rel):
    def bug(Q, K, V):
        out = fn(Q, K, V)
        s = torch.ones(out.shape[-2], 1, dtype=out.dtype)
        s[out.shape[-2] // 2 :] = 1 + rel
        return out * s

    return bug


def _shifted(Q, K, V):
    mask = torch.ones(Q.shape[-2], Q.shape[-2], dtype=torch.bool).tril(1)
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


def _scale_d(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True, scale=1.0 / Q.shape[-1])


def _drop_last_key(Q, K, V):  # the last row never sees the last key (n >= 2)
    mask = torch.ones(Q.shape[-2], Q.shape[-2], dtype=torch.bool).tril()
    mask[:, -1] = False
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


# (name, layer, reference family, correct layer's name)
LAYERS = [
    ("softmax (SDPA, causal)", _sdpa, "softmax", None),
    ("linear (cumulative sums)", _linear, "linear", None),
    ("mask shifted by one", _shifted, "softmax", "softmax (SDPA, causal)"),
    ("scale 1/d", _scale_d, "softmax", "softmax (SDPA, causal)"),
    ("last key dropped", _drop_last_key, "softmax", "softmax (SDPA, causal)"),
    ("missing normaliser", lambda Q, K, V: _linear(Q, K, V, False), "linear",
     "linear (cumulative sums)"),
    ("relative 1e-4 from n/2", _relative(_sdpa, 1e-4), "softmax", "softmax (SDPA, causal)"),
    ("relative 3e-2 from n/2", _relative(_sdpa, 3e-2), "softmax", "softmax (SDPA, causal)"),
    ("relative 1e-4 from n/2 (linear)", _relative(_linear, 1e-4), "linear",
     "linear (cumulative sums)"),
    ("relative 3e-2 from n/2 (linear)", _relative(_linear, 3e-2), "linear",
     "linear (cumulative sums)"),
]  # fmt: skip
DTYPES = ("float32", "bfloat16")


def _inputs(dtype):
    """The positive-values inputs (the verifier's most powerful case), rounded to ``dtype``."""
    rng = np.random.default_rng(7)
    Q, K = 0.5 / np.sqrt(8) * rng.standard_normal((2, N, 8))
    V = 0.5 + rng.random((N, 8))
    t = getattr(torch, dtype)
    Qt, Kt, Vt = (torch.tensor(X).to(t) for X in (Q, K, V))
    return Qt, Kt, Vt


def _reference(family, Q, K, V):
    Q64, K64, V64 = (x.double().numpy() for x in (Q, K, V))
    if family == "softmax":
        return att.softmax(Q64, K64, V64, causal=True)
    return att.parallel(elu1_np(Q64), elu1_np(K64), V64, causal=True)


def _torch_close(out, ref) -> bool:
    try:
        torch.testing.assert_close(out, torch.tensor(ref).to(out.dtype))
    except AssertionError:
        return False
    return True


def _fla_ratio(out, ref, ratio=0.005) -> bool:
    diff = out.double().numpy() - ref
    if np.abs(diff).max() <= 1e-6:
        return True
    return float(np.sqrt((diff**2).mean()) / np.sqrt((ref**2).mean())) <= ratio


def _kernelcheck(fn, family, dtype, model) -> bool:
    kw = {"feature_map": elu1_np} if family == "linear" else {}
    report = verify.attention(
        fn, framework="torch", dtype=dtype, causal=True, n=N, d=8,
        cases=("random", "positive values"), check_causality=False, error_model=model, **kw,
    )  # fmt: skip
    return report.passed


def _verdicts():
    rows = {}
    for name, fn, family, _ in LAYERS:
        for dtype in DTYPES:
            Q, K, V = _inputs(dtype)
            with torch.no_grad():
                out = fn(Q, K, V)
            ref = _reference(family, Q, K, V)
            rows[name, dtype] = {
                "kernelcheck": _kernelcheck(fn, family, dtype, "worst-case"),
                "kernelcheck, probabilistic": _kernelcheck(fn, family, dtype, "probabilistic"),
                "torch assert_close": _torch_close(out, ref),
                "fla ratio 0.005": _fla_ratio(out, ref),
            }
    return rows


CHECKERS = ("kernelcheck", "kernelcheck, probabilistic", "torch assert_close", "fla ratio 0.005")


def _table(rows) -> str:
    head = "| layer | dtype | " + " | ".join(CHECKERS) + " |"
    lines = [head, "|" + "---|" * (2 + len(CHECKERS))]
    for name, _, _, correct in LAYERS:
        for dtype in DTYPES:
            cells = []
            for c in CHECKERS:
                ok = rows[name, dtype][c]
                if correct is None:
                    cells.append("pass" if ok else "false alarm")
                else:
                    base = rows[correct, dtype][c]
                    cells.append("caught" if not ok and base else ("missed" if ok else "n/a"))
            lines.append(f"| {name} | {dtype} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def verdicts():
    return _verdicts()


def test_kernelcheck_catches_every_bug_the_others_catch_with_no_false_alarm(verdicts):
    for name, _, _, correct in LAYERS:
        for dtype in DTYPES:
            if correct is None:
                assert verdicts[name, dtype]["kernelcheck"], (name, dtype)
                assert verdicts[name, dtype]["kernelcheck, probabilistic"], (name, dtype)
                continue
            for other in ("torch assert_close", "fla ratio 0.005"):
                caught = verdicts[correct, dtype][other] and not verdicts[name, dtype][other]
                if caught:
                    assert not verdicts[name, dtype]["kernelcheck, probabilistic"], (
                        name, dtype, other
                    )  # fmt: skip


def test_the_docs_table_is_this_tests_output(verdicts):
    table = _table(verdicts)
    assert table in PAGE.read_text(encoding="utf-8"), "\n" + table
