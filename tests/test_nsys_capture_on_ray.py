"""nsys windows on a real local Ray cluster with the nsys stand-in: the reports nsys writes, what they hold, and
the manifest naming exactly those files."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from nsys_standin.report import read_report

WORKER = "dtensor_policy_worker"


def session_dir(ray) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


def nsys_records(ray, pid: int) -> list[dict]:
    (manifest,) = (session_dir(ray) / "logs" / "nrlprof").glob(f"manifest-*-{pid}.jsonl")
    records = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    return [r for r in records if r["backend"] == "nsys"]


def all_named_files_exist(ray) -> list[str]:
    """Files named by any manifest record of this session that do not exist."""
    missing = []
    for manifest in (session_dir(ray) / "logs" / "nrlprof").glob("manifest-*.jsonl"):
        for line in manifest.read_text().splitlines():
            missing += [f for f in json.loads(line).get("files", []) if not Path(f).exists()]
    return missing


def run_and_list(ray, nrlprof, worker, steps, nsight: Path, prefix: str) -> dict[int, list[str]]:
    """Drive the steps; after each, the files `<prefix>.*` that exist (the worker is alive throughout)."""
    seen = {}
    for step in steps:
        nrlprof.step(step)
        ray.get(worker.train.remote(step), timeout=300)
        seen[step] = sorted(p.name for p in nsight.glob(prefix + ".*"))
    return seen


def nrlprof_ranges(report: dict) -> list[str]:
    return sorted(r["message"] for r in report["nvtx_ranges"] if r["domain"] == "nrlprof")


def test_repeat_one_report_per_window_written_together_when_the_last_window_ends(ray_cluster, activate, tmp_path):
    """nsys 2025.3 (an H200) writes the reports of `repeat:K` when the K-th range ends, while the worker runs on."""
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2:4,6")
    worker = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    base = f"{WORKER}_2-3_6_{pid}"
    seen = run_and_list(ray_cluster, nrlprof, worker, range(1, 8), nsight, base)

    first, second = f"{base}.1.nsys-rep", f"{base}.2.nsys-rep"
    assert [seen[s] for s in range(1, 8)] == [[], [], [], [], [], [], [first, second]]
    assert ray_cluster.get(worker.pid.remote()) == pid, "the reports were written while the worker kept running"

    reports = [read_report(nsight / name) for name in (first, second)]
    assert [r["launched_pid"] for r in reports] == [pid, pid]
    assert nrlprof_ranges(reports[0]) == [
        f"{WORKER}.train [step 2]",
        f"{WORKER}.train [step 3]",
        "step 2",
        "step 3",
    ]
    assert nrlprof_ranges(reports[1]) == [f"{WORKER}.train [step 6]", "step 6"]
    assert all(r["end_ns"] is not None for report in reports for r in report["nvtx_ranges"])

    records = nsys_records(ray_cluster, pid)
    assert [(r["steps"], r["files"], r["status"]) for r in records] == [
        ([2, 3], [], "pending"),
        ([6], [str(nsight / second)], "ok"),
    ]
    assert f"{WORKER}_2-3_6_%p.<1>.nsys-rep when capture range 2 of `repeat:2` ends" in records[0]["message"]
    assert all_named_files_exist(ray_cluster) == []

    from nrlprof.tools.collect.collector import collect

    collect(tmp_path / "collected", session=session_dir(ray_cluster).name)
    collected = {p.name: p.read_bytes() for p in (tmp_path / "collected").rglob(f"{base}.*")}
    assert collected == {name: (nsight / name).read_bytes() for name in (first, second)}


def test_stop_one_window_one_report_without_a_number(ray_cluster, activate):
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="3")
    worker = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    base = f"{WORKER}_3_{pid}"
    seen = run_and_list(ray_cluster, nrlprof, worker, range(1, 6), nsight, base)

    assert [seen[s] for s in range(1, 6)] == [[], [], [], [f"{base}.nsys-rep"], [f"{base}.nsys-rep"]]
    report = read_report(nsight / f"{base}.nsys-rep")
    assert nrlprof_ranges(report) == [f"{WORKER}.train [step 3]", "step 3"]
    records = nsys_records(ray_cluster, pid)
    assert [(r["steps"], r["files"], r["status"]) for r in records] == [([3], [str(nsight / f"{base}.nsys-rep")], "ok")]


def test_discrete_one_report_per_call(ray_cluster, activate):
    from workload import DTensorPolicyWorker

    nrlprof = activate(
        NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2:4", NRL_NSYS_DISCRETE_METHODS="train"
    )
    worker = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    base = f"{WORKER}_2-3_{pid}"
    seen = run_and_list(ray_cluster, nrlprof, worker, range(1, 6), nsight, base)

    names = [f"{base}.1.nsys-rep", f"{base}.2.nsys-rep"]
    assert seen[5] == [], "nsys writes the reports of an unbounded `repeat` when the process exits"
    (record,) = nsys_records(ray_cluster, pid)
    assert (record["steps"], record["files"], record["status"]) == ([2, 3], [], "pending")
    assert f"{WORKER}_2-3_%p.<1, 2>.nsys-rep when this worker's process exits" in record["message"]
    ray_cluster.kill(worker)
    deadline = time.monotonic() + 60
    while sorted(p.name for p in nsight.glob(base + ".*")) != names and time.monotonic() < deadline:
        time.sleep(0.2)
    reports = [read_report(nsight / name) for name in names]
    assert [nrlprof_ranges(r) for r in reports] == [[f"{WORKER}.train [step 2]"], [f"{WORKER}.train [step 3]"]]


def test_failed_import_is_reported_and_no_report_is_claimed(ray_cluster, activate):
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    worker = DTensorPolicyWorker.options(runtime_env={"env_vars": {"NRLPROF_STANDIN_IMPORT_FAIL": "1"}}).remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    base = f"{WORKER}_2_{pid}"
    seen = run_and_list(ray_cluster, nrlprof, worker, range(1, 4), nsight, base)

    assert seen[3] == [f"{base}.qdstrm"]
    (record,) = nsys_records(ray_cluster, pid)
    assert record["status"] == "import-failed"
    assert not any(f.endswith(".nsys-rep") for f in record["files"])
    assert all_named_files_exist(ray_cluster) == []


def wait_until_gone(pid: int) -> None:
    deadline = time.monotonic() + 120
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still runs")
        time.sleep(0.1)


def test_worker_killed_inside_a_window_leaves_no_report_and_none_is_claimed(ray_cluster, activate, calls):
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2:4")
    survivor, victim = DTensorPolicyWorker.remote(), DTensorPolicyWorker.remote()
    pids = ray_cluster.get([survivor.pid.remote(), victim.pid.remote()], timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    for step in (1, 2):
        nrlprof.step(step)
        ray_cluster.get([survivor.train.remote(step), victim.train.remote(step)], timeout=300)
    # Killed from outside, as the OOM killer or Ray's teardown does: the capture dies with the process.
    os.kill(pids[1], signal.SIGKILL)
    (victim_call,) = [r for r in calls() if r["pid"] == pids[1]]
    wait_until_gone(victim_call["nsys_pid"])
    for step in (3, 4):
        nrlprof.step(step)
        ray_cluster.get(survivor.train.remote(step), timeout=300)

    assert sorted(p.name for p in nsight.glob(f"{WORKER}_2-3_{pids[1]}.*")) == []
    assert sorted(p.name for p in nsight.glob(f"{WORKER}_2-3_{pids[0]}.*")) == [f"{WORKER}_2-3_{pids[0]}.nsys-rep"]
    assert all_named_files_exist(ray_cluster) == []


def test_wrapper_interpreter_reports_are_named_after_the_wrapper_and_recorded(ray_cluster, activate, calls, tmp_path):
    from workload import DTensorPolicyWorker

    wrapper = tmp_path / "uv-like"
    program = Path(__file__).parent / "programs" / "uv_like_wrapper.py"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.join([sys.executable, str(program), sys.executable])} "$@"\n')
    wrapper.chmod(0o755)
    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    worker = DTensorPolicyWorker.options(runtime_env={"py_executable": str(wrapper)}).remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    (launched,) = [r["pid"] for r in calls() if r["command"][0] == str(wrapper)]
    assert launched != pid
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    seen = run_and_list(ray_cluster, nrlprof, worker, range(1, 4), nsight, f"{WORKER}_2_{launched}")

    report = f"{WORKER}_2_{launched}.nsys-rep"
    assert seen[3] == [report]
    assert list(nsight.glob(f"{WORKER}_2_{pid}.*")) == [], "nothing is named after the interpreter under the wrapper"
    assert nrlprof_ranges(read_report(nsight / report)) == [f"{WORKER}.train [step 2]", "step 2"]
    (record,) = nsys_records(ray_cluster, pid)
    assert (record["files"], record["status"]) == ([str(nsight / report)], "ok")


def test_children_open_their_own_ranges_in_the_workers_nsys_session(ray_cluster, activate):
    from engine_shapes import VllmGenerationWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*vllm*", NRL_NSYS_PROFILE_STEP_RANGE="2:4,6")
    worker = VllmGenerationWorker.remote("spawn")
    pid, engine_pid = ray_cluster.get([worker.pid.remote(), worker.engine_pid.remote()], timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    base = f"vllm_generation_worker_2-3_6_{pid}"
    for step in range(1, 8):
        nrlprof.step(step)
        ray_cluster.get(worker.generate.remote(step), timeout=300)

    names = [f"{base}.1.nsys-rep", f"{base}.2.nsys-rep"]
    assert sorted(p.name for p in nsight.glob(f"vllm_generation_worker_*_{pid}*")) == names, "one report per window"
    for name, steps in zip(names, ([2, 3], [6]), strict=True):
        report = read_report(nsight / name)
        ranges = {r["pid"]: r for r in report["process_ranges"]}
        assert sorted(ranges) == sorted([pid, engine_pid]), "the worker's range and the child's own"
        assert {r["stopped_by"] for r in ranges.values()} == {"cudaProfilerStop"}
        assert report["stop_caller"]["pid"] == pid, "the worker's stop, the last, wrote the report"
        engine = sorted(r["message"] for r in report["nvtx_ranges"] if r["pid"] == engine_pid)
        assert engine == [f"engine.generate.{s}" for s in steps], "the child's own work, of the window's steps only"
        step_ranges = [r for r in report["nvtx_ranges"] if r["domain"] == "nrlprof" and r["message"].startswith("step")]
        assert {r["pid"] for r in step_ranges} == {pid}, "steps are marked once, by the worker"

    (manifest,) = (session_dir(ray_cluster) / "logs" / "nrlprof").glob(f"manifest-*-{pid}.jsonl")
    records = [json.loads(line) for line in manifest.read_text().splitlines()]
    child = [r for r in records if r["worker"] == "vllm_generation_worker.engine_core_0"]
    assert [(r["pid"], r["steps"], r["files"], r["status"]) for r in child] == [
        (engine_pid, [2, 3], [], "pending"),
        (engine_pid, [6], [str(nsight / names[1])], "ok"),
    ], "the reports of `repeat:2` are written together when the second window ends"
    assert all_named_files_exist(ray_cluster) == []


def test_a_child_killed_inside_a_window_does_not_hold_the_report(ray_cluster, activate):
    from engine_shapes import VllmGenerationWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*vllm*", NRL_NSYS_PROFILE_STEP_RANGE="2:4")
    worker = VllmGenerationWorker.remote("spawn")
    pid, engine_pid = ray_cluster.get([worker.pid.remote(), worker.engine_pid.remote()], timeout=180)
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    for step in (1, 2):
        nrlprof.step(step)
        ray_cluster.get(worker.generate.remote(step), timeout=300)
    os.kill(engine_pid, signal.SIGKILL)
    for step in (3, 4):
        nrlprof.step(step)
        ray_cluster.get(worker.pid.remote(), timeout=300)

    report = read_report(nsight / f"vllm_generation_worker_2-3_{pid}.nsys-rep")
    assert {r["pid"]: r["stopped_by"] for r in report["process_ranges"]} == {
        pid: "cudaProfilerStop",
        engine_pid: "exit",
    }
    (manifest,) = (session_dir(ray_cluster) / "logs" / "nrlprof").glob(f"manifest-*-{pid}.jsonl")
    records = {r["worker"]: r for r in map(json.loads, manifest.read_text().splitlines())}
    assert records["vllm_generation_worker"]["status"] == "ok"
    assert (
        records["vllm_generation_worker.engine_core_0"]["status"],
        records["vllm_generation_worker.engine_core_0"]["files"],
    ) == ("exited", [])
