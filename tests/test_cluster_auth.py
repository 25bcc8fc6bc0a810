"""`doctor`, `collect`, `plan`, the step anatomy's reader on a `ray start --head` cluster with token auth (Ray 2.60).

The cluster runs on free ports with its own temp dir and token; it is stopped by ending only its own processes.
The tools run as a user would run them: separate processes that find the cluster themselves (no address).
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers.clusters import RAY, count_start, free_ports, stop_own_cluster
from helpers.environment import environment_without


@pytest.fixture(scope="module")
def token_cluster():
    """A head started with `ray start` and RAY_AUTH_MODE=token; the env a client on this node would have."""
    base = tempfile.mkdtemp(prefix="nrla", dir="/tmp")  # short: raylet socket paths are length-limited
    token = secrets.token_hex(32)
    env = environment_without("RAY_", "NRL_")  # none of the suite's own but the run's Ray settings
    # RAY_TMPDIR: `auto` looks for this cluster in <RAY_TMPDIR>/ray, not in the /tmp/ray other clusters share.
    env.update(RAY_TMPDIR=base, RAY_AUTH_TOKEN=token)
    try:
        for _ in range(2):  # on a loaded machine the first start can time out
            gcs, client, agent, dashboard = free_ports(4)
            start = [RAY, "start", "--head", f"--port={gcs}", f"--temp-dir={base}/ray", "--num-cpus=2",
                     "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
                     f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
                     "--disable-usage-stats"]  # fmt: skip
            env_start = {**env, "RAY_AUTH_MODE": "token"}
            done = subprocess.run(start, env=env_start, capture_output=True, text=True, timeout=300)
            if done.returncode == 0:
                break
            stop_own_cluster(f"{base}/ray")
        assert done.returncode == 0, done.stdout + done.stderr
        count_start("ray start")
        yield {"env": env, "address": f"127.0.0.1:{gcs}", "base": Path(base)}
    finally:
        stop_own_cluster(f"{base}/ray")
        shutil.rmtree(base, ignore_errors=True)


def nrlprof(env: dict[str, str], *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "nrlprof.cli", *args]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_cluster_really_requires_the_token(token_cluster):
    """Control: joining by `host:port` without turning token auth on is refused, as the tools used to be."""
    code = f"import ray; ray.init(address={token_cluster['address']!r}, log_to_driver=False)"
    # Ray asks the GCS 20 times, a second apart, before it gives up; the refusal is the same at the second.
    env = {**token_cluster["env"], "RAY_NUM_REDIS_GET_RETRIES": "2"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "InvalidAuthToken: Authentication token is missing or incorrect" in done.stdout + done.stderr


def test_doctor_connects_with_the_token(token_cluster, tmp_path):
    done = nrlprof(token_cluster["env"], "doctor", "--json", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    [node] = data["nodes"]
    assert node["error"] is None and node["raylet_pid"] is not None
    assert node["agent"]["ray_dir"] and node["workers"]["ray_dir"]


def test_collect_connects_with_the_token_and_takes_the_session(token_cluster, tmp_path):
    session = next(p for p in (token_cluster["base"] / "ray").glob("session_2*") if not p.is_symlink())
    report = session / "logs" / "nsight" / "policy_3-4_123.nsys-rep"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_bytes(b"report bytes")
    try:
        done = nrlprof(token_cluster["env"], "collect", "--to", str(tmp_path / "out"), "--json", cwd=str(tmp_path))
    finally:
        report.unlink()  # the session is the module's: the next test finds it as it was
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["sessions"] == [session.name]
    [copied] = data["copied"]
    assert (tmp_path / "out" / copied["path"]).read_bytes() == b"report bytes"
    assert copied["path"].endswith(f"{session.name}/logs/nsight/policy_3-4_123.nsys-rep")


def test_summary_reads_on_the_node_with_the_token(token_cluster, tmp_path):
    """`summary --address auto` joins with the token and reads the job's trace where it lies (the torch dir here)."""
    from helpers.traces import gpu_step_trace

    session = next(p for p in (token_cluster["base"] / "ray").glob("session_2*") if not p.is_symlink())
    trace = tmp_path / "torch_profiler_trace" / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json"
    trace.parent.mkdir(parents=True)
    trace.write_text(json.dumps(gpu_step_trace()))
    manifest = session / "logs" / "nrlprof" / "manifest-h-1.jsonl"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    line = {"backend": "torch", "worker": "policy", "rank": 0, "window": "3-4", "status": "ok", "files": [str(trace)]}
    manifest.write_text(json.dumps(line) + "\n")
    try:
        done = nrlprof(token_cluster["env"], "summary", "--address", "auto", "--json", cwd=str(tmp_path))
    finally:
        manifest.unlink()  # its file lies outside the session: a later collect would refuse it
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["skipped"] == []
    [worker] = data["workers"]
    assert (worker["worker"], worker["rank"], sorted(worker["steps"])) == ("policy", 0, ["3", "4"])
    assert worker["files"][0].endswith(f":{trace}") and data["directory"] == f"cluster auto: {session.name}"


