"""README promises on a real local Ray cluster: the torch switches in the written traces, the timeout, the log
level, a relative trace directory, concurrent creation, rocprof's default prefix, a step that goes back."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.environment import environment_without
from helpers.timing import CLOCK_SLACK_S
from helpers.trace_reading import load_trace, marker_steps, traces_under

from nrlprof.launch.runtime_env import parse_worker_descriptor

PROGRAMS = Path(__file__).parent / "programs"
WORKER = "dtensor_policy_worker"
SWITCHES = (
    "NRL_TORCH_PROFILE_RECORD_SHAPES",
    "NRL_TORCH_PROFILE_MEMORY",
    "NRL_TORCH_PROFILE_WITH_STACK",
    "NRL_TORCH_PROFILE_WITH_FLOPS",
    "NRL_TORCH_PROFILE_GZIP",
)


def drive(ray, nrlprof, worker, steps) -> None:
    for step in steps:
        nrlprof.step(step)
        ray.get(worker.train.remote(step), timeout=180)


def trace_of_one_window(ray, activate, directory: Path, **switches: str) -> tuple[Path, dict]:
    from workload import DTensorPolicyWorker

    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2",
        NRL_TORCH_PROFILE_DIR=str(directory),
        **switches,
    )
    worker = DTensorPolicyWorker.remote()
    drive(ray, nrlprof, worker, range(1, 4))
    nrlprof.finish()
    (path,) = traces_under(directory / WORKER / "0")
    trace = load_trace(path)
    assert marker_steps(trace, "policy.train.") == {2}
    return path, trace


def has_shapes(trace: dict) -> bool:
    return any("Input Dims" in e.get("args", {}) for e in trace["traceEvents"])


def has_memory(trace: dict) -> bool:
    return any(e.get("name") == "[memory]" for e in trace["traceEvents"])


def has_stack(trace: dict) -> bool:
    return any(e.get("cat") == "python_function" for e in trace["traceEvents"])


def test_torch_switches_on_show_in_the_trace_a_worker_writes(ray_cluster, activate, tmp_path):
    path, trace = trace_of_one_window(ray_cluster, activate, tmp_path, **dict.fromkeys(SWITCHES, "1"))
    assert path.name.endswith(".pt.trace.json.gz")
    assert has_shapes(trace) and has_stack(trace)


def test_torch_switches_off_leave_the_trace_plain(ray_cluster, activate, tmp_path):
    path, trace = trace_of_one_window(ray_cluster, activate, tmp_path, **dict.fromkeys(SWITCHES, "0"))
    assert path.name.endswith(".pt.trace.json")
    assert not has_shapes(trace) and not has_stack(trace) and not has_memory(trace)


def test_torch_flops_switch_alone_records_the_shapes_flops_are_counted_from(ray_cluster, activate, tmp_path):
    # torch computes flops from input shapes; a CPU trace carries the shapes but no flops figure
    _, trace = trace_of_one_window(ray_cluster, activate, tmp_path, NRL_TORCH_PROFILE_WITH_FLOPS="1")
    assert has_shapes(trace) and not has_stack(trace)


def test_torch_memory_switch_writes_memory_events(ray_cluster, activate, tmp_path):
    _, trace = trace_of_one_window(ray_cluster, activate, tmp_path, NRL_TORCH_PROFILE_MEMORY="1")
    assert has_memory(trace), "NRL_TORCH_PROFILE_MEMORY=1 gives no [memory] events in the worker's trace"


def test_a_worker_busier_than_the_timeout_is_not_waited_on_beyond_it(ray_cluster, activate, tmp_path):
    from worker_shapes import BusyWorker

    timeout_s = 2.0
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*busy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2",
        NRL_TORCH_PROFILE_DIR=str(tmp_path),
        NRL_PROFILE_TIMEOUT_S=str(timeout_s),
    )
    worker = BusyWorker.remote()
    ray_cluster.get(worker.pid.remote(), timeout=180)
    nrlprof.step(1)
    ray_cluster.get(worker.pid.remote(), timeout=180)
    released = tmp_path / "released"
    # Busy until released after the step: a step that waited for it would never return.
    long_call = worker.busy_until.remote(str(released), limit_s=120)
    step_began = time.monotonic()
    nrlprof.step(2)
    step_s = time.monotonic() - step_began
    still_busy = not ray_cluster.wait([long_call], timeout=0)[0]
    released.touch()
    busy_s = ray_cluster.get(long_call)
    nrlprof.finish()
    assert step_s >= timeout_s - CLOCK_SLACK_S, "the window start waits up to the timeout"
    assert still_busy and busy_s < 120, f"step() took {step_s:.1f} s, the worker was busy {busy_s:.1f} s"


class LevelRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("level", ["WARNING", "INFO", "DEBUG"])
def test_log_level_decides_which_lines_show(ray_cluster, activate, tmp_path, level):
    from workload import DTensorPolicyWorker

    handler = LevelRecords()
    logging.getLogger("nrlprof").addHandler(handler)
    try:
        nrlprof = activate(
            NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
            NRL_TORCH_PROFILE_STEP_RANGE="2",
            NRL_TORCH_PROFILE_DIR=str(tmp_path),
            NRL_PROFILE_LOG_LEVEL=level,
        )
        worker = DTensorPolicyWorker.remote()
        drive(ray_cluster, nrlprof, worker, range(1, 4))
        nrlprof.finish()
    finally:
        logging.getLogger("nrlprof").removeHandler(handler)
    shown = {(r.levelname, r.getMessage()) for r in handler.records}
    match_line = f"Torch profiling enabled for worker '{WORKER}' (matched pattern '*policy*')"
    matched = {m for lvl, m in shown if lvl == "INFO" and "profiling enabled for worker" in m}
    debug = [m for lvl, m in shown if lvl == "DEBUG"]
    if level == "WARNING":
        assert not matched and not debug
    else:
        assert {m.lower() for m in matched} == {match_line.lower()}
        assert bool(debug) is (level == "DEBUG"), debug


def test_relative_torch_dir_is_resolved_against_the_drivers_working_directory(ray_cluster, tmp_path):
    driver_dir = tmp_path / "job"
    driver_dir.mkdir()
    env = environment_without("NRL_", "RAY_ADDRESS")
    env |= {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_TORCH_PROFILE_STEP_RANGE": "2",
        "NRL_TORCH_PROFILE_DIR": "out/traces",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")])),
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"),
    }
    address = ray_cluster.get_runtime_context().gcs_address
    done = subprocess.run(
        [sys.executable, str(PROGRAMS / "policy_worker_three_steps.py"), address],
        cwd=driver_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pid = int(done.stdout.split()[-1])
    folder = driver_dir / "out" / "traces"
    assert [p.name for p in traces_under(folder / WORKER / "0")] == [f"{WORKER}.rank0.steps2.{pid}.pt.trace.json"]
    assert [p.name.split(".")[:2] for p in folder.glob("controller.*.pt.trace.json")] == [["controller", "steps2"]]


@pytest.mark.fresh_cluster  # what the runtime-env agent loads when a driver starts a cluster
def test_an_existing_runtime_env_plugin_is_kept_next_to_nrlprofs_hook_on_a_real_cluster(tmp_path):
    from helpers.standins import SYSTEM_PATH, install_stand_ins, tool_records

    from nrlprof.rayfix.names import HOOK_CLASS_PATH

    (tmp_path / "marks").mkdir()
    mine = {"class": "audit_site.AuditPlugin", "priority": 5}
    bin_dir = install_stand_ins(tmp_path / "bin")
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    env |= {
        "PATH": f"{bin_dir}:{SYSTEM_PATH}",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(PROGRAMS / "site_plugins")]),
        "NRL_NSYS_WORKER_PATTERNS": "*policy*",
        "NRL_NSYS_PROFILE_STEP_RANGE": "2",
        "NRLPROF_FAKE_TOOL_LOG": str(tmp_path / "calls"),
        "AUDIT_MARK_DIR": str(tmp_path / "marks"),
        "RAY_RUNTIME_ENV_PLUGINS": json.dumps([mine]),
    }
    done = subprocess.run(
        [sys.executable, str(PROGRAMS / "import_nrlprof_then_start_ray.py"), "600"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    plugins = json.loads(result["plugins"])
    assert mine in plugins and HOOK_CLASS_PATH in [p["class"] for p in plugins] and len(plugins) == 2
    loaded_by = [m.name for m in (tmp_path / "marks").iterdir()]
    assert loaded_by and f"loaded-{result['driver']}" not in loaded_by, "the agent loaded the plugin listed before"
    assert result["agent_has_fix"] is True, "and nrlprof's hook next to it"
    (record,) = [r for r in tool_records(tmp_path / "calls") if r["pid"] == result["pid"]]
    assert record["command"][0] == sys.executable


def output_name(options: list[str]) -> str:
    if "-o" in options:
        return options[options.index("-o") + 1]
    (value,) = [o.split("=", 1)[1] for o in options if o.startswith("--output=")]
    return value


def test_concurrent_creation_from_threads_gives_every_actor_its_own_selection(ray_cluster, activate, calls):
    from workload import DTensorPolicyWorker, VllmGenerationWorker

    activate(
        NRL_NSYS_WORKER_PATTERNS="*policy*,*generation*",
        NRL_NSYS_PROFILE_STEP_RANGE="3:5",
        NRL_NSYS_RANKS="0,2",
    )
    kinds = {WORKER: DTensorPolicyWorker, "vllm_generation_worker": VllmGenerationWorker}
    handles: dict[tuple[str, int], object] = {}
    barrier = threading.Barrier(8)

    def create(name: str, rank: int) -> None:
        barrier.wait()
        handles[(name, rank)] = kinds[name].options(runtime_env={"env_vars": {"RANK": str(rank)}}).remote()

    threads = [threading.Thread(target=create, args=(n, r)) for n in kinds for r in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pids = {key: ray_cluster.get(handle.pid.remote(), timeout=300) for key, handle in handles.items()}
    by_pid = {r["pid"]: r for r in calls()}
    for (name, rank), pid in sorted(pids.items()):
        if rank in (0, 2):
            record = by_pid.get(pid)
            assert record is not None, f"{name} rank {rank} runs under nsys"
            assert output_name(record["options"]).rsplit("/", 1)[-1] == f"{name}_3-4_%p", (name, rank)
            assert parse_worker_descriptor(record["env"]["NRLPROF_WORKER"]).identity.rank == rank
            assert record["command"][0] == sys.executable
        else:
            assert pid not in by_pid, f"{name} rank {rank} is not selected and not under nsys"


def test_rocprof_default_output_prefix_is_worker_and_rank(ray_cluster, activate, calls):
    from workload import DTensorPolicyWorker

    activate(NRL_ROCPROF_WORKER_PATTERNS="*policy*")
    worker = DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": "3"}}).remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=300)
    (record,) = [r for r in calls("rocprof-sys-python") if r["pid"] == pid]
    assert record["env"]["ROCPROFSYS_OUTPUT_PREFIX"] == f"{WORKER}_rank3_"
    session = Path(ray_cluster._private.worker.global_worker.node.get_session_dir_path())
    assert record["env"]["ROCPROFSYS_OUTPUT_PATH"].startswith(str(session / "logs" / "rocprof_sys"))


def test_a_step_going_back_closes_the_open_window_which_never_reopens(ray_cluster, activate, tmp_path):
    from workload import DTensorPolicyWorker

    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:6",
        NRL_TORCH_PROFILE_DIR=str(tmp_path),
    )
    worker = DTensorPolicyWorker.remote()
    drive(ray_cluster, nrlprof, worker, [1, 2, 3])
    drive(ray_cluster, nrlprof, worker, [2])  # back into the window's own steps: the window closes here
    files_after_going_back = traces_under(tmp_path / WORKER)
    drive(ray_cluster, nrlprof, worker, [3, 4, 5, 6, 7])
    nrlprof.finish()
    files = traces_under(tmp_path / WORKER)
    assert files == files_after_going_back, "the window is not opened again"
    (path,) = files
    trace = load_trace(path)
    assert marker_steps(trace, "policy.train.") == {2, 3}
    assert marker_steps(trace, "ProfilerStep#") == {2, 3}
    controller = sorted(tmp_path.glob("controller.*.pt.trace.json"))
    assert len(controller) == 1
