"""What the commands print: one outcome vocabulary, one JSON envelope, notes on plots.

Each command runs in-process through :func:`kernelcheck.cli.main` on small
inputs.  The checks: the verdict line starts with the outcome word
(``verified``, ``refuted``, ``inconclusive``) whose exit code the command
returns (the mapping of ``core/outcome.py``); no output carries another
vocabulary (PASSED, FAILED, POSITIVE_DEFINITE, ...); ``--json`` prints one
envelope (schema, command, outcome, exit code, result) that says what the
text says; without matplotlib every ``--out`` says that the plots were
skipped and how to install them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.cli.output import SCHEMA_VERSION, verdict_line
from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.core.report import PLOTS_SKIPPED
from tests.cli.commandline import OUTCOME_OF_CODE

#: Words of the vocabularies the command line used before it had one.
OTHER_WORDS = re.compile(
    r"\b(?:PASSED|FAILED|PASS|FAIL|NOT_PSD|POSITIVE_DEFINITE|POSITIVE_SEMIDEFINITE|"
    r"INCONCLUSIVE|NO_COUNTEREXAMPLE|VIOLATION)\b"
)


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    d = tmp_path_factory.mktemp("language")
    np.save(d / "pd.npy", np.array([[2.0, 1.0], [1.0, 2.0]]))
    np.save(d / "notpsd.npy", np.array([[1.0, 2.0], [2.0, 1.0]]))
    return d


def _commands(d):
    return {
        "psd_verified": (["psd", str(d / "pd.npy")], 0),
        "psd_refuted": (["psd", str(d / "notpsd.npy")], 1),
        "kernel_verified": (["kernel", "exp(linear, order=2)", "--dim", "2", "--budget", "2"], 0),
        "kernel_refuted": (["kernel", "linear - 0.5*poly(2)", "--dim", "2", "--budget", "2"], 1),
        # 300 trials leave pairs untestable: inconclusive, never "FAILED"
        "unbiased_inconclusive": (
            ["unbiased", "--trials", "300", "--dim", "2", "--num-features", "4"],
            3,
        ),
        "unbiased": (["unbiased", "--trials", "4000", "--dim", "2"], None),
        "scaling": (["scaling", "--sizes", "16,32,64", "--repeats", "1"], None),
    }


CASES = list(_commands(Path(".")))


def _verdict_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.split(":")[0] in OUTCOME_OF_CODE.values()]


@pytest.mark.parametrize("name", CASES)
def test_every_verdict_line_starts_with_the_outcome_of_its_exit_code(name, matrices, capsys):
    argv, expected = _commands(matrices)[name]
    code = cli.main(argv)
    out = capsys.readouterr().out
    if expected is not None:
        assert code == expected, out
    assert code in OUTCOME_OF_CODE, out
    verdicts = _verdict_lines(out)
    assert verdicts, out
    # the last verdict line is the command's own; its word is the exit code's
    assert verdicts[-1].startswith(f"{OUTCOME_OF_CODE[code]}: "), out
    for line in verdicts:  # one word per line, not two vocabularies
        assert not OTHER_WORDS.search(line), line
    assert not OTHER_WORDS.search(out), out


def test_essay_speaks_the_outcome_words(capsys):
    code = cli.main(["essay", "--quick", "--claims", "C1,C7"])
    out = capsys.readouterr().out
    assert code == 0
    rows = [line.split() for line in out.splitlines() if re.match(r"^C\d+\s", line)]
    assert [r[0] for r in rows] == ["C1", "C7"]
    for row in rows:
        assert set(row) & set(OUTCOME_OF_CODE.values()) == {"verified"}, row
    assert not OTHER_WORDS.search(out), out


@pytest.mark.parametrize(
    ("text", "outcome", "line"),
    [
        ("FAILED: too few trials", "inconclusive", "inconclusive: too few trials"),
        ("PASSED -- 16 pairs", "verified", "verified: 16 pairs"),
        ("unbiased: FAIL 3 pairs", "refuted", "refuted: 3 pairs"),
        ("scaling verified: p=1.0", "verified", "verified: p=1.0"),
        ("16 pairs tested", "inconclusive", "inconclusive: 16 pairs tested"),
    ],
)
def test_verdict_line_drops_a_verdict_word_of_the_result(text, outcome, line):
    class Result:
        def __str__(self):
            return text

    Result.outcome = Outcome(outcome)
    assert verdict_line(Result()) == line


def test_json_carries_the_outcome_of_the_exit_code(matrices, capsys):
    for argv in (
        ["psd", str(matrices / "notpsd.npy")],
        ["kernel", "linear", "--dim", "2", "--budget", "2"],
        ["unbiased", "--trials", "300", "--dim", "2", "--num-features", "4"],
        ["essay", "--quick", "--claims", "C7"],
    ):
        code = cli.main([*argv, "--json"])
        report = json.loads(capsys.readouterr().out)
        assert report["outcome"] == OUTCOME_OF_CODE[code], argv
    code = cli.main(["essay", "--quick", "--claims", "C7", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["exit_code"] == code == 0
    assert [c["outcome"] for c in report["result"]["claims"]] == ["verified"]


#: Every command with ``--json``, on inputs that give each outcome somewhere.
ENVELOPE_CASES = {
    "essay": ["essay", "--quick", "--claims", "C7"],
    "psd": ["psd", "{d}/notpsd.npy"],
    "kernel": ["kernel", "linear - 0.5*poly(2)", "--dim", "2", "--budget", "2"],
    "unbiased": ["unbiased", "--trials", "300", "--dim", "2", "--num-features", "4"],
    "scaling": ["scaling", "--sizes", "16,32,64", "--repeats", "1", "--quiet"],
}


def test_every_command_has_an_envelope_case():
    assert set(ENVELOPE_CASES) == set(cli.COMMANDS)


@pytest.mark.parametrize("command", sorted(ENVELOPE_CASES))
def test_every_json_is_one_envelope_that_says_what_the_text_says(command, matrices, capsys):
    argv = [a.format(d=matrices) for a in ENVELOPE_CASES[command]]
    text_code = cli.main(argv)
    text = capsys.readouterr().out
    json_code = cli.main([*argv, "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) == {"schema", "command", "outcome", "exit_code", "result"}
    assert payload["schema"] == f"kernelcheck/{SCHEMA_VERSION}" == cli.SCHEMA
    assert payload["command"] == command
    assert isinstance(payload["result"], dict) and payload["result"]
    assert payload["exit_code"] == json_code
    assert payload["outcome"] == OUTCOME_OF_CODE[json_code]
    if command == "scaling":  # timings differ from run to run; the words of one run agree
        return
    assert json_code == text_code
    if command == "essay":
        word = re.findall(r"\b(verified|refuted|inconclusive)\b", text.split("\n\n")[0])[-1]
    else:
        word = _verdict_lines(text)[-1].split(":")[0]
    assert payload["outcome"] == word


@pytest.fixture
def no_matplotlib(monkeypatch):
    """``import matplotlib`` fails, as where it is not installed."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)


