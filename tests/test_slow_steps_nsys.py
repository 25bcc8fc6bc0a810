"""nsys windows that slow steps open (NRL_NSYS_PROFILE_STEP_RANGE=slow), on the shared local cluster with the nsys
stand-in: the matched workers run in an nsys session of their own, named as nrlprof's; each window starts a collection
in it and is its own report; a teardown sweep of another process (`nsys sessions list`, then `nsys shutdown` of each
session, as NeMo RL's vLLM backend stops every session on a node) ends the session during a window, and the window's
record says so."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

WORKER = "dtensor_policy_worker"


def session_dir(ray) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


def sweep(nsys: Path) -> list[str]:
    """Another process stops every nsys session on the node."""
    listed = subprocess.run([str(nsys), "sessions", "list", "--show-header=false"], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    names = [line.split()[-1] for line in listed.splitlines() if line.strip()]
    for name in names:
        subprocess.run([str(nsys), "shutdown", f"--session={name}"], check=True, capture_output=True)
    return names


def test_a_slow_step_opens_an_nsys_window_and_a_sweep_that_ends_the_session_is_said(
    ray_cluster, activate, calls, stand_in_env, nrlprof_log
):
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="slow",
                       NRL_PROFILE_SLOW_FACTOR="3")  # fmt: skip
    policy = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(policy.pid.remote(), timeout=180)
    (launch,) = [r for r in calls() if r["pid"] == pid]
    (session,) = [o.partition("=")[2] for o in launch["options"] if o.startswith("--session-new=nrlprof-")]
    swept = []
    for step in range(1, 27):
        nrlprof.step(step)
        if step == 23:  # inside the second window
            swept = sweep(stand_in_env["bin"] / "nsys")
        time.sleep(0.1 + (1.2 if step in (8, 22) else 0.0))
        ray_cluster.get(policy.train.remote(step), timeout=300)
    nrlprof.finish()
    assert session in swept
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    manifests = (session_dir(ray_cluster) / "logs" / "nrlprof").glob("manifest-*.jsonl")
    records = sorted((json.loads(line) for m in manifests for line in m.read_text().splitlines()
                      if '"nsys"' in line and f'"pid": {pid}' in line), key=lambda r: int(r["window"]))  # fmt: skip
    first, second = records
    assert (first["window"], first["status"], first["trigger"]["step"]) == ("9", "ok", 8)
    assert first["files"] == [str(nsight / f"{WORKER}_slow_{pid}.1.nsys-rep")]
    assert (second["window"], second["status"], second["trigger"]["step"]) == ("23", "missing", 22)
    assert f"the nsys session {session} this worker was launched in is gone: another process stopped it" in \
        second["message"] and "NeMo RL #4090" in second["message"]  # fmt: skip
    starts = [r for r in calls() if r.get("subcommand") == "start" and r["pid"] == pid]
    assert len(starts) == 2 and all(f"--session={session}" in r["options"] for r in starts)
    started = [m for m in nrlprof_log if "nsys window" in m and "started in 1 worker(s)" in m]
    assert len(started) == 2 and not any("controller" in m for m in started), "the controller is not under nsys"


def test_a_slow_steps_nsys_window_under_an_interpreter_wrapper_is_named_and_recorded(
    ray_cluster, activate, calls, tmp_path
):
    """Under Ray's uv hook (`py_executable` a wrapper like `uv run python`), nsys launches the wrapper, and %p would be
    its pid: the collection a slow step starts is named by the worker itself, after its own pid (README, "Profile a job
    that is already running"), and its record names that file."""
    from workload import DTensorPolicyWorker

    wrapper = tmp_path / "uv-like"
    program = Path(__file__).parent / "programs" / "uv_like_wrapper.py"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.join([sys.executable, str(program), sys.executable])} "$@"\n')
    wrapper.chmod(0o755)
    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="slow",
                       NRL_PROFILE_SLOW_FACTOR="3")  # fmt: skip
    policy = DTensorPolicyWorker.options(runtime_env={"py_executable": str(wrapper)}).remote()
    pid = ray_cluster.get(policy.pid.remote(), timeout=180)
    (launched,) = [r["pid"] for r in calls() if r["command"][0] == str(wrapper)]
    assert launched != pid
    for step in range(1, 12):
        nrlprof.step(step)
        time.sleep(0.1 + (1.2 if step == 8 else 0.0))
        ray_cluster.get(policy.train.remote(step), timeout=300)
    nrlprof.finish()
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    manifests = (session_dir(ray_cluster) / "logs" / "nrlprof").glob("manifest-*.jsonl")
    (record,) = [json.loads(line) for m in manifests for line in m.read_text().splitlines()
                 if '"nsys"' in line and f'"pid": {pid}' in line]  # fmt: skip
    report = nsight / f"{WORKER}_slow_{pid}.1.nsys-rep"
    assert (record["window"], record["status"], record["trigger"]["step"]) == ("9", "ok", 8)
    assert record["files"] == [str(report)] and report.exists()
    assert list(nsight.glob(f"{WORKER}_slow_{launched}.*")) == [], "nothing is named after the wrapper"
