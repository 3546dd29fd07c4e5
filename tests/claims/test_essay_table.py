"""The essay's table: every claim title shown whole, within the width of the terminal.

A title longer than its column wraps onto continuation lines under its own
column, as the key number does; reading the column back, line by line,
gives each title as the registry states it.
"""

from __future__ import annotations

import re

import pytest

from kernelcheck._src.claims.essay import run_essay
from kernelcheck._src.claims.registry import STATEMENTS

#: Claims with the longest titles (cheap at the quick level): 47, 45, 45 and 43 characters.
LONG_TITLES = ["C6", "C11", "C19", "C9"]


@pytest.fixture(scope="module")
def report():
    return run_essay(LONG_TITLES, "quick")


def _title_column(table: str) -> dict[str, str]:
    """``{claim: its title}`` read back from the title column, continuation lines joined."""
    lines = table.splitlines()
    header, rule = lines[0], lines[1]
    start = header.index("in a few words")
    end = start + len(rule.split()[1])
    titles: dict[str, str] = {}
    claim = None
    for line in lines[2:]:
        if re.match(r"^C\d+\s", line):
            claim = line.split()[0]
        part = line[start:end].strip()
        if claim is not None and part:
            titles[claim] = f"{titles.get(claim, '')} {part}".strip()
    return titles


@pytest.mark.parametrize("width", [100, 60])
def test_claim_titles_are_shown_whole(report, width, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(width))
    table = report.table()
    assert all(len(line) <= width for line in table.splitlines()), table
    assert _title_column(table) == {c: STATEMENTS[c][0] for c in LONG_TITLES}


def test_a_wide_terminal_shows_each_title_on_its_row(report, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    rows = {
        line.split()[0]: line for line in report.table().splitlines() if re.match(r"^C\d+\s", line)
    }
    assert set(rows) == set(LONG_TITLES)
    for claim, row in rows.items():
        assert STATEMENTS[claim][0] in row, row
