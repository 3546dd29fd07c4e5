"""Bad input to kernelcheck.claims is refused by name, before any claim runs.

``get_claim``, ``Claim.check``, ``run_claims``, ``run_essay``, ``exit_code_for``
and ``write_report``: each row raises ``InvalidArgument`` whose message opens
with the argument in backticks (:func:`tests.inputs.assert_refused`); only a
raising ``on_result`` is called, after the quickest claim (C7 at the quick
level).  Claim ids are accepted in any case and with spaces, and printed
canonically.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kernelcheck import claims as C
from kernelcheck.errors import InvalidArgument
from tests.inputs import assert_refused

IA = InvalidArgument  # the error most rows expect
HERE = Path(__file__).resolve()


def _boom(*args):
    raise ZeroDivisionError("boom")


def _runner_cases(name, run):
    """Rows shared by ``run_claims`` and ``run_essay``.

    All are refused before any check runs, except the raising ``on_result``,
    which is called after the quickest claim (C7 at the quick level).
    """
    return [
        (f"{name}-level", lambda: run(["C7"], "x"), IA, r"^`level` must be one of 'quick'"),
        (
            f"{name}-str",
            lambda: run("C7", "quick"),
            IA,
            r"^`claim_ids` must be a list of claim ids such as \['C1', 'C5'\], got str 'C7'",
        ),
        (f"{name}-int", lambda: run(5, "quick"), IA, r"^`claim_ids` must be a list of claim"),
        (f"{name}-empty", lambda: run([], "quick"), IA, r"^`claim_ids` must name at least one"),
        (f"{name}-item", lambda: run([5], "quick"), IA, r"^`claim_ids\[0\]` must be a string"),
        (
            f"{name}-unknown",
            lambda: run(["C7", "C99"], "quick"),
            IA,
            r"^`claim_ids\[1\]` must be one of C1, .*; got 'C99'",
        ),
        (
            f"{name}-on-result",
            lambda: run(["C7"], "quick", on_result=5),
            IA,
            r"^`on_result` must be callable, got int 5",
        ),
        (
            f"{name}-on-result-raises",
            lambda: run(["C7"], "quick", on_result=_boom),
            IA,
            r"^`on_result` raised ZeroDivisionError: boom",
        ),
        (
            f"{name}-executor",
            lambda: run(["C7"], "quick", executor=object()),
            IA,
            r"^`executor` must be a concurrent\.futures\.Executor",
        ),
    ]


EMPTY_REPORT = C.EssayReport(results=(), level="quick", duration=0.0)

CLAIMS_BAD = [
    ("gc-int", lambda: C.get_claim(5), IA, r"^`claim_id` must be a string like 'C5'"),
    ("gc-none", lambda: C.get_claim(None), IA, r"^`claim_id` must be a string like"),
    ("gc-unknown", lambda: C.get_claim("C99"), IA, r"^`claim_id` must be one of C1, "),
    ("gc-empty", lambda: C.get_claim(""), IA, r"^`claim_id` must be one of C1, C2"),
    ("gc-level", lambda: C.get_claim("C7").check("x"), IA, r"^`level` must be one of"),
]

ESSAY_BAD = [
    (
        "re-item-with-stream",
        lambda: C.run_essay([5], "quick", stream=io.StringIO()),
        IA,
        r"^`claim_ids\[0\]` must be a string like 'C5', got 5",
    ),
    (
        "re-stream",
        lambda: C.run_essay(["C7"], "quick", stream=object()),
        IA,
        r"^`stream` must be a text stream \(with write\), got object",
    ),
    (
        "ec-str",
        lambda: C.exit_code_for("verified"),
        IA,
        r"^`verdicts` must be a list of outcomes \(verified, refuted, inconclusive\), "
        r"got str 'verified'",
    ),
    ("ec-int", lambda: C.exit_code_for(5), IA, r"^`verdicts` must be a list of outcomes"),
    (
        "ec-unknown",
        lambda: C.exit_code_for(["verified", "bogus"]),
        IA,
        r"^`verdicts\[1\]` must be an Outcome or one of 'verified', 'refuted', "
        r"'inconclusive'; got 'bogus'",
    ),
    ("ec-none", lambda: C.exit_code_for([None]), IA, r"^`verdicts\[0\]` must be an Outcome"),
    ("ec-case", lambda: C.exit_code_for(["VERIFIED"]), IA, r"^`verdicts\[0\]` must"),
    ("wr-report", lambda: C.write_report(5, "never"), IA, r"^`report` must be an Essa"),
    (
        "wr-out-type",
        lambda: C.write_report(EMPTY_REPORT, 5),
        IA,
        r"^`out_dir` must be a folder path, got int 5",
    ),
    (
        "wr-out-file",
        lambda: C.write_report(EMPTY_REPORT, HERE),
        IA,
        r"^`out_dir` must be a folder, but .* is a file",
    ),
]


def test_run_essay_with_a_stream_prints_canonical_ids():
    """Lower-case ids with spaces are accepted and printed canonically (checked up front)."""
    out = io.StringIO()
    report = C.run_essay([" c7 "], "quick", stream=out)
    assert [r.claim for r in report.results] == ["C7"]
    assert "C7" in out.getvalue() and " c7 " not in out.getvalue()


CLAIMS_BAD += _runner_cases("rc", C.run_claims) + _runner_cases("re", C.run_essay) + ESSAY_BAD


@pytest.mark.parametrize(
    "call, error, message", [c[1:] for c in CLAIMS_BAD], ids=[c[0] for c in CLAIMS_BAD]
)
def test_bad_input_table(call, error, message):
    """Each row raises the expected clean error, its message read from the start."""
    assert_refused(call, error, message)
