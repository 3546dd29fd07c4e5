"""verify.attention's options against bad values: one table, each refused by name before any case.

Each row is a call of :func:`kernelcheck.verify.attention` (or its pytest twin)
with one bad option; the contract is an :class:`InvalidArgument` whose message
opens with the option's name (for a size: the memory it would need), raised
before any case is run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernelcheck import attention, testing, verify
from kernelcheck.errors import InvalidArgument

RNG = np.random.default_rng(17)
Q, K, V = RNG.normal(size=(3, 4, 2))


def _softmax(q, k, v):
    return attention.softmax(q, k, v)


def _gated(q, k, v):
    return attention.gated_parallel(np.exp(q), np.exp(k), v, 0.9)


def _att(**options):
    return lambda: verify.attention(_softmax, **options)


def _gated_att(decay):
    return lambda: verify.attention(
        _gated, feature_map=np.exp, decay=decay, causal=True, normalize=False
    )


#: id -> (call, regex the message opens with)
OPTIONS_BAD = {
    "grad-string": (_att(grad="yes"), r"^`grad` must be True or False, got str 'yes'"),
    "grad-int": (_att(grad=1), r"^`grad` must be True or False"),
    "state-string": (_att(state="yes"), r"^`state` must be True or False"),
    "check_causality-int": (_att(check_causality=0), r"^`check_causality` must be True or False"),
    "log_gates-string": (_att(log_gates="no"), r"^`log_gates` must be True or False"),
    "normalize-int": (_att(normalize=1), r"^`normalize` must be True or False"),
    "framework-unknown": (_att(framework="tensorflow"), r"^`framework` must be one of 'numpy'"),
    "framework-none": (_att(framework=None), r"^`framework` must be one of"),
    "layout-unknown": (_att(layout="nd"), r"^`layout` must be one of '\.\.\.nd', 'bnhd'"),
    "error_model-unknown": (_att(error_model="best"), r"^`error_model` must be one of"),
    "failure_probability-zero": (
        _att(failure_probability=0),
        r"^`failure_probability` must lie strictly between 0 and 1",
    ),
    "failure_probability-nan": (
        _att(failure_probability=math.nan),
        r"^`failure_probability` must be finite",
    ),
    "failure_probability-string": (
        _att(failure_probability="1e-9"),
        r"^`failure_probability` must be a real number",
    ),
    "stabilizer-negative": (_att(stabilizer=-1.0), r"^`stabilizer` must be >= 0"),
    "stabilizer-nan": (_att(stabilizer=math.nan), r"^`stabilizer` must be finite"),
    "stabilizer-inf": (_att(stabilizer=math.inf), r"^`stabilizer` must be finite"),
    "stabilizer-softmax": (_att(stabilizer=0.0), r"^`stabilizer` is an eps added"),
    "decay-without-feature_map": (_att(decay=0.9), r"^`decay` needs `feature_map`"),
    "decay-nan": (_gated_att(math.nan), r"^`decay` must be finite"),
    "decay-inf": (_gated_att(math.inf), r"^`decay` must be finite"),
    "decay-above-one": (_gated_att(2.0), r"^`decay` must lie in \(0, 1\]"),
    "decay-zero": (_gated_att(0.0), r"^`decay` must lie in \(0, 1\]"),
    "decay-negative": (_gated_att(-0.5), r"^`decay` must lie in \(0, 1\]"),
    "decay-string": (_gated_att("x"), r"^`decay` must be a numeric array"),
    "read_state-int": (_att(read_state=3), r"^`read_state` must be callable"),
    "vjp-string": (_att(vjp="x"), r"^`vjp` must be callable"),
    "fn_kwargs-list": (_att(fn_kwargs=[1]), r"^`fn_kwargs` must be a dict of keyword arguments"),
    "fn_kwargs-string": (_att(fn_kwargs="x"), r"^`fn_kwargs` must be a dict"),
    "cases-unknown": (_att(cases=["nope"]), r"^`cases` must be one of 'random'"),
    "cases-empty": (_att(cases=[]), r"^`cases` must name at least one of"),
    "cases-string": (_att(cases="x"), r"^`cases` must be one of"),
    "device-numpy": (_att(device=3), r"^`device` 3 does not apply to NumPy arrays"),
    "inputs-int": (_att(inputs=3), r"^`inputs` must be a tuple \(Q, K, V\) of three arrays"),
    "inputs-two": (_att(inputs=(Q, K)), r"^`inputs` must be a tuple \(Q, K, V\)"),
    "inputs-V-rows": (_att(inputs=(Q, K, V[:2])), r"^`inputs` V must have the leading shape"),
    "inputs-nan": (_att(inputs=(Q, K, V * np.nan)), r"^`inputs\[2\] \(V\)` must be finite"),
    "inputs-complex": (_att(inputs=(Q + 0j, K, V)), r"^`inputs\[0\] \(Q\)` must be real"),
    "assert_attention_matches-grad": (
        lambda: testing.assert_attention_matches(_softmax, grad="yes"),
        r"^`grad` must be True or False",
    ),
}

OPTIONS_BAD.update(
    {
        "accumulate-unknown": (_att(accumulate="float8"), r"^`accumulate`"),
        "fn_kwargs-non-string-keys": (_att(fn_kwargs={1: 2}), r"^`fn_kwargs` must be a dict"),
        "cases-int": (_att(cases=3), r"^`cases` must be a case name or a list"),
        "decay-wrong-shape": (_gated_att(np.ones(7)), r"^`decay` as an array is one decay"),
        "decay-bool": (_gated_att(True), r"^`decay` must be a number in \(0, 1\]"),
        # sizes: refused before any case is drawn, with the memory they would need
        "n-huge": (
            _att(n=2**40),
            r"^the cases of verify.attention \(n = 1099511627776.* would need",
        ),
        "batch_shape-huge": (
            _att(batch_shape=(10**6, 10**6)),
            r"^the cases of verify.attention .*batch_shape = \(1000000, 1000000\).* would need",
        ),
    }
)


@pytest.mark.parametrize("name", sorted(OPTIONS_BAD))
def test_each_bad_option_of_verify_attention_is_refused_by_name(name):
    call, message = OPTIONS_BAD[name]
    with pytest.raises(InvalidArgument, match=message):
        call()
