"""`nrlprof plan`: with --address, the live actors of a real local Ray cluster that the plan would profile; without,
the windows, nsys command and files it renders for the NRL_* variables, and a bad variable's exit code."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without


def plan_command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = environment_without("NRL_", "RAY_ADDRESS") | env
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


# ---- the plan rendered for NRL_* variables, run as the installed console script; no cluster ----

NRLPROF = Path(sys.executable).parent / "nrlprof"
EACH_NODE = "each node running a matched worker"


def plan(variables: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = environment_without("NRL_", "RAY_ADDRESS") | variables
    return subprocess.run([str(NRLPROF), "plan", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def plan_json(variables: dict[str, str], cwd: Path | None = None) -> list[dict]:
    done = plan(variables, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["backends"]


def option_value(command: str, name: str) -> str:
    """The value of `-o X` or `--name=X` in a shell command line."""
    argv = shlex.split(command)
    if name.startswith("--"):
        (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")]
        return value
    return argv[argv.index(name) + 1]


def test_plan_command_one_window_renders_stop_and_the_report_name():
    (nsys,) = plan_json({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"})
    assert nsys["kind"] == "nsys" and nsys["windows"] == ["3-4"]
    argv = shlex.split(nsys["command"])
    assert argv[:2] == ["nsys", "profile"]
    assert option_value(nsys["command"], "-t") == "cuda,nvtx"
    assert option_value(nsys["command"], "--capture-range") == "cudaProfilerApi"
    assert option_value(nsys["command"], "--capture-range-end") == "stop"
    output = option_value(nsys["command"], "-o")
    assert output.endswith("/logs/nsight/<worker>_3-4_%p")
    assert output.replace("<worker>", "dtensor_policy_worker").endswith("/dtensor_policy_worker_3-4_%p")
    # the worker's own interpreter, kept (not this CLI's: a worker may run a venv of its own)
    assert argv[-2:] == ["default_worker.py", "..."] and argv[-3] == "<python>"
    folder = output.rsplit("/", 1)[0]
    assert nsys["files"] == [{"node": EACH_NODE, "path": f"{folder}/<worker>_3-4_<pid>.nsys-rep"}]


def test_plan_command_two_windows_render_repeat_and_one_numbered_report_each():
    variables = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5,10"}
    (nsys,) = plan_json(variables)
    assert nsys["windows"] == ["3-4", "10"]
    assert option_value(nsys["command"], "--capture-range-end") == "repeat:2"
    output = option_value(nsys["command"], "-o")
    assert output.endswith("/<worker>_3-4_10_%p")
    folder = output.rsplit("/", 1)[0]
    assert [f["path"] for f in nsys["files"]] == [
        f"{folder}/<worker>_3-4_10_<pid>.1.nsys-rep",
        f"{folder}/<worker>_3-4_10_<pid>.2.nsys-rep",
    ]


def test_plan_command_text_output_shows_windows_command_and_files():
    variables = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5,10", "NRL_NSYS_RANKS": "0"}
    done = plan(variables)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # the table wraps lines to the terminal width
    assert "windows: 3-4, 10 " in text
    assert "--capture-range-end=repeat:2" in text and "<worker>_3-4_10_%p" in text
    assert "<worker>_3-4_10_<pid>.1.nsys-rep" in text and "<worker>_3-4_10_<pid>.2.nsys-rep" in text
    assert "*policy*" in text and "[0]" in text


def test_plan_command_torch_files_per_window_relative_dir_resolved_against_the_working_directory(tmp_path):
    variables = {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_TORCH_PROFILE_STEP_RANGE": "3:5,10",
        "NRL_TORCH_PROFILE_DIR": "traces",
        "NRL_TORCH_PROFILE_GZIP": "yes",
    }
    (torch,) = plan_json(variables, cwd=tmp_path)
    folder = tmp_path.resolve() / "traces"
    worker = f"{folder}/<worker>/<rank>/<worker>.rank<rank>"
    assert sorted(f["path"] for f in torch["files"]) == sorted(
        [
            f"{worker}.steps3-4.<pid>.pt.trace.json.gz",
            f"{worker}.steps10.<pid>.pt.trace.json.gz",
            f"{folder}/controller.steps3-4.<pid>.pt.trace.json.gz",
            f"{folder}/controller.steps10.<pid>.pt.trace.json.gz",
        ]
    )


def test_plan_command_rocprof_default_prefix():
    (rocprof,) = plan_json({"NRL_ROCPROF_WORKER_PATTERNS": "*policy*"})
    assert "ROCPROFSYS_OUTPUT_PREFIX=WORKER_rank0_" in shlex.split(rocprof["command"])
    (row,) = rocprof["files"]
    assert row["path"].endswith("/logs/rocprof_sys/<worker>_rank<rank>_*")


def test_plan_command_bad_variable_exits_2_naming_it():
    done = plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "5:3"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "NRL_NSYS_PROFILE_STEP_RANGE" in done.stderr and "5:3" in done.stderr
