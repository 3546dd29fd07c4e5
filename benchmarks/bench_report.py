"""Tests of benchmarks/report.py, the one command behind docs/performance.md's tables.

No timing is asserted: these check the protocol (refusal under load, interleaved
rounds, the rows compared with their reference) and that only the generated
section of the page is replaced.
"""

from __future__ import annotations

from datetime import datetime, timezone

import report


def test_refuses_above_load_one_unless_allowed(monkeypatch, capsys):
    monkeypatch.setattr(report, "load", lambda: (1.5, 1.0, 1.0))
    ran = []
    monkeypatch.setattr(report.pytest, "main", lambda *a, **k: ran.append(a) or 0)
    assert report.main(["--print"]) == 2
    assert "refused: load average 1.50 > 1.0" in capsys.readouterr().err
    assert not ran  # nothing was measured


def test_interleave_times_every_member_once_per_round_in_rotated_order():
    calls = []
    entries = [
        report.Entry(name, "g", lambda name=name: calls.append(name), rounds_wanted=4)
        for name in "abc"
    ]
    report.interleave(entries, budget=10.0)
    assert all(len(e.times) == 4 for e in entries)
    timed = calls[3:]  # after one untimed call each (no warm-up time recorded)
    assert [timed[i : i + 3] for i in range(0, 12, 3)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]


def _entry(name, times, **extra):
    e = report.Entry(name, "parallel-vs-gemm", lambda: None, 3, dict(extra))
    e.times = list(times)
    return e


def test_rows_are_compared_with_the_reference_of_their_group_and_flagged_under_load():
    rows = [
        _entry("parallel_gemm_floor", [2.0, 1.0, 3.0]),
        _entry("parallel_bidirectional", [1.1, 1.4, 1.2]),
        _entry("parallel_causal", [1.6, 1.7, 1.8]),
    ]
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    text = report.render(rows, t, t, (2.0, 1.0, 1.0), (0.5, 0.5, 0.5), True, [])
    assert text.startswith(report.BEGIN) and text.rstrip().endswith(report.END)
    assert "Measured under load" in text and "--allow-load" in text
    assert "| `parallel_bidirectional` | 1.10 s | 1.20 s | 1.1 | 0.6 |" in text
    assert "`parallel_bidirectional`: 1.1x the reference, target at most 1.15x: **met**" in text
    assert "`parallel_causal`: 1.6x the reference, target at most 1.5x: **not met**" in text
    quiet = report.render(rows, t, t, (0.2, 0.2, 0.2), (0.3, 0.3, 0.3), False, [])
    assert "Measured under load" not in quiet
    rose = report.render(rows, t, t, (0.2, 0.2, 0.2), (1.3, 0.3, 0.3), False, [])
    assert "other work raised the load above 1 during the run" in rose
    # the run's own CPU use is not other work: 1.9 at the end with 1.5 CPUs of its own
    own = report.render(rows, t, t, (0.2, 0.2, 0.2), (1.9, 0.3, 0.3), False, [], own=1.5)
    assert "Measured under load" not in own and "kept 1.50 CPUs busy" in own


def test_the_header_names_the_cpus_and_every_blas_library():
    import os

    from threadpoolctl import threadpool_info

    text = report.machine()
    assert text.startswith(f"{os.cpu_count()} CPUs, ")
    libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    assert libs, "NumPy's BLAS is loaded"
    for lib in libs:
        assert f"{lib['internal_api']} {lib['version']}" in text
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert text in report.render([], t, t, (0.2,) * 3, (0.2,) * 3, False, [])


def test_splice_replaces_only_the_generated_section():
    doc = f"intro\n\n{report.BEGIN}\nold figures\n{report.END}\n\noutro\n"
    new = f"{report.BEGIN}\nnew figures\n{report.END}\n"
    out = report.splice(doc, new)
    assert out == f"intro\n\n{report.BEGIN}\nnew figures\n{report.END}\n\noutro\n"
    assert report.splice(out, new) == out