@pytest.mark.parametrize(
    "argv",
    [
        ["unbiased", "--trials", "2000", "--dim", "2"],
        ["scaling", "--sizes", "16,32,64", "--repeats", "1"],
        ["essay", "--quick", "--claims", "C12"],
    ],
    ids=["unbiased", "scaling", "essay"],
)
def test_without_matplotlib_every_out_says_the_plots_were_skipped(
    argv, tmp_path, no_matplotlib, capsys
):
    out = tmp_path / "report"
    code = cli.main([*argv, "--out", str(out)])
    captured = capsys.readouterr()
    assert code in (0, 1, 3), captured.err
    assert "Traceback" not in captured.err
    assert PLOTS_SKIPPED in captured.out.splitlines(), captured.out
    assert "pip install 'kernelcheck-attention[plots]'" in PLOTS_SKIPPED
    assert not list(out.glob("*.png"))
    (markdown,) = out.glob("*.md")
    assert PLOTS_SKIPPED in markdown.read_text(encoding="utf-8")
    wrote = next(line for line in captured.out.splitlines() if line.startswith("wrote "))
    assert ".png" not in wrote, wrote


def test_with_matplotlib_out_names_the_plots_it_wrote(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report"
    cli.main(["unbiased", "--trials", "2000", "--dim", "2", "--out", str(out)])
    text = capsys.readouterr().out
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs
    wrote = next(line for line in text.splitlines() if line.startswith("wrote "))
    assert all(name in wrote for name in pngs), wrote
    assert PLOTS_SKIPPED not in text
