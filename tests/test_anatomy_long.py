"""A job of 1,000 steps on a cluster whose GCS keeps fewer task events than the job makes: every step is kept."""

from __future__ import annotations

import time

import pytest
import ray
from helpers import clusters

from nrlprof.anatomy.events import fetch_raw_task_events
from nrlprof.tools.figures.anatomy import anatomy_summary

STEPS = 1000
WORKERS = 2
GCS_TASK_LIMIT = 1500  # the job makes STEPS * WORKERS = 2000 calls
CALL_S = 0.01


@pytest.fixture(scope="module")
def small_gcs_cluster():
    clusters.disconnect()  # the shared cluster stays up; this module's driver joins its own
    clusters.count_start("local, a module's own")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="WARNING",
        _system_config={"task_events_max_num_task_in_gcs": GCS_TASK_LIMIT},
    )
    yield ray
    ray.shutdown()


@ray.remote(num_cpus=0)
class ShortStep:
    def work(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


@pytest.mark.slow
def test_every_one_of_1000_steps_is_kept_though_the_gcs_drops_early_events(small_gcs_cluster, activate, tmp_path):
    nrlprof = activate(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(tmp_path))
    workers = [ShortStep.remote() for _ in range(WORKERS)]
    ray.get([w.__ray_ready__.remote() for w in workers])
    for step in range(1, STEPS + 1):
        nrlprof.step(step)
        ray.get([w.work.remote(CALL_S) for w in workers])
    nrlprof.finish()
    held = len(fetch_raw_task_events())
    assert held <= GCS_TASK_LIMIT + 10, f"the GCS held {held} task events: the test would not show a loss"
    model = anatomy_summary(tmp_path)
    assert model["incomplete_steps"] == [], "a read of the GCS came after it had let calls go"
    assert sorted(model["steps"], key=int) == [str(s) for s in range(1, STEPS + 1)]
    for label, step in model["steps"].items():
        assert [(p["worker"], p["method"], p["calls"], p["ranks"]) for p in step["phases"]] == [
            ("short_step", "work", WORKERS, list(range(WORKERS)))
        ], label
        assert step["phases"][0]["dur_ms"] >= 1000 * CALL_S - 1
