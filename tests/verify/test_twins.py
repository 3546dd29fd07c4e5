"""One result protocol for every verifier, and the ``assert_*`` twins built on it.

Over one catalogue of (verifier, passing call, refuted call): ``bool(result)``
is ``result.passed`` and ``passed`` is true exactly when the outcome is
``verified``; ``str`` starts with the outcome word; ``repr`` is short;
``to_dict()`` starts with the outcome.  Each twin returns a verified result,
raises ``AssertionError`` whose first line is ``"refuted: "`` and the first
failing place, raises :class:`~kernelcheck.errors.Inconclusive` (not an
``AssertionError``) for an inconclusive result, and hides its own frames
from pytest's traceback.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import check_psd, testing, verify
from kernelcheck._src.core.results import REPR_WIDTH, Result
from kernelcheck.attention import softmax
from kernelcheck.errors import Inconclusive
from kernelcheck.features import PositiveRandomFeatures
from kernelcheck.kernels import Exponential, Linear

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kernelcheck"

X = np.random.default_rng(0).normal(size=(5, 3))
#: 4 points of norm about 1 in R^8: a correct Performer sampler leaves pairs
#: untestable at 5,000 trials (the estimate is too skewed for a normal law).
X_PERFORMER = np.random.default_rng(0).normal(size=(4, 8)) / np.sqrt(8) * 2
#: A small ratio-bias problem (claim C16) that a few thousand trials decide.
QKV = tuple(s * np.random.default_rng(i).normal(size=sh) for i, (s, sh) in
            enumerate([(0.3, (3, 2)), (0.3, (4, 2)), (1.0, (4, 2))]))  # fmt: skip


def _scaled_sampler(factor):
    def sample(rng):
        phi = PositiveRandomFeatures.sampler(2, 16)(rng)
        return lambda A: math.sqrt(factor) * phi(A)

    return sample


def _not_a_kernel(x, y):
    return -float(np.dot(x, y))


def _positive_layer(scale=1.0):
    """Random-feature attention of ``exp(scale q . k)`` (scale 0.5 is another kernel's)."""

    def layer(Q, K, V, m, rng):
        W = rng.standard_normal((m, Q.shape[1])) * np.sqrt(scale)
        fq = np.exp(Q @ W.T - scale * (Q * Q).sum(1, keepdims=True) / 2)
        fk = np.exp(K @ W.T - scale * (K * K).sum(1, keepdims=True) / 2)
        return (fq @ (fk.T @ V)) / (fq @ fk.sum(0))[:, None]

    return layer


_XU = np.array([[0.2, 0.1], [-0.1, 0.3]])


def _rfa_inputs():
    rng = np.random.default_rng(0)
    Q, K = 0.4 * rng.normal(size=(3, 2)), 0.4 * rng.normal(size=(5, 2))
    return Q, K, rng.normal(size=(5, 2))


#: name: (verifier call passing, verifier call refuted, twin on the refuted input,
#: a word of the first failing place)
CATALOGUE = {
    "check_psd": (
        lambda: check_psd(np.eye(3)),
        lambda: check_psd([[1.0, 2.0], [2.0, 1.0]]),
        lambda: testing.assert_psd([[1.0, 2.0], [2.0, 1.0]]),
        "witness v on indices [0, 1]",
    ),
    "verify.kernel": (
        lambda: verify.kernel(Linear(), X),
        lambda: verify.kernel(_not_a_kernel, X),
        lambda: testing.assert_kernel(_not_a_kernel, X),
        "the witness v has v^T G v / v^T v",
    ),
    "verify.feature_map": (
        lambda: verify.feature_map(Linear().features(), X),
        lambda: verify.feature_map(lambda Z: 2 * Z, X, kernel=Linear()),
        lambda: testing.assert_feature_map(lambda Z: 2 * Z, X, kernel=Linear()),
        "phi(X)[",
    ),
    "verify.unbiased": (
        lambda: verify.unbiased(
            PositiveRandomFeatures.sampler(2, 16), Exponential(), _XU, trials=3000, seed=0
        ),  # fmt: skip
        lambda: verify.unbiased(_scaled_sampler(1.03), Exponential(), _XU, trials=3000, seed=0),
        lambda: testing.assert_unbiased(
            _scaled_sampler(1.03), Exponential(), _XU, trials=3000, seed=0
        ),
        "the estimate is biased at pair (",
    ),
    "verify.attention": (
        lambda: verify.attention(lambda Q, K, V: softmax(Q, K, V), n=6, d=3),
        lambda: verify.attention(lambda Q, K, V: 2 * softmax(Q, K, V), n=6, d=3),
        lambda: testing.assert_attention_matches(lambda Q, K, V: 2 * softmax(Q, K, V), n=6, d=3),
        "case 'random' (Q of shape (6, 3)) at output index (",
    ),
    "verify.random_feature_attention": (
        lambda: verify.random_feature_attention(
            _positive_layer(), *_rfa_inputs(), trials=400, seed=2
        ),  # fmt: skip
        lambda: verify.random_feature_attention(
            _positive_layer(0.5), *_rfa_inputs(), trials=400, seed=1
        ),
        lambda: testing.assert_random_feature_attention(
            _positive_layer(0.5), *_rfa_inputs(), trials=400, seed=1
        ),
        "is biased at m -> inf",
    ),
}


def _ratio_bias():
    return verify.ratio_bias(
        PositiveRandomFeatures.sampler(2, 8), *QKV, trials=2000, seed=0, num_features=(8, 16, 32)
    )


def _results():
    out = []
    for name, (good, bad, _twin, _place) in CATALOGUE.items():
        out += [(f"{name} passing", good), (f"{name} refuted", bad)]
    out.append(("ratio_bias", _ratio_bias))
    out.append(("ratio_bias refuted", lambda: dataclasses.replace(_ratio_bias(), passed=False)))
    out.append(
        (
            "verify.unbiased inconclusive",
            lambda: verify.unbiased(
                PositiveRandomFeatures.sampler(8, 16),
                Exponential(),
                X_PERFORMER,
                trials=5000,
                seed=0,
            ),  # fmt: skip
        )
    )
    return out


RESULTS = _results()


@pytest.fixture(scope="module", params=RESULTS, ids=[name for name, _ in RESULTS])
def result(request):
    name, make = request.param
    return name, make()


def test_bool_is_passed_and_passed_means_verified(result):
    name, r = result
    assert isinstance(r, Result), f"{name}: {type(r).__name__} is not a Result"
    assert bool(r) is bool(r.passed), f"{name}: bool {bool(r)} but passed {r.passed}"
    assert bool(r.passed) == (str(r.outcome) == "verified"), (name, r.passed, r.outcome)
    expected = "refuted" if "refuted" in name else "inconclusive" if "inconc" in name else None
    if expected is not None:
        assert str(r.outcome) == expected and not r, name


def test_str_starts_with_the_outcome_word(result):
    name, r = result
    text = str(r)
    assert text.startswith(f"{r.outcome}: "), f"{name}: {text[:80]!r}"
    assert "\n" not in text
    for word in ("PASS", "FAIL", "Verdict"):
        assert word not in text, f"{name}: {word!r} in {text[:120]!r}"


def test_repr_is_short_and_names_the_class_and_outcome(result):
    name, r = result
    text = repr(r)
    assert len(text) <= REPR_WIDTH, f"{name}: repr of {len(text)} characters"
    assert text.startswith(f"<{type(r).__name__} {r.outcome}: ")


def test_to_dict_leads_with_the_outcome(result):
    _, r = result
    d = r.to_dict()
    assert next(iter(d)) == "outcome" and d["outcome"] == str(r.outcome)
    json.loads(json.dumps(d, allow_nan=False))


def test_unbiased_report_file_says_the_outcome_word():
    r = dict(RESULTS)["verify.unbiased refuted"]()
    md = r.to_markdown()
    assert "**Outcome: refuted**" in md and "Verdict" not in md


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_twin_returns_a_verified_result(name):
    good = CATALOGUE[name][0]()
    assert good.passed, str(good)


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_refuted_twin_message_leads_with_the_verdict_and_first_failing_place(name):
    _, _, twin, place = CATALOGUE[name]
    with pytest.raises(AssertionError) as info:
        twin()
    first = str(info.value).splitlines()[0]
    assert first.startswith("refuted: "), first
    assert place in first, f"{name}: {place!r} not in the first line {first!r}"


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_twin_hides_its_own_frames(name):
    """Each frame of kernelcheck's code between the test and the raise sets __tracebackhide__."""
    twin = CATALOGUE[name][2]
    with pytest.raises(AssertionError) as info:
        twin()
    tb = info.value.__traceback__
    shown = []
    while tb is not None:
        frame = tb.tb_frame
        if Path(frame.f_code.co_filename).resolve().is_relative_to(PACKAGE):
            if not frame.f_locals.get("__tracebackhide__"):
                shown.append(f"{frame.f_code.co_name} ({frame.f_code.co_filename})")
        tb = tb.tb_next
    assert not shown, f"{name}: frames shown in pytest's traceback: {shown}"


def test_a_correct_performer_sampler_at_5000_trials_is_inconclusive_not_an_assertion():
    sampler = PositiveRandomFeatures.sampler(8, 16)
    with pytest.raises(Inconclusive) as info:
        testing.assert_unbiased(sampler, Exponential(), X_PERFORMER, trials=5000, seed=0)
    assert not isinstance(info.value, AssertionError)
    message = str(info.value)
    assert message.startswith("inconclusive: ") and "what to do: " in message
    assert info.value.advice and info.value.advice in message
    assert str(info.value.result.outcome) == "inconclusive"
    r = testing.assert_unbiased(
        sampler, Exponential(), X_PERFORMER, trials=5000, seed=0, allow_inconclusive=True
    )
    assert str(r.outcome) == "inconclusive" and not r


def test_pytest_shows_the_verdict_not_kernelcheck_source(tmp_path):
    """Two failing twins in a real pytest run: the failures show the test's line and the
    message, never the twin's body."""
    test = tmp_path / "test_user.py"
    test.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from kernelcheck.testing import assert_psd, assert_feature_map
            from kernelcheck.kernels import Linear

            def test_psd():
                assert_psd([[1.0, 2.0], [2.0, 1.0]])

            def test_map():
                assert_feature_map(lambda Z: 2 * Z, np.eye(3), kernel=Linear())
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 1 and "2 failed" in out, out[-2000:]
    assert re.search(r"(?m)^E +AssertionError: refuted: K \(2 x 2\) is not PSD", out), out
    assert re.search(r"(?m)^E +AssertionError: refuted: phi\(X\)\[", out), out
    assert "allow_inconclusive" not in out and "assert_result(" not in out, out
