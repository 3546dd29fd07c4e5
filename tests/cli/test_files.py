"""Reading a matrix from a file: formats, pickles, special files, header rows."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from kernelcheck import cli
from kernelcheck._src.cli.files import header_row
from tests.cli.commandline import check_usage_error


def test_load_matrix_formats_agree(files):
    a = cli.load_matrix(files["pd_npy"])
    np.testing.assert_array_equal(cli.load_matrix(files["two_npz"], "pd"), a)
    # savetxt writes 18 significant digits: the text round trip is exact for float64
    np.testing.assert_array_equal(cli.load_matrix(files["pd_txt"]), a)


def test_load_matrix_refuses_pickles(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(cli.UsageError, match="cannot read a matrix"):
        cli.load_matrix(path)


#: id -> (argv, what stderr's one line says)
SPECIAL_FILES = {
    "psd-fifo": (["psd", "fifo.csv"], "is a FIFO, not a regular file"),
    "psd-sparse": (["psd", "sparse.csv"], "NUL bytes"),
    "psd-device": (["psd", "/dev/zero"], "/dev/zero"),
    "psd-missing": (["psd", "missing.npy"], "no such file"),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_FILES))
def test_a_file_that_is_no_matrix_file_is_one_line_and_exit_code_2(name, place, capsys):
    argv, says = SPECIAL_FILES[name]
    code = cli.main(argv)
    captured = capsys.readouterr()
    line = check_usage_error(code, captured.out, captured.err, "psd")
    assert says in line


MATRIX = np.array([[2.0, 1.0], [1.0, 2.0]])


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".csv", "a,b\n2,1\n1,2\n"),
        (".csv", '"first","second"\n2,1\n1,2\n'),
        (".csv", "# exported\n\nx, y\n2, 1\n1, 2\n"),
        (".txt", "left right\n2 1\n1 2\n"),
    ],
    ids=["csv", "csv-quoted", "csv-after-a-comment", "txt"],
)
def test_a_header_row_is_skipped_with_a_note(suffix, text, tmp_path):
    path = tmp_path / f"K{suffix}"
    path.write_text(text)
    notes: list[str] = []
    np.testing.assert_array_equal(cli.load_matrix(path, note=notes.append), MATRIX)
    (note,) = notes
    header = next(line for line in text.splitlines() if line and not line.startswith("#"))
    assert note == f"skipped the header row of {str(path)!r} ({header})"


def test_psd_notes_the_skipped_header_on_stderr_and_keeps_stdout_json(tmp_path, capsys):
    path = tmp_path / "K.csv"
    path.write_text("a,b\n2,1\n1,2\n")
    assert cli.main(["psd", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["result"]["n"] == 2
    assert captured.err == f"kernelcheck psd: note: skipped the header row of {str(path)!r} (a,b)\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1,2,x\n2,1,0\n", "cannot read a matrix"),  # a number in it: a malformed row
        ("1,2\nthree,4\n", "cannot read a matrix"),  # not the first row
        ("a,b\n", "holds no numbers below its header row"),
        ("a,b\nc,d\n", "cannot read a matrix"),
    ],
    ids=["number-in-first-row", "second-row", "header-only", "two-headers"],
)
def test_only_a_first_row_without_numbers_is_a_header(text, says, tmp_path):
    path = tmp_path / "K.csv"
    path.write_text(text)
    with pytest.raises(cli.UsageError, match=says):
        cli.load_matrix(path, note=lambda line: None)


@pytest.mark.parametrize(
    ("lines", "delimiter", "expected"),
    [
        (["1,2", "3,4"], ",", (0, None)),
        (["x,y", "1,2"], ",", (1, "x,y")),
        (["# c", "", "x,y # names", "1,2"], ",", (3, "x,y")),
        (["nan,inf", "1,2"], ",", (0, None)),  # numbers, if not finite ones
        (["x 1", "1 2"], None, (0, None)),
        ([], ",", (0, None)),
    ],
)
def test_header_row(lines, delimiter, expected):
    assert header_row(lines, delimiter) == expected


@pytest.mark.parametrize(
    "text", ["", "\n\n", "# only a comment\n"], ids=["empty", "blank", "comment"]
)
@pytest.mark.parametrize("suffix", [".csv", ".txt"])
def test_a_text_file_without_numbers_is_one_line_on_stderr(text, suffix, tmp_path, capsys):
    """No NumPy warning beside the refusal: the file is read for numbers before loadtxt."""
    path = tmp_path / f"K{suffix}"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's "input contained no data" would raise here
        assert cli.main(["psd", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"kernelcheck psd: error: {str(path)!r} holds no numbers (see 'kernelcheck psd --help')"
    ]
