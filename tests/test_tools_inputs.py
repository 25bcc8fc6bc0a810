"""The files under a command's inputs: found in one walk of each directory, sorted by kind for every reader."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.memory import host_steps, write_figures
from helpers.traces import gpu_trace, write_json

from nrlprof.errors import ToolError
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read.inputs import find_inputs

TRACE = "policy/0/policy.rank0.steps3-4.1000.pt.trace.json"


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_each_file_is_sorted_by_kind(tmp_path):
    trace = touch(tmp_path / TRACE)
    other_json = touch(tmp_path / "b" / "settings.json")
    report = touch(tmp_path / "b" / "policy_3-4_7.nsys-rep")
    export = touch(tmp_path / "a" / "policy_3-4_7.sqlite")
    figures = touch(tmp_path / "m" / "policy.rank0.steps3-4.7.memory.json")
    snapshot = touch(tmp_path / "m" / "policy.rank0.steps3-4.7.pickle")
    manifest = touch(tmp_path / ".nrlprof" / "manifest-h-7.jsonl")
    touch(tmp_path / ".hidden.pt.trace.json")
    (tmp_path / "step_anatomy" / "run-1").mkdir(parents=True)
    (tmp_path / "gone.pt.trace.json").symlink_to(tmp_path / "nowhere")
    found = find_inputs([tmp_path])
    assert found.traces == [(other_json, False), (figures, False), (trace, False)]
    assert (found.nsys_reports, found.nsys_exports) == ([report], [export])
    assert (found.memory_figures, found.memory_snapshots) == ([figures], [snapshot])
    assert found.manifests == [manifest]  # in a dot-directory, where a process without a Ray session writes them
    assert found.anatomy_dirs == [tmp_path / "step_anatomy"]
    assert {".hidden.pt.trace.json", "gone.pt.trace.json", "manifest-h-7.jsonl"} <= found.names


def test_a_named_file_is_taken_as_it_is_and_a_missing_input_is_bad_input(tmp_path):
    named = touch(tmp_path / ".odd.json")
    touch(tmp_path / "d" / "x.pt.trace.json")
    assert find_inputs([named]).traces == [(named, True)]
    assert find_inputs([str(tmp_path / "d")]).traces == [(tmp_path / "d" / "x.pt.trace.json", False)]
    with pytest.raises(ToolError, match="no such file or directory"):
        find_inputs([tmp_path / "d", tmp_path / "missing"])


def test_memory_files_are_sorted_across_inputs(tmp_path):
    later = touch(tmp_path / "b" / "a.rank0.steps1.1.memory.json")
    earlier = touch(tmp_path / "a" / "z.rank0.steps1.2.memory.json")
    later_snapshot = touch(tmp_path / "b" / "a.rank0.steps1.1.pickle")
    earlier_snapshot = touch(tmp_path / "a" / "z.rank0.steps1.2.pickle")
    found = find_inputs([tmp_path / "b", tmp_path / "a", tmp_path / "b"])
    assert found.memory_figures == [earlier, later]
    assert found.memory_snapshots == [earlier_snapshot, later_snapshot]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    write_json(root / TRACE, gpu_trace())
    write_figures(root / "memory", "policy", 0, host_steps([1.0, 2.0, 3.0]), pid=1000)
    manifest = {"backend": "torch", "worker": "policy", "rank": 0, "window": "3-4", "status": "ok", "host": "h",
                "pid": 1000, "files": [f"/remote/{Path(TRACE).name}"], "start_ms": 3.0, "stop_ms": 1.0}  # fmt: skip
    touch(root / ".nrlprof" / "manifest-h-1000.jsonl", json.dumps(manifest) + "\n")
    (root / "step_anatomy").mkdir()
    return root


@pytest.fixture
def walks(monkeypatch):
    """Directories walked (Path.rglob, os.walk) in this process."""
    seen: list[str] = []
    rglob, walk = Path.rglob, os.walk
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: seen.append(str(self)) or rglob(self, pattern))
    monkeypatch.setattr(os, "walk", lambda top, *a, **k: seen.append(str(top)) or walk(top, *a, **k))
    return seen


def test_summary_walks_its_directory_once(run_dir, walks):
    summary = summarize(run_dir, nsys="", jobs=1)
    assert walks == [str(run_dir)]
    assert summary.workers and summary.overhead and "memory" in summary.sections


def test_merge_walks_each_input_once(run_dir, tmp_path, walks):
    other = tmp_path / "other"
    write_json(other / "critic.rank0.steps3-4.2000.pt.trace.json", gpu_trace(pid=2000))
    result = merge_traces([run_dir, other], tmp_path / "timeline.json", jobs=1)
    assert walks == [str(run_dir), str(other)]
    assert len(result.merged) == 2 and len(result.unplaced) == 1  # the memory figures were read, not placed
