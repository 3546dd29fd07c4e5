"""docs/cli.md agrees with the command line: options, their values and defaults, and output.

For every command of :data:`kernelcheck.cli.COMMANDS`, the page's section
(``## `kernelcheck COMMAND ...` ``) must list in its usage block and in its
options table exactly the options that ``kernelcheck COMMAND --help`` shows,
with the same value names (``--trials N``) and the same defaults.  An option
shared by several commands has one value name everywhere.  The ``console``
blocks of the page are run in a scratch folder (``$ kernelcheck ...`` lines;
the lines after one are its output) and must print what the page shows, up to
the digits of the numbers and the widths of white space.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.core.outcome import EXIT_INTERRUPTED, EXIT_USAGE, Outcome, exit_code
from kernelcheck._src.core.report import PLOTS_SKIPPED

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
TEXT = PAGE.read_text(encoding="utf-8")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _sections() -> dict[str, str]:
    """``{command: its section of the page}``, from the ``## `kernelcheck COMMAND`` headings."""
    parts = re.split(r"^## ", TEXT, flags=re.MULTILINE)
    out = {}
    for part in parts[1:]:
        m = re.match(r"`kernelcheck (\w+)", part)
        if m:
            out[m.group(1)] = part
    return out


SECTIONS = _sections()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """``{"--trials N": action}``: the options ``--help`` shows, with their value names."""
    out = {}
    for a in p._actions:
        if not a.option_strings or a.help == argparse.SUPPRESS or "--help" in a.option_strings:
            continue
        name = max(a.option_strings, key=len)
        if a.nargs != 0:
            name += " " + (a.metavar or a.dest.upper())
        out[name] = a
    return out


PARSERS = _subparsers()


def _table(section: str) -> dict[str, list[str]]:
    """The options table of a section: ``{"--trials N": [meaning, default]}``."""
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(--[^`]+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def _usage(section: str) -> str:
    m = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert m, "the section opens with a usage block"
    return " ".join(m.group(1).split())


def _help(command: str, capsys) -> str:
    assert cli.main([command, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_every_command_has_a_section():
    assert set(SECTIONS) == set(cli.COMMANDS)


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_the_options_table_is_the_help(command, capsys):
    options = _options(PARSERS[command])
    table = _table(SECTIONS[command])
    assert set(table) == set(options), (
        f"docs/cli.md `kernelcheck {command}`: only in the page "
        f"{sorted(set(table) - set(options))}, only in --help {sorted(set(options) - set(table))}"
    )
    help_text = _help(command, capsys)
    assert {o for o in OPTION.findall(help_text) if o != "--help"} == {
        n.split()[0] for n in options
    }
    for name in options:
        assert name in help_text, f"{name!r} is not in `kernelcheck {command} --help`"


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_the_usage_block_names_every_option_with_its_value(command):
    usage = _usage(SECTIONS[command])
    options = _options(PARSERS[command])
    assert set(OPTION.findall(usage)) == {n.split()[0] for n in options}, usage
    for name in options:
        assert name in usage, f"docs/cli.md usage of {command} lacks {name!r}"


def _same_value(doc: str, value) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        try:
            return float(doc) == float(value)
        except ValueError:
            return False
    return doc == str(value)


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_defaults_agree(command):
    table = _table(SECTIONS[command])
    for name, action in _options(PARSERS[command]).items():
        meaning, default = table[name]
        stated = re.search(r"\(default ([^)]+)\)", action.help or "")
        doc = re.fullmatch(r"`([^`]+)`", default)
        if action.default not in (None, False):
            assert doc and _same_value(doc.group(1), action.default), (command, name, default)
        if stated and doc:  # the help states a default the parser does not hold
            assert stated.group(1) == doc.group(1), (command, name, stated.group(1), default)
        elif stated:
            assert stated.group(1) in default, (command, name, stated.group(1), default)


def test_an_option_has_one_value_name_in_every_command():
    names: dict[str, set[str]] = {}
    for p in PARSERS.values():
        for name in _options(p):
            flag, _, value = name.partition(" ")
            names.setdefault(flag, set()).add(value)
    assert all(len(v) == 1 for v in names.values()), names
    shared = _table(TEXT.split("### Reports and plots")[0])
    for row in shared:
        for name in row.split("`, `"):
            flag, _, value = name.partition(" ")
            assert names[flag] == {value}, (name, names[flag])


def test_the_page_shows_the_words_and_exit_codes_of_the_command_line():
    assert PLOTS_SKIPPED in TEXT
    for outcome in Outcome:
        assert f"| {outcome.exit_code} | `{outcome.value}`" in TEXT
    assert f"| {EXIT_USAGE} | bad usage" in TEXT
    assert f"| {EXIT_INTERRUPTED} | interrupted" in TEXT


# ---------------------------------------------------------------------------
# The console blocks: run them, compare what they print


def _console() -> list[tuple[str, str]]:
    """``[(command line, its output)]`` from the ``console`` blocks of the page."""
    runs = []
    for block in re.findall(r"```console\n(.*?)```", TEXT, re.DOTALL):
        for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            line, _, output = chunk.partition("\n")
            runs.append((line, output))
    return runs


CONSOLE = _console()


def _normal(text: str) -> str:
    """Digits and white-space widths removed: what stays fixed between machines."""
    text = re.sub(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", "N", text)
    text = re.sub(r"-{2,}", "--", text)
    return " ".join(text.split())


def test_every_command_has_a_console_example():
    shown = {shlex.split(line)[1] for line, _ in CONSOLE}
    assert shown >= set(cli.COMMANDS), shown


@pytest.mark.parametrize(("line", "expected"), CONSOLE, ids=[line for line, _ in CONSOLE])
def test_console_examples_print_what_the_page_shows(line, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    np.save("K.npy", np.array([[2.0, 1.0], [1.0, 2.0]]))  # the page's own K.npy
    Path("K.csv").write_text("a,b\n2,1\n1,2\n")  # and its K.csv, with a header row
    argv = shlex.split(line)
    assert argv[0] == "kernelcheck"
    screen = io.StringIO()  # standard output and error in the order a terminal shows them
    with contextlib.redirect_stdout(screen), contextlib.redirect_stderr(screen):
        code = cli.main(argv[1:])
    printed = screen.getvalue()
    assert _normal(printed) == _normal(expected), f"$ {line}\n{printed}"
    words = [ln.split(":")[0] for ln in printed.splitlines()]
    words = [w for w in words if w in {o.value for o in Outcome}]
    if argv[1] == "essay":  # the verdict column of the table
        words = re.findall(r"\b(verified|refuted|inconclusive)\b", printed.split("\n\n")[0])
    if words:  # the exit code is that of the most severe outcome shown
        assert code == exit_code(words), (code, words)
    else:
        assert code == EXIT_USAGE


def test_the_lists_the_page_spells_out_are_the_library_s():
    from kernelcheck._src.psd.ladder import METHODS

    methods = ", ".join(f"`{m}`" for m in METHODS[:-1]) + f", `{METHODS[-1]}`"
    assert methods in SECTIONS["psd"]
    kinds = ", ".join(f"`{k}`" for k in cli.UNBIASED_FEATURES[:-1])
    assert f"{kinds} or `{cli.UNBIASED_FEATURES[-1]}`" in SECTIONS["unbiased"]
