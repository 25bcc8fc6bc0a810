"""`nrlprof.configure(cfg)` after verl is imported: verl's modules are patched at once, also the copy of
`create_colocated_worker_cls` that verl's trainer module imported by name, so a role selects the colocated
`WorkerDict` ranks that host it, as the same section does through NRL_PROFILE_CONFIG."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without
from helpers.trace_reading import load_trace, marker_steps, traces_under

HERE = Path(__file__).parent
TESTS = HERE.parent
pytestmark = pytest.mark.framework


def test_configure_after_verl_is_imported_selects_the_ranks_hosting_the_role(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    env = environment_without("NRL_", "NRLPROF_", "RAY_ADDRESS")
    env |= {"NRL_TORCH_PROFILE_DIR": str(traces), "NRL_STEP_ANATOMY": "0", "PYTHONPATH": f"{HERE}:{TESTS}",
            "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}  # fmt: skip
    address = ray_cluster.get_runtime_context().gcs_address
    job = [sys.executable, str(HERE / "late_configure_job.py"), address]
    result = subprocess.run(job, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    late = [line for line in result.stderr.splitlines() if "nrlprof was configured after verl was imported" in line]
    assert len(late) == 1 and "configure() before the job creates its workers" in late[0]
    assert "started in 2 worker(s)" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / "worker_dict-actor_rollout-critic" / str(rank))
        assert marker_steps(load_trace(trace), "rollout.generate.") == {2, 3}
