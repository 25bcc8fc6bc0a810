"""`nrlprof.configure(cfg)` after verl is imported: verl's modules are patched at once, also the copy of
`create_colocated_worker_cls` that verl's trainer module imported by name, so a role selects the colocated
`WorkerDict` ranks that host it, as the same section does through NRL_PROFILE_CONFIG."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.environment import environment_without
from helpers.trace_reading import load_trace, marker_steps, traces_under

HERE = Path(__file__).parent
TESTS = HERE.parent
pytestmark = pytest.mark.framework

LATE_JOB = """
import sys, ray
sys.path[:0] = [{here!r}, {tests!r}]
import verl.trainer.ppo.ray_trainer as ray_trainer
from verl.single_controller.ray.base import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from verl_workers import ActorRolloutRefWorker, CriticWorker, bare_trainer, train

import nrlprof

nrlprof.configure({{
    "global_profiler": {{"tool": "torch", "steps": [2, 3]}},
    "actor_rollout_ref": {{"actor": {{"profiler": {{"enable": True, "all_ranks": True, "tool": "torch"}}}}}},
}})
ray.init(address=sys.argv[1])
roles = {{"actor_rollout": RayClassWithInitArgs(cls=ray.remote(ActorRolloutRefWorker)),
          "critic": RayClassWithInitArgs(cls=ray.remote(CriticWorker))}}
pool = RayResourcePool(process_on_nodes=[2], use_gpu=False, max_colocate_count=1)
fused = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=ray_trainer.create_colocated_worker_cls(class_dict=roles))
groups = fused.spawn(prefix_set=roles.keys())
train(bare_trainer(groups), groups, steps=4)
nrlprof.finish()
"""


def test_configure_after_verl_is_imported_selects_the_ranks_hosting_the_role(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(LATE_JOB.format(here=str(HERE), tests=str(TESTS))))
    env = environment_without("NRL_", "NRLPROF_", "RAY_ADDRESS")
    env |= {"NRL_TORCH_PROFILE_DIR": str(traces), "NRL_STEP_ANATOMY": "0", "PYTHONPATH": f"{HERE}:{TESTS}",
            "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}  # fmt: skip
    address = ray_cluster.get_runtime_context().gcs_address
    result = subprocess.run([sys.executable, str(script), address], env=env, capture_output=True, text=True,
                            timeout=900, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    late = [line for line in result.stderr.splitlines() if "nrlprof was configured after verl was imported" in line]
    assert len(late) == 1 and "configure() before the job creates its workers" in late[0]
    assert "started in 2 worker(s)" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / "worker_dict-actor_rollout-critic" / str(rank))
        assert marker_steps(load_trace(trace), "rollout.generate.") == {2, 3}
