"""``kernelcheck scaling``: a run on three sizes (timed, not judged), the grid its help states."""

from __future__ import annotations

import json

from kernelcheck import cli
from kernelcheck._src.scaling.experiment import DEFAULT_SIZES, QUICK_SIZES


def test_scaling_runs(runs, files):
    proc, _ = runs["scaling"]
    assert proc.returncode in (0, 1, 3), proc.stderr
    payload = json.loads(proc.stdout)["result"]
    assert payload["sizes"] == {"quadratic": [64, 128, 256], "linear": [64, 128, 256]}
    # three sizes are too few for a timing verdict: not judged (inconclusive), never refuted
    assert proc.returncode == 3 and {f["verdict"] for f in payload["forms"]} == {"not judged"}
    assert (files["scaling_out"] / "scaling.json").exists()


def test_scaling_help_states_the_grid_it_uses(capsys):
    assert cli.main(["scaling", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "doubling" not in help_text
    for table in (DEFAULT_SIZES, QUICK_SIZES):
        for sizes in table.values():
            ratios = {round(b / a, 2) for a, b in zip(sizes, sizes[1:])}
            assert len(ratios) == 1, sizes  # one factor apart, as the help says
            (r,) = ratios
            apart = "sqrt(2)" if r == 1.41 else f"{r:.3g}"
            grid = f"n = {sizes[0]}..{sizes[-1]}, {len(sizes)} lengths a factor {apart} apart"
            assert grid in help_text
