"""`nrlprof plan --address`: the live actors of a real local Ray cluster that the plan would profile."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def plan_command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "RAY_ADDRESS"))} | env
    return subprocess.run([sys.executable, "-m", "nrlprof", "plan", *args], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip


class PolicyWorker:
    def ready(self) -> bool:
        return True


class RewardModel:
    def ready(self) -> bool:
        return True


@pytest.fixture(scope="module")
def live_actors(ray_cluster):
    policy, reward = (ray_cluster.remote(num_cpus=0)(cls) for cls in (PolicyWorker, RewardModel))
    actors = [policy.remote(), policy.remote(), reward.remote()]
    ray_cluster.get([a.ready.remote() for a in actors])
    yield ray_cluster.get_runtime_context().gcs_address
    for actor in actors:
        ray_cluster.kill(actor)


def test_plan_matches_the_live_actors_of_a_running_cluster(live_actors):
    variables = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "3:5"}
    # Ray 2.60 started the cluster with token auth; with an explicit address a client opts in (Ray's rule)
    token_auth = {"RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
    done = plan_command(variables | token_auth, "--address", live_actors, "--json")
    assert done.returncode == 0, done.stderr
    live = json.loads(done.stdout)["live"]
    # two PolicyWorker actors match '*policy*' (as policy_worker, ranks by creation); RewardModel does not
    assert sorted((row["worker"], row["rank"], row["backend"]) for row in live) == [
        ("policy_worker", 0, "torch"),
        ("policy_worker", 1, "torch"),
    ]
    assert all(row["pattern"] == "*policy*" for row in live)


def test_plan_with_no_cluster_at_the_address_is_bad_input(tmp_path):
    variables = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "3:5"}
    done = plan_command(variables, "--address", "127.0.0.1:1")
    assert done.returncode == 2
    assert done.stderr.startswith("nrlprof plan: ") and done.stderr.count("\n") == 1
    assert "127.0.0.1:1" in done.stderr and "Traceback" not in done.stderr
