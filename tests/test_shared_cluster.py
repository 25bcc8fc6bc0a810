"""The suite's shared Ray cluster: what one test leaves on it does not reach the next, and a command run in a
process already on it does not wander to another."""

from __future__ import annotations

import os

import pytest
from helpers import clusters


def test_the_actors_a_test_leaves_are_killed_after_it(ray_cluster):
    @ray_cluster.remote(num_cpus=0)
    class LeftBehind:
        def ping(self) -> int:
            return 1

    before = clusters.alive_actor_ids()
    left = LeftBehind.remote()
    assert ray_cluster.get(left.ping.remote(), timeout=300) == 1
    new = clusters.alive_actor_ids() - before
    assert len(new) == 1
    [killed] = clusters.kill_actors(new)
    assert killed.endswith("LeftBehind")
    with pytest.raises(ray_cluster.exceptions.RayActorError):
        ray_cluster.get(left.ping.remote(), timeout=300)


def test_the_clusters_settings_stay_with_its_processes(ray_cluster, stand_in_env):
    """The raylet got the stand-in tools and their log; the test process keeps its own PATH."""
    assert stand_in_env["bin"].as_posix() not in os.environ["PATH"].split(os.pathsep)
    assert "NRLPROF_FAKE_TOOL_LOG" not in os.environ


def test_a_joining_driver_keeps_the_environment_it_is_given(ray_cluster):
    address = ray_cluster.get_runtime_context().gcs_address
    given = clusters.joining_env(address, {"NRL_TORCH_PROFILE_STEP_RANGE": "2"})
    assert given["NRL_TORCH_PROFILE_STEP_RANGE"] == "2" and given["RAY_ADDRESS"] == address
    assert not any(name.startswith("NRL_") for name in clusters.joining_env(address))


def test_a_command_run_in_a_process_on_the_cluster_refuses_an_address_naming_another(ray_cluster):
    """nrlprof's commands join the cluster they are given: a driver already on one keeps it for `--address` of the
    same cluster (or none) and refuses one naming another, rather than reading the wrong cluster."""
    from nrlprof.tools.cluster import BadInput, connect

    joined = ray_cluster.get_runtime_context().gcs_address
    assert connect(None) is False
    assert connect(joined) is False
    with pytest.raises(BadInput) as refused:
        connect("127.0.0.1:1")
    assert joined in str(refused.value) and "'127.0.0.1:1'" in str(refused.value)
    assert ray_cluster.is_initialized() and ray_cluster.get_runtime_context().gcs_address == joined
