"""Allocator snapshots the viewer opens, on CPU: pickle protocol 4, Python stacks unless NRL_MEMORY_PROFILE_STACKS
says `all`, and a snapshot of 1 GB or more named in the log with what to change. (A CUDA process's own snapshot
is for a device run.)"""

from __future__ import annotations

import pickle
import pickletools

import pytest

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.memory import MemoryBackend
from nrlprof.backends.memory_snapshot import history_options, say_if_too_big, write_snapshot
from nrlprof.config.env import plan_from_env
from nrlprof.errors import ConfigError

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
    assert history_options(backend.max_entries, backend.stacks) == {"max_entries": 100_000, "stacks": "python"}
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
