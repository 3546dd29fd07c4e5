"""``kernelcheck essay``: the report folder and the JSON of a subset of the claims."""

from __future__ import annotations

import json


def test_essay_writes_the_report(runs, files):
    proc, expected = runs["essay"]
    assert proc.returncode == expected, proc.stdout + proc.stderr
    ids = ["C1", "C7", "C8", "C12"]
    rows = [line.split()[0] for line in proc.stdout.splitlines()[2:] if line.startswith("C")]
    assert rows == ids
    out = files["essay_out"]
    report = json.loads((out / "report.json").read_text())
    assert [c["id"] for c in report["claims"]] == ids
    assert report["exit_code"] == 0 and report["level"] == "quick"
    md = (out / "report.md").read_text()
    assert md.startswith("# kernelcheck essay report")
    pngs = list(out.glob("*.png"))
    assert [p.name for p in pngs] == ["C12.png"]
    assert pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](C12.png)" in md
    assert not list(out.glob(".*.tmp"))  # no temporary files left behind


def test_essay_json_subset(runs):
    proc, expected = runs["essay_json"]
    assert proc.returncode == expected, proc.stderr
    report = json.loads(proc.stdout)["result"]
    assert [c["id"] for c in report["claims"]] == ["C7", "C8"]
    assert all(c["verdict"] == "verified" for c in report["claims"])
