"""The parser class: errors name the help of the parser that found them, with a suggestion."""

from __future__ import annotations

import pytest

from kernelcheck._src.cli.parser import CommandParser, lazy_help


def _parser() -> CommandParser:
    top = CommandParser(prog="tool")
    sub = top.add_subparsers(dest="command", parser_class=CommandParser)
    run = sub.add_parser("run")
    run.add_argument("--tolerance", type=float)
    run.add_argument("--mode", choices=("fast", "careful"))
    top.commands = dict(sub.choices)
    return top


@pytest.mark.parametrize(
    ("argv", "prog", "says"),
    [
        (["run", "--tolerence", "1"], "tool run", "did you mean '--tolerance'?"),
        (["run", "--mode", "carefull"], "tool run", "did you mean 'careful'?"),
        (["rnu"], "tool", "did you mean 'run'?"),
        (["run", "--xyz"], "tool run", "unrecognized arguments: --xyz (see"),
    ],
)
def test_an_error_names_the_help_of_the_command_typed(argv, prog, says, capsys):
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(argv)
    assert info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{prog}: error: ") and line.endswith(f"(see '{prog} --help')")
    assert says in line


def test_a_placeholder_is_filled_only_when_the_help_is_shown():
    calls = []

    def fill() -> str:
        calls.append(1)
        return "alpha, beta"

    formatter = lazy_help({"<the names>": fill})
    parser = CommandParser(prog="tool", description="<the names>", formatter_class=formatter)
    parser.add_argument("--name", help="one of <the names> (default alpha)")
    assert calls == []
    text = parser.format_help()
    assert "one of alpha, beta (default alpha)" in " ".join(text.split())
    assert "<the names>" not in text and calls
