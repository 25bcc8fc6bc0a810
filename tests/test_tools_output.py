"""The tools' output files: written whole or not at all, with a new file's permissions, and a path that cannot be
written is bad input (exit 2, one line naming it), never a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from helpers.traces import gpu_trace, write_json

from nrlprof.cli import main
from nrlprof.errors import ToolError
from nrlprof.tools.collect.index import INDEX_NAME, save_index
from nrlprof.tools.output import AtomicOutput, write_output

COMMANDS = {"report": "r.html", "merge": "t.json", "merge-gz": "t.json.gz"}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_json(tmp_path / "run" / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    return tmp_path / "run"


@pytest.fixture
def umask():
    previous = os.umask(0o022)
    try:
        yield lambda mask: os.umask(mask)
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def command(name: str, run_dir: Path, output: Path) -> list[str]:
    return [name.partition("-")[0], str(run_dir), "-o", str(output)]


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_outputs_get_a_new_files_permissions(run_dir, tmp_path, umask, name, mask):
    umask(mask)
    output = tmp_path / COMMANDS[name]
    assert main(command(name, run_dir, output)) == 0
    assert mode(output) == 0o666 & ~mask
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_collect_index_too(tmp_path, umask):
    save_index(tmp_path, {"node/a": {"size": 1}})
    assert mode(tmp_path / INDEX_NAME) == 0o644 and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_output_path_that_cannot_be_written_is_bad_input(run_dir, tmp_path, capsys, name):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    (tmp_path / "a-dir").mkdir()
    for output, named, reason in (
        (tmp_path / "missing" / "out", tmp_path / "missing", "output directory does not exist"),
        (a_file / "out", a_file, "not a directory"),
        (tmp_path / "a-dir", tmp_path / "a-dir", "a directory, not a file to write"),
    ):
        assert main(command(name, run_dir, output)) == 2
        assert capsys.readouterr().err == f"nrlprof {name.partition('-')[0]}: {named}: {reason}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir", "a-file", "run"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory whatever its permission bits")
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_unwritable_directory_is_bad_input(run_dir, tmp_path, capsys, name):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert main(command(name, run_dir, locked / "out")) == 2
    finally:
        locked.chmod(0o700)
    assert capsys.readouterr().err == f"nrlprof {name.partition('-')[0]}: {locked}: output directory is not writable\n"


def test_a_refused_write_names_the_path_and_leaves_nothing(tmp_path, monkeypatch):
    real_open = os.open

    def refuse(path, flags, mode=0o777, **kwargs):
        if str(path).endswith(".tmp"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(ToolError, match="cannot write: Permission denied") as refused:
        write_output(tmp_path / "out.html", b"x")
    assert refused.value.path == tmp_path / "out.html"
    assert list(tmp_path.iterdir()) == []


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary(tmp_path):
    output = tmp_path / "out.json"
    output.write_text("old")
    with pytest.raises(RuntimeError), AtomicOutput(output) as handle:
        handle.write(b"new, half")
        raise RuntimeError("interrupted")
    assert output.read_text() == "old" and sorted(tmp_path.iterdir()) == [output]
