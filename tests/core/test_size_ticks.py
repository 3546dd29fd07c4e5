"""Tick labels of size axes never overlap (read back from the drawn figure)."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("matplotlib")

from kernelcheck._src.core.report import new_figure, size_ticks  # noqa: E402


def _label_boxes(fig, ax):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    lo, hi = ax.get_xlim()
    return [
        t.get_window_extent(renderer)
        for t, v in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
        if t.get_text() and lo <= v <= hi
    ]


# the scaling command's merged grids (sqrt(2) and 2 apart), the unbiased sweep's m
GRIDS = [
    (512, 861, 1024, 1448, 2048, 2435, 4096, 8192, 16384),
    (1024, 1448, 2048, 2896, 4096, 5793, 8192, 512, 16384, 32768),
    (4, 8, 16, 32, 64),
    (16, 23, 32, 45, 64, 91, 128),
]


@pytest.mark.parametrize("grid", GRIDS, ids=[f"{min(g)}..{max(g)}" for g in GRIDS])
@pytest.mark.parametrize(("width", "panels"), [(3.5, 1), (5.0, 1), (15.6, 3)])
def test_labels_do_not_overlap_and_every_size_has_a_tick(grid, width, panels):
    fig = new_figure((width, 3.0))
    axes = fig.subplots(1, panels, squeeze=False)[0]
    for a in axes:
        a.set_xscale("log")
        a.plot(grid, [1.0] * len(grid), "o")
        a.set_ylabel("time per call, s")
        size_ticks(a, grid)
    fig.tight_layout()  # as the report's figures are laid out
    ax = axes[-1]
    boxes = _label_boxes(fig, ax)
    assert len(boxes) >= 2
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    major = {int(v) for v in ax.get_xticks()}
    minor = {int(v) for v in ax.xaxis.get_minorticklocs()}
    assert major | minor == set(grid) and not (major & minor)
    assert all(
        lab.get_text() == str(int(v))
        for lab, v in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
    )
