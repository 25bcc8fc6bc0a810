"""Allocator snapshots the viewer opens, on CPU: pickle protocol 4, Python stacks unless NRL_MEMORY_PROFILE_STACKS
says `all`, and a snapshot of 1 GB or more named in the log with what to change. (A CUDA process's own snapshot
is for a device run.)"""

from __future__ import annotations

import json
import pickle
import pickletools
from pathlib import Path

import pytest

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.memory import MemoryBackend
from nrlprof.backends.memory_snapshot import say_if_too_big, write_snapshot
from nrlprof.config.env import plan_from_env
from nrlprof.errors import ConfigError
from nrlprof.manifest import Trigger

SELECTED = {"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_MEMORY_PROFILE_STEP_RANGE": "2:4"}
# The shape of torch.cuda.memory._snapshot(): segments, and per device the allocator's trace with its frames.
SNAPSHOT = {
    "segments": [{"device": 0, "address": 1 << 20, "total_size": 2 << 20, "blocks": []}],
    "device_traces": [[{"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0,
                        "frames": [{"filename": "train.py", "line": 12, "name": "forward"}]}]],
}  # fmt: skip


def test_a_snapshot_is_pickled_with_protocol_4_and_keeps_its_frames(tmp_path):
    path = tmp_path / "w.steps2-3.1.memory.pickle"
    size = write_snapshot(SNAPSHOT, path)
    data = path.read_bytes()
    assert size == len(data)
    (opcode, protocol, _), *_ = pickletools.genops(data)
    assert (opcode.name, protocol) == ("PROTO", 4), "pytorch.org/memory_viz rejects protocol 5"
    assert pickle.loads(data)["device_traces"][0][0]["frames"] == [{"filename": "train.py", "line": 12,
                                                                    "name": "forward"}]  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "written whole, no partial file left"


def test_python_stacks_are_recorded_unless_all_is_asked_for():
    default = plan_from_env(SELECTED).backend("memory")
    assert default.options_dict.get("stacks") is None
    backend = MemoryBackend(default, ProcessRole(None, plan_from_env(SELECTED), None))
    assert (backend.max_entries, backend.stacks) == (100_000, "python")
    everything = plan_from_env({**SELECTED, "NRL_MEMORY_PROFILE_STACKS": " ALL "}).backend("memory")
    assert MemoryBackend(everything, ProcessRole(None, plan_from_env(SELECTED), None)).stacks == "all"


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({**SELECTED, "NRL_MEMORY_PROFILE_STACKS": "cpp"}, "NRL_MEMORY_PROFILE_STACKS"),
        ({"NRL_MEMORY_PROFILE_STACKS": "all"}, "NRL_MEMORY_PROFILE_WORKER_PATTERNS"),
    ],
)
def test_a_bad_stacks_setting_is_one_config_error_naming_the_variable(variables, named):
    with pytest.raises(ConfigError) as caught:
        plan_from_env(variables)
    assert named in str(caught.value)
    if named == "NRL_MEMORY_PROFILE_STACKS":
        assert "'python'" in str(caught.value) and "'all'" in str(caught.value)


def test_a_snapshot_the_viewer_cannot_open_is_said_with_what_to_change(tmp_path, nrlprof_log):
    path = tmp_path / "big.pickle"
    megabyte = 1 << 20
    assert not say_if_too_big(999 * megabyte, path, "dtensor_policy_worker", 100_000, "python", limit=1000 * megabyte)
    assert say_if_too_big(1000 * megabyte, path, "dtensor_policy_worker", 100_000, "python", limit=1000 * megabyte)
    assert say_if_too_big(2000 * megabyte, path, "dtensor_policy_worker", 100_000, "all", limit=1000 * megabyte)
    python_said, all_said = nrlprof_log
    assert python_said.startswith(f"memory: the allocator snapshot of dtensor_policy_worker is 1000 MB ({path}): ")
    assert "cannot open one of 1000 MB or more" in python_said
    assert "lower NRL_MEMORY_PROFILE_MAX_ENTRIES (now 100000)" in python_said and "STACKS" not in python_said
    assert "unset NRL_MEMORY_PROFILE_STACKS=all" in all_said


KEEP = {"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_MEMORY_PROFILE_STEP_RANGE": "slow:keep"}


class RecordingCuda:
    """torch.cuda's surface the memory backend uses, in a process with one device; it notes the history switches."""

    def __init__(self) -> None:
        self.history: list[str | None] = []
        self.memory = self

    def _record_memory_history(self, enabled: str | None = "all", **options) -> None:
        self.history.append(enabled)

    def _snapshot(self) -> dict:
        return SNAPSHOT

    def device_count(self) -> int:
        return 1

    def reset_peak_memory_stats(self, device: int) -> None:
        pass

    def memory_allocated(self, device: int) -> int:
        return 0

    memory_reserved = max_memory_allocated = memory_allocated


def test_slow_keep_stops_recording_allocator_history_past_the_host_budget_and_keeps_the_figures(
    tmp_path, monkeypatch, nrlprof_log
):
    cuda = RecordingCuda()
    monkeypatch.setattr("nrlprof.backends.memory.cuda_in_use", lambda: cuda)
    plan = plan_from_env({**KEEP, "NRL_MEMORY_PROFILE_DIR": str(tmp_path), "NRL_PROFILE_MAX_HOST_MB": "16"})
    backend = MemoryBackend(plan.backend("memory"), ProcessRole(None, plan, None))
    assert backend.begin_kept(3) and backend.recording
    held = b"x" * (64 << 20)  # the job grows during step 3
    assert backend.end_kept(None) is None and len(held) and cuda.history == ["all", None]
    assert any("slow:keep records no more allocator history: step 3 grew the process by" in m for m in nrlprof_log)
    recorded_before = len(cuda.history)
    assert backend.begin_kept(4) and not backend.recording and len(cuda.history) == recorded_before
    record = backend.end_kept(Trigger(step=4, wall_ms=300.0, median_ms=100.0, factor=3.0))
    assert [Path(f).name.split(".")[-2:] for f in record.files] == [["memory", "json"]], "figures, no snapshot"
    assert [row["step"] for row in json.loads(Path(record.files[0]).read_text())["steps"]] == [4]


def test_slow_keep_within_the_host_budget_keeps_a_slow_steps_allocator_history(tmp_path, monkeypatch):
    cuda = RecordingCuda()
    monkeypatch.setattr("nrlprof.backends.memory.cuda_in_use", lambda: cuda)
    plan = plan_from_env({**KEEP, "NRL_MEMORY_PROFILE_DIR": str(tmp_path), "NRL_PROFILE_MAX_HOST_MB": "512"})
    backend = MemoryBackend(plan.backend("memory"), ProcessRole(None, plan, None))
    for step in (1, 2):
        backend.begin_kept(step)
        assert backend.end_kept(None) is None
    backend.begin_kept(3)
    record = backend.end_kept(Trigger(step=3, wall_ms=300.0, median_ms=100.0, factor=3.0))
    assert sorted(Path(f).suffix for f in record.files) == [".json", ".pickle"]
    assert cuda.history.count(None) == 3 and len(cuda.history) == 6, "history on and off once per step"
