"""A worker's channel to its child processes, without Ray: registration, late and dead children, what the worker's
environment gives its children and takes back, how children are named, which processes join; the children of a
worker no pattern matched, which take the backend of a window asked for when it is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without

from nrlprof.process import patches
from nrlprof.runtime.children.join import FORKSERVER, SPAWNED_FLAG, multiprocessing_helper

PROGRAMS = Path(__file__).parent / "programs"


def test_late_and_dead_children_are_recorded_and_the_environment_is_given_back(tmp_path):
    env = environment_without("NRL", "RAY_")
    program = str(PROGRAMS / "children_late_and_dead.py")
    result = subprocess.run([sys.executable, program, str(tmp_path / "memory")], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    stopped, killed = out["pids"]

    channel = json.loads(out["environment"]["NRLPROF_CHANNEL"])
    assert channel["address"].startswith("@nrlprof-")
    assert out["environment"]["PYTHONPATH"].split(os.pathsep)[0].endswith(os.path.join("children", "site"))
    assert out["restored"], "nrlprof.disable() gives the worker's environment back"

    assert out["first_window_s"] < 6, "a stopped child is waited on once, for NRL_PROFILE_TIMEOUT_S=1"
    assert "did not answer" in result.stderr
    worker = [(r["window"], r["status"], r["steps"]) for r in out["records"] if r["worker"] == "vllm_generation_worker"]
    assert worker == [("1-3", "ok", [1, 2, 3]), ("5-6", "ok", [5, 6])]
    by_child = {(r["pid"], r["window"]): r for r in out["records"] if r["pid"] in (stopped, killed)}
    late = by_child[(stopped, "1-3")]
    assert (late["worker"], late["rank"], late["status"]) == ("vllm_generation_worker.engine_core_0", 3, "late")
    assert by_child[(killed, "1-3")]["status"] == "ok"
    assert by_child[(stopped, "5-6")]["status"] == "ok", "a new window: the child caught up and is not late"
    gone = by_child[(killed, "5-6")]
    assert (gone["worker"], gone["status"], gone["files"]) == ("vllm_generation_worker.engine_core_1", "exited", [])
    assert gone["steps"] == [5], "the steps it was in: killed in step 5, found gone when step 6 began"
    written = [p.name for p in (tmp_path / "memory" / "vllm_generation_worker.engine_core_1" / "3").iterdir()]
    assert written == [f"vllm_generation_worker.engine_core_1.rank3.steps1-3.{killed}.memory.json"]


def test_an_undoable_patch_is_named_and_reverted():
    state = {"on": False}

    def apply():
        state["on"] = True
        return lambda: state.update(on=False)

    patches.install_undoable("test: a switch", apply)
    patches.install_undoable("test: a switch", apply)
    assert state["on"] and "test: a switch" in patches.installed()
    patches.uninstall_all(keep=("test: a switch",))
    assert state["on"]
    patches.uninstall("test: a switch")
    assert not state["on"] and "test: a switch" not in patches.installed()


@pytest.mark.parametrize(
    ("argv", "helper"),
    [
        (["python", "-c", "from multiprocessing.forkserver import main; main(3, 4, [], **{})"], FORKSERVER),
        (["python", "-c", "from multiprocessing.resource_tracker import main;main(5)"], "resource_tracker"),
        (["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(7)", SPAWNED_FLAG], None),
        (["python", "engine.py"], None),
    ],
)
def test_multiprocessing_helpers_are_told_from_the_processes_they_serve(argv, helper):
    assert multiprocessing_helper(argv) == helper


def test_a_child_is_named_by_its_multiprocessing_name_else_its_title_else_its_executable(tmp_path):
    program = str(PROGRAMS / "child_names.py")
    result = subprocess.run([sys.executable, program], capture_output=True, text=True, timeout=300, check=True)
    executable = Path(sys.executable).name
    assert result.stdout.split() == [executable, "engine_core_proc", "engine_core_0"]


def test_children_of_an_unmatched_worker_wait_for_the_backend_a_window_asked_for_sends(tmp_path):
    """A child with no plan and no worker in its environment (its worker matched no pattern) joins, answers window
    actions with nothing, then takes the backend and the worker an `enable` line names; one that registers after
    the line gets it as it registers."""
    import time

    from nrlprof.config.env import load_plan
    from nrlprof.launch.runtime_env import worker_descriptor
    from nrlprof.runtime.children.channel import SITE_DIR, ChildChannel
    from nrlprof.runtime.children.protocol import Enable
    from nrlprof.runtime.windows.profiler import START, STOP, Action
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import match_worker

    lost: list = []
    channel = ChildChannel("", 0, "", 30.0, None)
    checkout = str(Path(__file__).resolve().parent.parent)
    env = environment_without("NRL", "RAY_")
    env.update(NRLPROF_CHANNEL=json.dumps({"address": channel.address}), NRLPROF_PARENT="1",
               PYTHONPATH=os.pathsep.join([str(SITE_DIR), checkout]))  # fmt: skip
    children = []
    waiting_child = [sys.executable, str(PROGRAMS / "waiting_child.py")]

    def start_child(count: int) -> None:
        children.append(subprocess.Popen(waiting_child, env=env, stdin=subprocess.PIPE))
        deadline = time.monotonic() + 60
        while len(channel) < count:
            assert time.monotonic() < deadline, "the child registered"
            time.sleep(0.05)

    def act(*actions: Action) -> list[dict]:
        with channel.acting:
            return [record.as_dict() for record in channel.fanout.collect(channel.fanout.post(actions))]

    try:
        start_child(1)
        assert act(Action("memory", START, 1, 1, 1, asked="r0"), Action("memory", STOP)) == []
        plan = load_plan({"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*generation*", "NRL_MEMORY_PROFILE_STEP_RANGE": "1",
                          "NRL_MEMORY_PROFILE_DIR": str(tmp_path / "memory")})  # fmt: skip
        identity = WorkerIdentity("VllmGenerationWorker", None, 3)
        descriptor = worker_descriptor(identity, match_worker(plan, identity))
        channel.bind(identity.name, identity.rank, "", lost.append)
        channel.enable(Enable(plan.to_json(), descriptor, "memory", None, ""))
        start_child(2)
        records = act(Action("memory", START, 4, 5, 4, asked="r1"))
        records += act(Action("memory", STOP))
    finally:
        for child in children:
            child.communicate(b"\n", timeout=60)
        channel.close()
    assert sorted(r["pid"] for r in records) == sorted(c.pid for c in children)
    for record in records:
        assert (record["worker"], record["rank"], record["window"]) == ("vllm_generation_worker.python", 3, "4-5")
        assert (record["status"], record["asked"]) == ("ok", "r1")
    written = tmp_path / "memory" / "vllm_generation_worker.python" / "3"
    assert len(list(written.glob("*.memory.json"))) == 2
    assert lost == [], "no child was lost"


def test_a_child_killed_after_a_stop_before_its_trace_is_final_is_recorded_as_died_after_the_window(tmp_path):
    torch_dir = tmp_path / "traces"
    env = environment_without("NRL", "RAY_")
    result = subprocess.run([sys.executable, str(PROGRAMS / "child_dies_after_stop.py"), str(torch_dir)], env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    child = out["pid"]

    (died,) = [r for r in out["records"] if r["pid"] == child and r["status"] == "died"]
    named = (died["worker"], died["rank"], died["backend"], died["window"])
    assert named == ("vllm_generation_worker.engine_core_0", 3, "torch", "1-2")
    assert died["steps"] == [1, 2] and died["files"] == []
    assert "died after window 1-2 stopped" in died["message"], died["message"]
    assert not list((torch_dir / "vllm_generation_worker.engine_core_0").rglob("*.json*")), "its trace never came"
    (manifest,) = (torch_dir / ".nrlprof").glob("manifest-*.jsonl")
    written = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r for r in written if r["pid"] == child and r["status"] == "died"] == [died], "the worker wrote it"