def test_an_address_given_finds_the_token_where_ray_keeps_it(token_cluster, tmp_path):
    """`--address host:port` with RAY_AUTH_MODE unset: Ray itself would send no token; nrlprof turns token auth on
    where the token is found, in RAY_AUTH_TOKEN or in ~/.ray/auth_token, as Ray does for `auto`."""
    address = token_cluster["address"]
    env = {**token_cluster["env"], "HOME": str(tmp_path)}
    assert "RAY_AUTH_MODE" not in env
    done = nrlprof(env, "doctor", "--address", address, "--json", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nodes"][0]["error"] is None
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(env.pop("RAY_AUTH_TOKEN"))
    listed = nrlprof(env, "capture", "--address", address, "--list", cwd=str(tmp_path))
    assert listed.returncode == 0 and "no armed job on this cluster" in listed.stdout, listed.stderr
    summary = nrlprof(env, "summary", "--address", address, "--json", cwd=str(tmp_path))
    assert "could not connect" not in summary.stderr and "no torch trace" in summary.stderr, summary.stderr


def test_an_address_given_with_no_token_anywhere_is_said_in_one_line(token_cluster, tmp_path):
    """No token anywhere: one line that says the cluster may use token authentication and what to set, not Ray's 20
    s of retries and warnings ending in `could not connect`."""
    env = {key: value for key, value in token_cluster["env"].items() if key != "RAY_AUTH_TOKEN"}
    env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token
    for command in (["doctor"], ["capture", "--list"], ["collect", "--to", str(tmp_path / "out")], ["summary"]):
        done = nrlprof(env, *command, "--address", token_cluster["address"], cwd=str(tmp_path))
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert "may use token authentication" in line and "RAY_AUTH_MODE=token" in line, line
        assert "RAY_AUTH_TOKEN or ~/.ray/auth_token" in line and token_cluster["address"] in line, line


def test_plan_matches_live_actors_with_the_token(token_cluster, tmp_path):
    env = {**token_cluster["env"], "NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}
    done = nrlprof(env, "plan", "--address", "auto", "--json", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["live"] == []  # joined the cluster; no actor runs there


def test_step_anatomy_reader_process_reads_with_the_token_after_its_driver_was_killed(token_cluster, tmp_path):
    """The task-event reader is a process of its own: it must reach the GCS with the driver's token. A small job
    leaves its reading to the driver's end; a driver killed before it (SIGKILL) has its calls read by the reader."""
    from nrlprof.anatomy.files import READER_FILE, read_lines, run_directories
    from nrlprof.tools.figures.anatomy import anatomy_summary

    env = {**token_cluster["env"], "RAY_AUTH_MODE": "token", "NRL_STEP_ANATOMY": "1",
           "NRL_STEP_ANATOMY_DIR": str(tmp_path / "anatomy")}  # fmt: skip
    driver = Path(__file__).parent / "programs" / "killed_anatomy_driver.py"
    done = subprocess.run([sys.executable, str(driver)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    [run] = run_directories(tmp_path / "anatomy")
    began = time.monotonic()
    while not (run / READER_FILE).exists() and time.monotonic() - began < 60:
        time.sleep(0.2)  # the orphaned reader's last reads
    [figures] = read_lines(run / READER_FILE)
    assert figures["reads"] >= 1
    assert figures["lost"] == 0  # a count, not None: the GCS answered its task-count query with the token too
    steps = anatomy_summary(run)["steps"]
    assert sorted(steps, key=int) == ["1", "2", "3"]
    for step in steps.values():
        [phase] = step["phases"]
        assert (phase["worker"], phase["method"], phase["calls"]) == ("policy_worker", "train", 2)
        assert phase["ranks"] == [0, 1]
