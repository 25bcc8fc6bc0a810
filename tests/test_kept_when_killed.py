"""What a killed worker leaves, without a cluster: memory figures written step by step, and Ray's death cause read
into the record that names the window the worker died in."""

from __future__ import annotations

import json
from pathlib import Path

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.memory import MemoryBackend
from nrlprof.config.env import plan_from_env
from nrlprof.config.steps import Window
from nrlprof.runtime.windows.deaths import DIED, OpenWindow, death_cause, died_record
from nrlprof.workers.identity import WorkerIdentity


def memory_backend(tmp_path) -> MemoryBackend:
    plan = plan_from_env(
        {
            "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*",
            "NRL_MEMORY_PROFILE_STEP_RANGE": "2:8",
            "NRL_MEMORY_PROFILE_DIR": str(tmp_path / "memory"),
        }
    )
    identity = WorkerIdentity("DTensorPolicyWorker", None, 1)
    return MemoryBackend(plan.backend("memory"), ProcessRole(identity, plan, None))


def test_memory_figures_are_on_disk_as_each_step_ends_before_the_window_closes(tmp_path):
    backend = memory_backend(tmp_path)
    backend.start_window(Window(2, 7), 2)
    assert not list((tmp_path / "memory").rglob("*.json")), "no step has ended yet"
    for step in (3, 4, 5):
        backend.mark_step(step)
    # the process is killed here, in step 5: what it wrote stays
    (figures,) = (tmp_path / "memory").rglob("*.memory.json")
    document = json.loads(figures.read_text())
    assert [s["step"] for s in document["steps"]] == [2, 3, 4]
    assert document["nrlprof"]["window"] == "2-7" and document["nrlprof"]["rank"] == 1
    assert not list(figures.parent.glob(".*.partial")), "each write replaces the file whole"

    record = backend.stop_window()
    assert record.files == (str(figures),)
    assert [s["step"] for s in json.loads(figures.read_text())["steps"]] == [2, 3, 4, 5]


def test_a_window_stopped_at_once_still_has_its_figures_file(tmp_path):
    backend = memory_backend(tmp_path)
    backend.start_window(Window(2, 2), 2)
    record = backend.stop_window()
    (figures,) = record.files
    assert [s["step"] for s in json.loads(Path(figures).read_text())["steps"]] == [2]


def test_rays_death_cause_gives_the_pid_the_node_and_the_exit_detail():
    from ray.core.generated.common_pb2 import ActorDiedErrorContext
    from ray.exceptions import ActorDiedError

    detail = (
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2. End of file."
    )
    context = ActorDiedErrorContext(
        class_name="DTensorPolicyWorker", actor_id=b"\x01" * 16, pid=4242, node_ip_address="10.0.0.7",
        error_message=detail,
    )  # fmt: skip
    death = death_cause(ActorDiedError(context))
    assert (death.pid, death.ip, death.cause) == (4242, "10.0.0.7", detail)

    window = OpenWindow("2-7", [2, 3, 4, 5], 100.0)
    record = died_record("memory", "dtensor_policy_worker", 1, window, death, 6, "10.0.0.1")
    assert (record.status, record.pid, record.host, record.node_ip, record.steps) == (
        DIED, 4242, "10.0.0.7", "10.0.0.7", (2, 3, 4, 5))  # fmt: skip
    assert record.message == (
        f"the worker died during window 2-7 (found dead at step 6; its last step sent was 5): {detail}"
    )


def test_a_death_ray_gives_no_context_for_is_still_said():
    from ray.exceptions import ActorDiedError

    death = death_cause(ActorDiedError())
    assert death.pid is None and death.ip == "" and death.cause == "ActorDiedError"
