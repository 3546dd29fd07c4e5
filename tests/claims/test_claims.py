"""The claims registry and the essay report.

The registry must hold every claim (C1..C24, built once from the check
modules of their groups), each check must return a well-formed
:class:`ClaimResult`, and the claims pages of the documentation must agree
with the registry.  The
verdicts expected at the quick level are "verified" for every claim: the
claims are theorems (or, for C8, the corrected statement), so the library
computing them is what is under test.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from kernelcheck import claims as C
from kernelcheck._src.claims import essay
from kernelcheck._src.claims import registry as claims_src
from kernelcheck.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[2]
ALL_IDS = [f"C{i}" for i in range(1, 25)]


@pytest.fixture(scope="module")
def quick_results():
    # One quick run shared by the tests below (about five seconds).
    return {r.claim: r for r in C.run_claims(level="quick")}


def test_registry_is_complete_and_ordered():
    reg = C.registry()
    assert list(reg) == ALL_IDS
    assert set(C.STATEMENTS) == set(ALL_IDS)
    for cid, claim in reg.items():
        assert claim.id == cid
        assert claim.title == C.STATEMENTS[cid][0]
        assert claim.group in {slug for slug, _t, ids in C.GROUPS if cid in ids}
        assert claim.checked_by, cid


def test_registry_holds_exactly_the_statements_in_order():
    """The registry is plain data: one claim per statement, in claim order, no probing."""
    assert list(claims_src.CLAIMS) == list(C.STATEMENTS) == ALL_IDS
    assert C.registry() == dict(claims_src.CLAIMS)
    assert C.registry() is not C.registry()  # a fresh dict the caller may filter
    for cid in ALL_IDS:
        assert C.get_claim(cid) is claims_src.CLAIMS[cid]


def test_each_check_module_holds_the_checks_of_its_group():
    modules = claims_src.CHECK_MODULES
    assert list(modules) == [slug for slug, _title, _ids in C.GROUPS]
    for slug, _title, ids in C.GROUPS:
        entries = modules[slug].CHECKS
        assert [e.id for e in entries] == list(ids), slug
        for e in entries:
            claim = C.get_claim(e.id)
            assert claim.group == slug
            assert claim.check_fn is e.fn
            assert claim.checked_by == tuple(e.checked_by)
            assert claim.uses_executor is e.uses_executor


def test_only_monte_carlo_and_search_checks_take_an_executor():
    uses = [cid for cid, claim in C.registry().items() if claim.uses_executor]
    assert uses == ["C5", "C13", "C16", "C17", "C18"]


def test_groups_partition_the_claims():
    ids = [cid for _slug, _title, group in C.GROUPS for cid in group]
    assert sorted(ids, key=lambda c: int(c[1:])) == ALL_IDS
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("cid", ALL_IDS)
def test_quick_check_returns_a_verified_claim_result(quick_results, cid):
    r = quick_results[cid]
    assert isinstance(r, C.ClaimResult)
    assert r.claim == cid and r.level == "quick"
    assert r.verdict is C.ClaimVerdict.VERIFIED, (r.key_number, r.details)
    assert r.passed
    assert isinstance(r.key_number, str) and r.key_number
    assert r.duration >= 0
    json.dumps(r.to_dict())  # JSON-ready, strict
    for st in r.details.get("statements", []):
        assert set(st) == {"statement", "verdict", "evidence"}
        assert st["verdict"] in ("verified", "refuted", "inconclusive", "not run")
    assert str(r).startswith(f"{cid} verified: ")


def test_c8_reports_what_holds_and_what_does_not(quick_results):
    statements = quick_results["C8"].details["statements"]
    verdicts = {s["statement"]: s["verdict"] for s in statements}
    holds = [s for s, v in verdicts.items() if v == "verified"]
    fails = [s for s, v in verdicts.items() if v == "refuted"]
    assert any("tensor" in s and "d^m" in s for s in holds)
    assert any("weighted unique monomials" in s and "C(d+m-1, m)" in s for s in holds)
    assert any("unweighted" in s for s in fails)
    assert any("d^m ('n^m') coordinates" in s for s in fails)


def test_checks_are_deterministic():
    a, b = C.get_claim("C13").check("quick"), C.get_claim("C13").check("quick")
    assert a.key_number == b.key_number
    assert a.details == b.details


def test_get_claim_and_bad_ids():
    assert C.get_claim("c7").id == "C7"
    assert C.get_claim(" C12 ").id == "C12"
    for bad in ("C0", "C99", "7", "", "CX"):
        with pytest.raises(InvalidArgument, match="`claim_id`"):
            C.get_claim(bad)
    with pytest.raises(InvalidArgument, match="`claim_id` must be a string"):
        C.get_claim(7)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="`level`"):
        C.get_claim("C7").check("fast")


def test_a_failing_check_is_reported_inconclusive_not_hidden(monkeypatch):
    def broken(level):
        raise RuntimeError("boom")

    claim = C.Claim("C7", "t", "s", "kernels", broken)
    monkeypatch.setattr(claims_src, "CLAIMS", {"C7": claim})
    (r,) = C.run_claims(["C7"], "quick")
    assert r.verdict is C.ClaimVerdict.INCONCLUSIVE
    assert "RuntimeError: boom" in r.key_number


def test_exit_code_for():
    V = C.ClaimVerdict
    assert C.exit_code_for([]) == 0
    assert C.exit_code_for([V.VERIFIED, V.VERIFIED]) == 0
    assert C.exit_code_for([V.VERIFIED, V.INCONCLUSIVE]) == 3
    assert C.exit_code_for([V.INCONCLUSIVE, V.REFUTED, V.VERIFIED]) == 1


def test_essay_report_renders_every_claim(quick_results):
    report = C.EssayReport(results=tuple(quick_results.values()), level="quick", duration=1.0)
    table = report.table().splitlines()
    assert table[0].split()[:2] == ["claim", "in"]
    key_col = table[0].index("key number")
    rows: dict[str, list[str]] = {}
    for line in table[2:]:
        if not line.startswith(" "):
            rows[line.split()[0]] = [line[key_col:]]
        elif line.startswith(" " * key_col):
            rows[list(rows)[-1]].append(line[key_col:])
    assert list(rows) == ALL_IDS
    for cid, parts in rows.items():  # the key number, wrapped under its column, nothing cut
        assert " ".join(parts) == " ".join(quick_results[cid].key_number.split())
    assert max(len(line) for line in table) <= 100
    md = report.to_markdown({"C12": "C12.png"})
    for cid in ALL_IDS:
        assert f"| {cid} | " in md
        assert f"### {cid}: " in md
    assert "![C12](C12.png)" in md
    d = report.to_dict()
    total = len(ALL_IDS)
    assert d["summary"] == {"verified": total, "refuted": 0, "inconclusive": 0, "total": total}
    assert json.loads(json.dumps(d))["claims"][7]["id"] == "C8"


@pytest.mark.parametrize("columns", ["60", "80", "132", "junk"])
def test_the_table_respects_columns(quick_results, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    report = C.EssayReport(results=tuple(quick_results.values()), level="quick", duration=1.0)
    width = int(columns) if columns.isdigit() else 100
    assert max(len(line) for line in report.table().splitlines()) <= width


def test_an_inconclusive_row_says_what_would_decide_it(quick_results):
    r = quick_results["C2"]
    st = {"statement": "measured time ~ n^p", "verdict": "inconclusive", "evidence": "p = 1.6"}
    undecided = dataclasses.replace(
        r, verdict=C.ClaimVerdict.INCONCLUSIVE, details={"statements": [st]}
    )
    report = C.EssayReport(results=(undecided,), level="default", duration=1.0)
    text = " ".join(report.table().split())
    assert "to decide: measured time ~ n^p: p = 1.6." in text
    assert "--claims C2 --thorough" in text
    assert "[inconclusive] measured time ~ n^p: p = 1.6" in report.details_text()
    assert "*To decide.* measured time ~ n^p: p = 1.6." in report.to_markdown()


def test_c12_evidence_prints_t_m_at_the_grid_point_it_names(quick_results):
    import math

    r = quick_results["C12"]
    odd = next(st for st in r.details["statements"] if st["statement"].startswith("odd M"))
    found = re.findall(r"T_(\d+)\(([-0-9.e]+)\) = ([-0-9.e+]+)", odd["evidence"] + r.key_number)
    assert found
    for M, x, v in found:
        s_ = float(x)
        exact = sum(s_**k / math.factorial(k) for k in range(int(M) + 1))
        assert exact <= 0 and float(v) == pytest.approx(exact, rel=5e-3)


def test_json_carries_numbers_as_numbers_and_non_finite_as_null_with_a_note(quick_results):
    r = quick_results["C12"]
    odd = dict(r.details, bound=float("inf"), p_values=[0.5, float("nan")])
    report = C.EssayReport(
        results=(dataclasses.replace(r, details=odd),), level="quick", duration=1.0
    )
    text = json.dumps(report.to_dict(), allow_nan=False)  # no NaN or Infinity tokens
    d = json.loads(text)
    details = d["claims"][0]["details"]
    assert details["bound"] is None and details["p_values"] == [0.5, None]
    assert {"path": "claims[0].details.bound", "value": "inf"} in d["non_finite"]
    assert {"path": "claims[0].details.p_values[1]", "value": "nan"} in d["non_finite"]
    assert all(isinstance(v, float) for v in details["error_over_bound"])


def test_run_essay_prints_rows_as_they_finish(capsys):
    import sys

    report = essay.run_essay(["C11", "C7"], "quick", stream=sys.stdout)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:] if not line.startswith(" ")] == ["C7", "C11"]
    assert [r.claim for r in report.results] == ["C7", "C11"]


def test_property_tests_are_found_by_claim_id(tmp_path):
    props = tmp_path / "properties"
    props.mkdir()
    (props / "test_x.py").write_text(
        "def test_c09_c12_truncation():\n    pass\n\ndef test_c3_not_two_digits():\n    pass\n"
    )
    found = claims_src.scan_property_tests(tmp_path)
    assert found == {
        "C9": ("properties/test_x.py::test_c09_c12_truncation",),
        "C12": ("properties/test_x.py::test_c09_c12_truncation",),
    }
    assert claims_src.scan_property_tests(tmp_path / "elsewhere") == {}


def test_properties_are_scanned_once_per_process(monkeypatch):
    """property_tests() is cached, and the registry never rescans ``properties/``."""
    first = claims_src.property_tests()
    assert claims_src.property_tests() is first

    def rescan(root):
        raise AssertionError("properties/ rescanned")

    monkeypatch.setattr(claims_src, "scan_property_tests", rescan)
    assert claims_src.property_tests() is first
    for cid, claim in C.registry().items():
        assert C.get_claim(cid).properties == claim.properties == first.get(cid, ())
    assert C.get_claim("C13").properties  # the checkout's properties/ is found
    C.run_claims(["C7"], "quick")


class _CountingExecutor:
    """A thread pool that counts the tasks submitted to it."""

    def __init__(self, pool):
        self.pool, self.submitted = pool, 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return self.pool.submit(fn, *args, **kwargs)


def test_the_executor_is_an_argument_handed_to_the_checks_that_use_one():
    from concurrent.futures import ThreadPoolExecutor

    plain = C.get_claim("C13").check("quick")
    with ThreadPoolExecutor(2) as pool:
        counting = _CountingExecutor(pool)
        pooled = C.get_claim("C13").check("quick", executor=counting)
        assert counting.submitted > 0
        used = counting.submitted
        (r,) = C.run_claims(["C7"], "quick", executor=counting)  # C7 takes none: ignored
        assert counting.submitted == used and r.passed
    assert (pooled.verdict, pooled.key_number, pooled.details) == (
        plain.verdict,
        plain.key_number,
        plain.details,
    )
    with pytest.raises(InvalidArgument, match="`executor` must be"):
        C.get_claim("C7").check("quick", executor=object())


# ---------------------------------------------------------------------------
# The documentation agrees with the registry


@pytest.mark.parametrize("cid", ALL_IDS)
def test_claims_page_documents_the_registered_check(cid):
    claim = C.get_claim(cid)
    page = (ROOT / "docs" / "claims" / f"{claim.group}.md").read_text()
    assert f"## {cid}: {claim.title}\n" in page
    section = page.split(f"## {cid}: ")[1].split("\n## ")[0]
    checked = re.search(r"\*\*Checked by:\*\*(.*)", section, re.S)
    assert checked, f"{cid}: no 'Checked by' line"
    for name in claim.checked_by:
        assert f"`{name}`" in checked.group(1), (cid, name)


def test_claims_index_links_every_group():
    index = (ROOT / "docs" / "claims" / "index.md").read_text()
    for slug, title, ids in C.GROUPS:
        assert f"({slug}.md)" in index
        assert (ROOT / "docs" / "claims" / f"{slug}.md").exists()
        assert f"| {title} | {', '.join(ids)} |" in index
