"""Paths checked before any work (kernelcheck._src.core.files): output folders and input files.

Every refusal names the argument and the path, and says what is wrong with it;
every public call that writes into a folder checks it before it renders,
measures or writes anything.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from kernelcheck import claims, verify
from kernelcheck._src.core.files import as_output_folder
from kernelcheck.errors import InvalidArgument
from kernelcheck.kernels import Linear
from kernelcheck.scaling import run_scaling


def test_an_output_folder_that_exists_is_accepted_and_a_file_refused(tmp_path):
    assert as_output_folder(tmp_path) == tmp_path
    assert as_output_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    f = tmp_path / "report.md"
    f.write_text("x")
    with pytest.raises(InvalidArgument, match=r"^`out` must be a folder, but .* is a file"):
        as_output_folder(f)


def test_an_output_folder_under_a_file_names_both_paths(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    target = f / "sub"
    with pytest.raises(InvalidArgument) as info:
        as_output_folder(target)
    assert str(info.value) == (
        f"`out` {str(target)!r} cannot be created: {str(f)!r} is not a folder"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_output_folder_that_cannot_be_written_names_the_path(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(InvalidArgument) as info:
            as_output_folder(ro / "out")
        assert str(info.value).startswith(f"`out` {str(ro / 'out')!r}: cannot write into")
    finally:
        ro.chmod(0o700)


def test_an_output_folder_on_proc_names_the_path():
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    target = "/proc/self/kernelcheck-report"
    with pytest.raises(InvalidArgument) as info:
        as_output_folder(target)
    assert str(info.value).startswith(f"`out` {target!r}: cannot write into '/proc/self'")


def _unbiased_report():
    X = np.random.default_rng(3).normal(size=(3, 2))
    return verify.unbiased(lambda rng: Linear().features(), Linear(), X, trials=4, seed=0)


def _scaling(out):
    return run_scaling(
        sizes=(8, 16, 32), d=2, num_features=4, repeats=1, forms=["parallel"], out=out
    )


EMPTY_ESSAY = claims.EssayReport(results=(), level="quick", duration=0.0)

#: Every public call that writes into a folder it is given: ``(call(folder), argument name)``.
#: Each checks the folder before it renders, measures or writes anything.
FOLDER_CALLS = {
    "as_output_folder": (lambda out: as_output_folder(out, "out"), "out"),
    "verify.write_report": (lambda out: verify.write_report(_unbiased_report(), out), "out_dir"),
    "claims.write_report": (lambda out: claims.write_report(EMPTY_ESSAY, out), "out_dir"),
    "scaling.run_scaling": (_scaling, "out"),
}

#: Folder paths no file system can take, each with what the refusal says; ``{tmp}`` is a
#: writable folder, so only the path's own fault can refuse it.
BAD_FOLDERS = {
    "NUL byte": ("{tmp}/a\0b", r"holds a NUL byte at position"),
    "lone surrogate": ("{tmp}/a\ud800", r"cannot be encoded as a file name"),
    "name too long": ("{tmp}/" + "a" * 300, r"File name too long"),
    "name too long below a new folder": (
        "{tmp}/new/" + "a" * 300,
        r"is 300 bytes long; the file system in .* takes names of at most",
    ),
    "path too long": ("{tmp}/" + "/".join(["abcdefgh"] * 600), r"File name too long"),
}


@pytest.mark.parametrize("bad", sorted(BAD_FOLDERS))
@pytest.mark.parametrize("call", sorted(FOLDER_CALLS))
def test_a_folder_no_file_system_can_take_is_refused_by_name_before_any_work(tmp_path, call, bad):
    fn, name = FOLDER_CALLS[call]
    template, message = BAD_FOLDERS[bad]
    folder = template.format(tmp=tmp_path)
    with pytest.raises(InvalidArgument, match=f"^`{name}` .*{message}"):
        fn(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("bad", ["NUL byte", "lone surrogate"])
def test_an_input_file_no_file_system_can_name_is_refused_by_name(tmp_path, bad):
    from kernelcheck._src.core.files import as_input_file

    template, message = BAD_FOLDERS[bad]
    with pytest.raises(InvalidArgument, match=f"^`file` .*{message}"):
        as_input_file(template.format(tmp=tmp_path))


def test_a_loop_of_links_is_named_as_one(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(InvalidArgument, match=r"is a dangling link \(or a loop of links\)"):
        as_output_folder(tmp_path / "a" / "report")
