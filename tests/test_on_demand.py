"""Profiling a job that is already running: an armed job (NRL_PROFILE_ON_DEMAND=1) of 40 steps on the shared local
cluster, and `nrlprof capture` run from another process while it runs; refusals (a job not armed, overlapping
requests, a pattern no worker matches, nsys on workers not launched under it); a controller actor on a `ray start`
cluster with token auth."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from helpers.clusters import joining_env
from helpers.trace_reading import load_trace, marker_steps, traces_under

import nrlprof

TESTS = str(Path(__file__).parent)
# This checkout's nrlprof, first on the path of the job, its actors and the command.
PYTHONPATH = os.pathsep.join([TESTS, str(Path(nrlprof.__file__).parent.parent)])
PROGRAMS = Path(TESTS) / "programs"
STEPS = 40


def start_job(tmp_path: Path, env: dict[str, str], marked_by: str = "nrlprof", controller: bool = False):
    """The job (tests/programs/armed_loop_job.py, or controller_trainer_job.py's controller actor), started;
    `marked_by`: how its loop marks a step (`marker`: the step marker or an adapter does). Its steps take 0.5 s each
    and its last step waits, until `finish` (a loaded machine may be slow to ask); while `hold_in_window` is in
    `tmp_path`, a step with a window open in the driver waits too."""
    (tmp_path / "hold_at_end").touch()
    program = PROGRAMS / ("controller_trainer_job.py" if controller else "armed_loop_job.py")
    job = [sys.executable, str(program), str(STEPS), marked_by, str(tmp_path)]
    env = {**env, "PYTHONPATH": PYTHONPATH, "NRL_STEP_ANATOMY": "0"}
    return subprocess.Popen(job, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def capture(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**env, "PYTHONPATH": PYTHONPATH}
    return subprocess.run([sys.executable, "-m", "nrlprof", "capture", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def wait_armed(env: dict[str, str], address: str, job_count: int = 1, timeout_s: float = 120) -> str:
    """`capture --list` once the armed job's workers are there and it has stepped."""
    deadline = time.monotonic() + timeout_s
    listed = ""
    while time.monotonic() < deadline:
        listed = capture(env, "--address", address, "--list").stdout
        if listed.count("job ") >= job_count and "dtensor_policy_worker" in listed and "step not yet" not in listed:
            return listed
        time.sleep(1)
    raise AssertionError(f"no armed job listed: {listed}")


def opened_steps(stdout: str) -> tuple[int, int]:
    found = re.search(r"window of steps \S+ \(steps (\d+) to (\d+)\)", stdout)
    assert found, stdout
    return int(found.group(1)), int(found.group(2))


def finish(job: subprocess.Popen) -> tuple[str, str]:
    """The job's steps left run unpaced, to its end."""
    (Path(job.args[-1]) / "hold_at_end").unlink(missing_ok=True)  # the hold directory: the job's last argument
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0, err[-3000:]
    return out, err


def test_capture_in_a_running_job_profiles_exactly_the_steps_it_printed(ray_cluster, tmp_path):
    address = ray_cluster.get_runtime_context().gcs_address
    traces, memory = tmp_path / "traces", tmp_path / "memory"
    env = joining_env(address)
    job = start_job(tmp_path, {**env, "NRL_PROFILE_ON_DEMAND": "1", "NRL_TORCH_PROFILE_DIR": str(traces),
                               "NRL_MEMORY_PROFILE_DIR": str(memory)})  # fmt: skip
    try:
        listed = wait_armed(env, address)
        assert "dtensor_policy_worker: ranks 0,1" in listed and "reward_worker: rank 0" in listed
        torch_run = capture(env, "--address", address, "--workers", "*policy*", "--backend", "torch", "--steps",
                            "3", "--wait")  # fmt: skip
        assert torch_run.returncode == 0, torch_run.stdout + torch_run.stderr
        first, last = opened_steps(torch_run.stdout)
        assert last == first + 2 and "in 2 worker(s)" in torch_run.stdout
        for rank in (0, 1):  # final when `--wait` returns, while the job still runs
            (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
            assert marker_steps(load_trace(trace), "policy.train.") == set(range(first, last + 1))
        memory_run = capture(env, "--address", address, "--workers", "*policy*", "--ranks", "1", "--backend",
                             "memory", "--steps", "2", "--wait")  # fmt: skip
        assert memory_run.returncode == 0, memory_run.stdout + memory_run.stderr
        memory_first, memory_last = opened_steps(memory_run.stdout)
    finally:
        out, err = finish(job)
    assert f"STEP {STEPS}" in out and "DONE" in out, "the job ran every step"
    for rank in (0, 1):
        (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
        assert marker_steps(load_trace(trace), "policy.train.") == set(range(first, last + 1))
        assert str(trace) in torch_run.stdout, "capture printed the files the manifest names"
    assert len(list(traces.glob(f"controller.steps{first}-{last}.*.pt.trace.json"))) == 1
    assert not (traces / "reward_worker").exists(), "a worker no pattern selected is untouched"
    (figures,) = (memory / "dtensor_policy_worker" / "1").glob("*.memory.json")
    steps = {row["step"] for row in json.loads(figures.read_text())["steps"]}
    assert steps == set(range(memory_first, memory_last + 1))
    assert not (memory / "dtensor_policy_worker" / "0").exists(), "--ranks 1 only"
    assert re.search(r"request \w+ from node \S+ \(.*\): torch for 3 step\(s\) of workers '\*policy\*'", err)
    assert "(asked for: request" in err and "accepted" in err
    request_id = re.search(r"for request (\w+)", torch_run.stdout).group(1)
    session_dir = Path(ray_cluster._private.worker.global_worker.node.get_session_dir_path())
    records = [json.loads(line) for manifest in (session_dir / "logs" / "nrlprof").glob("manifest-*.jsonl")
               for line in manifest.read_text().splitlines()]  # fmt: skip
    # The shared cluster's session holds other tests' records too: the request id picks this window's.
    window = [r for r in records if r.get("asked") == request_id]
    assert len(window) == 3, "2 workers and the controller"
    assert {(r["backend"], r["window"]) for r in window} == {("torch", f"{first}-{last}")}


def test_refusals_leave_the_job_untouched(ray_cluster, tmp_path):
    address = ray_cluster.get_runtime_context().gcs_address
    env = joining_env(address)
    not_armed = capture(env, "--address", address, "--workers", "*", "--backend", "torch", "--steps", "2")
    assert not_armed.returncode == 2 and "no armed job on this cluster" in not_armed.stderr
    # Steps from the step marker: an armed job takes its steps wherever they come from.
    job = start_job(tmp_path, {**env, "NRL_PROFILE_ON_DEMAND": "1", "NRL_TORCH_PROFILE_DIR": str(tmp_path / "t"),
                               "NRL_STEP_METHOD": "*policy*.train"}, marked_by="marker")  # fmt: skip
    try:
        wait_armed(env, address)
        wrong_job = capture(env, "--address", address, "--job", "ffffffff", "--workers", "*", "--backend",
                            "torch", "--steps", "2")  # fmt: skip
        assert wrong_job.returncode == 2 and "--job 'ffffffff' is not an armed job" in wrong_job.stderr
        nobody = capture(env, "--address", address, "--workers", "*critic*", "--backend", "torch", "--steps", "2")
        assert nobody.returncode == 2, nobody.stderr
        assert "no live worker matches --workers '*critic*'" in nobody.stderr
        assert "dtensor_policy_worker (ranks 0,1), reward_worker (rank 0)" in nobody.stderr
        nsys = capture(env, "--address", address, "--workers", "*policy*", "--backend", "nsys", "--steps", "2")
        assert nsys.returncode == 2 and "NRL_NSYS_PROFILE_STEP_RANGE=on-demand" in nsys.stderr
        (tmp_path / "hold_in_window").touch()  # the job waits inside the window until the next request is answered
        long_window = capture(env, "--address", address, "--workers", "*policy*", "--backend", "torch", "--steps",
                              "8")  # fmt: skip
        assert long_window.returncode == 0, long_window.stderr
        overlapping = capture(env, "--address", address, "--workers", "*reward*", "--backend", "torch", "--steps",
                              "2")  # fmt: skip
        (tmp_path / "hold_in_window").unlink()
        assert overlapping.returncode == 2 and "overlaps" in overlapping.stderr, overlapping.stderr
        other_backend = capture(env, "--address", address, "--workers", "*reward*", "--backend", "memory",
                                "--steps", "1", "--wait")  # fmt: skip
        assert other_backend.returncode == 0, other_backend.stdout + other_backend.stderr
    finally:
        out, err = finish(job)
    assert f"STEP {STEPS}" in out
    assert err.count("refused, nothing done") == 3, err[-3000:]


def test_a_controller_actor_on_a_ray_start_cluster_with_token_auth(ray_start_head, tmp_path):
    traces = tmp_path / "traces"
    env = {**ray_start_head["env"], "RAY_AUTH_MODE": "token"}
    address = ray_start_head["address"]
    job = start_job(tmp_path, {**env, "NRL_PROFILE_ON_DEMAND": "1", "NRL_TORCH_PROFILE_DIR": str(traces)},
                    controller=True)  # fmt: skip
    try:
        listed = wait_armed(env, address)
        assert "controller actor" in listed or "controller Trainer" in listed, listed
        run = capture(env, "--address", address, "--workers", "*policy*", "--backend", "torch", "--steps", "2",
                      "--wait")  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        first, last = opened_steps(run.stdout)
    finally:
        out, _err = finish(job)
    assert f"TRAINER {STEPS}" in out
    for rank in (0, 1):
        (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
        assert marker_steps(load_trace(trace), "policy.train.") == set(range(first, last + 1))
    assert list(traces.glob(f"controller.steps{first}-{last}.*.pt.trace.json"))


def test_capture_exits_1_and_names_the_worker_that_died_in_the_window(ray_cluster, activate, tmp_path, capsys):
    """A selected worker killed from outside (an OOM kill) during a window asked for: the window closes in the rest,
    the dead worker's record says so, and `capture --wait`'s ending (its own code, on the final answer) exits 1."""
    import signal

    from helpers.on_demand import ask
    from workload import DTensorPolicyWorker

    from nrlprof import exit_codes
    from nrlprof.config.requests import CLOSED, Request
    from nrlprof.process import state
    from nrlprof.tools.commands.capture import _print_closed

    armed = activate(NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"))
    policy = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
    pids = ray_cluster.get([w.pid.remote() for w in policy], timeout=180)
    live = list(policy)
    for step in (1, 2):
        armed.step(step)
        ray_cluster.get([w.train.remote(step) for w in live], timeout=300)

    def work(step: int) -> None:
        window = state.session.built_gate().open.get("torch")
        if window is not None and window.first < step < window.last and len(live) == 2:  # inside it, not at its ends
            os.kill(pids[1], signal.SIGKILL)
            live.remove(policy[1])
        ray_cluster.get([w.train.remote(step) for w in live], timeout=300)

    job = ray_cluster.get_runtime_context().get_job_id()
    reply, _ = ask(armed, work, Request(job, "torch", ("*policy*",), 6), 3)
    armed.finish()
    assert reply.state == CLOSED and len(live) == 1, reply
    assert _print_closed(reply) == exit_codes.PARTIAL
    printed = capsys.readouterr()
    assert "dtensor_policy_worker rank 0 on" in printed.out
    died = rf"dtensor_policy_worker rank 1 on \S+ \[died: the worker died during window {reply.window} \(found dead"
    assert re.search(died, printed.out), printed.out


def test_a_window_asked_for_whose_export_failed_is_an_error_in_the_answer_as_in_the_manifest(
    ray_cluster, activate, tmp_path, capsys, nrlprof_log
):
    """The worker's trace cannot be exported (a full disk): the final answer `capture --wait` prints holds the
    record the manifest holds (`error`, no file), not the one taken at the stop (`ok`, a path never written); the
    job's log says so."""
    from helpers.finished import ExportFailingPolicyWorker
    from helpers.on_demand import ask, asked_records

    from nrlprof import exit_codes
    from nrlprof.config.requests import CLOSED, Request
    from nrlprof.tools.commands.capture import _print_closed

    armed = activate(NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"))
    worker = ExportFailingPolicyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=180)
    for step in (1, 2):
        armed.step(step)
        ray_cluster.get(worker.train.remote(step), timeout=300)

    job = ray_cluster.get_runtime_context().get_job_id()
    request = Request(job, "torch", ("*export_failing*",), 2)
    reply, _ = ask(armed, lambda step: ray_cluster.get(worker.train.remote(step), timeout=300), request, 3)
    armed.finish()
    assert reply.state == CLOSED, reply
    (answered,) = [r.as_dict() for r in reply.records if r.pid == pid]
    (written,) = [r for r in asked_records(ray_cluster, request.id) if r["pid"] == pid]
    assert (written["status"], written["files"]) == ("error", [])
    assert answered == written
    assert _print_closed(reply) == exit_codes.PARTIAL
    printed = capsys.readouterr().out
    assert re.search(r"export_failing_policy_worker rank 0 on \S+ \[error: \S+ could not be written", printed), printed
    listed = [line.strip() for line in printed.splitlines() if line.startswith("  ")]
    assert listed and all(os.path.exists(path) for path in listed), "only the controller's trace, which exists"
    window = reply.window
    assert any(line.startswith("torch window stopped in 2 process(es) (1 error) at step") for line in nrlprof_log), (
        window,
        nrlprof_log,
    )
