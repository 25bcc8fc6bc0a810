"""The tools on one machine, with no cluster (the end of the quick start): after a local `ray.init()` job has ended,
`collect` here, `summary`, `merge` and `report` work; `merge` takes Nsight-Systems-only and step-anatomy-only input."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.anatomy import DRIVER_NODE, JOB, T0, actor_id, call
from helpers.environment import environment_without
from helpers.nsys import copy_nsys_export
from helpers.traces import gpu_trace, write_json

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines
from nrlprof.tools.cluster import BadInput
from nrlprof.tools.collect.local import collect_local, ray_temp_dir

DRIVER_PID = 4321
SESSION = f"session_2026-11-24_10-00-00_000001_{DRIVER_PID}"
OLDER = "session_2026-11-23_10-00-00_000001_999"
WORKER_PID = 5555
MS = 1_000_000


def nrlprof(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = environment_without("NRL_", "RAY_ADDRESS") | env
    return subprocess.run([sys.executable, "-m", "nrlprof", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)  # fmt: skip


def manifest_line(path: Path, worker: str, rank: int | None, pid: int, files: list[Path]) -> None:
    record = {"backend": "torch", "event": "window", "worker": worker, "rank": rank, "window": "3-4",
              "steps": [3, 4], "files": [str(f) for f in files], "status": "ok", "message": "", "host": "h",
              "node_ip": "10.0.0.1", "pid": pid, "started_at": 1.0, "stopped_at": 2.0, "start_ms": 0.5,
              "stop_ms": 12.5}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    path.chmod(0o644)


def anatomy_run(directory: Path, pid: int) -> Path:
    """A step-anatomy run of the driver `pid`: one worker whose process is WORKER_PID, two steps."""
    run = directory / f"run-20261124T100000Z-{pid}"
    run.mkdir(parents=True)
    append_lines(run / META_FILE, [{"job_id": JOB, "driver_node_id": DRIVER_NODE}])
    append_lines(run / ACTORS_FILE, [{"actor_id": actor_id(1), "worker": "policy", "rank": 0, "class": "Policy"}])
    append_lines(run / STEPS_FILE, [{"step": 3, "t_ns": T0}, {"step": 4, "t_ns": T0 + 100 * MS},
                                    {"finish": True, "t_ns": T0 + 200 * MS}])  # fmt: skip
    append_lines(run / TASKS_FILE, [{**call(1, "train", 10, 90), "pid": WORKER_PID},
                                    {**call(1, "train", 110, 190), "pid": WORKER_PID}])  # fmt: skip
    return run


@pytest.fixture
def ended_job(tmp_path) -> dict[str, Path]:
    """What a local `ray.init()` job leaves on this machine once it has ended: a Ray temp dir with its session
    (manifests), an older session, the torch traces its manifests name, and the driver's step anatomy."""
    temp = tmp_path / "tmp"
    traces = tmp_path / "traces"
    trace = write_json(traces / "policy" / "0" / f"policy.rank0.steps3-4.{WORKER_PID}.pt.trace.json",
                       gpu_trace(pid=WORKER_PID))  # fmt: skip
    logs = temp / "ray" / SESSION / "logs"
    manifest_line(logs / "nrlprof" / f"manifest-h-{WORKER_PID}.jsonl", "policy", 0, WORKER_PID, [trace])
    old_trace = write_json(traces / "old" / "policy.rank0.steps3-4.77.pt.trace.json", gpu_trace(pid=77))
    manifest_line(temp / "ray" / OLDER / "logs" / "nrlprof" / "manifest-h-77.jsonl", "policy", 0, 77, [old_trace])
    (temp / "ray" / "session_2026-11-25_10-00-00_000001_1" / "logs").mkdir(parents=True)  # newer, no manifest
    anatomy = tmp_path / "step_anatomy"
    anatomy_run(anatomy, DRIVER_PID)
    anatomy_run(anatomy, 999)  # another driver's
    env = {"RAY_TMPDIR": str(temp), "NRL_TORCH_PROFILE_DIR": str(traces), "NRL_STEP_ANATOMY_DIR": str(anatomy)}
    return {"temp": temp, "traces": traces, "anatomy": anatomy, "env": env, "trace": trace}  # type: ignore[dict-item]


def test_ray_temp_dir_is_chosen_as_ray_chooses_it():
    assert ray_temp_dir({}) == Path("/tmp/ray")
    assert ray_temp_dir({"TMPDIR": "/scratch"}) == Path("/scratch/ray")
    assert ray_temp_dir({"TMPDIR": "/scratch", "RAY_TMPDIR": "/fast"}) == Path("/fast/ray")


def test_the_quick_start_on_one_machine_after_the_job_ended(ended_job, tmp_path):
    """`collect`, `summary`, `merge`, `report` as the README prints them, with no cluster running."""
    env = {**ended_job["env"], "RAY_ADDRESS": "127.0.0.1:1"}  # whatever else runs here: no cluster answers there
    profiles = tmp_path / "profiles"
    done = nrlprof(env, "collect", "--to", str(profiles), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no Ray cluster is running here" in done.stderr and "from this machine only" in done.stderr
    host = next(p for p in profiles.iterdir() if p.is_dir())
    taken = sorted(str(p.relative_to(host)) for p in host.rglob("*") if p.is_file())
    assert f"{SESSION}/logs/nrlprof/manifest-h-{WORKER_PID}.jsonl" in taken
    assert f"torch{ended_job['trace']}" in taken
    assert f"step_anatomy/run-20261124T100000Z-{DRIVER_PID}/steps.jsonl" in taken  # the session's driver only
    assert not any("run-20261124T100000Z-999" in p or OLDER in p for p in taken)

    summary = nrlprof(env, "summary", "--json", str(profiles), cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    data = json.loads(summary.stdout)
    assert [(o["worker"], o["status"]) for o in data["profiler_overhead"]] == [("policy", "ok")]
    assert "3" in data["anatomy"]["steps"] and data["workers"][0]["steps"]["3"]["wall_ms"] > 0
    merged = nrlprof(env, "merge", str(profiles), "-o", str(tmp_path / "timeline.json.gz"), cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    report = nrlprof(env, "report", str(profiles), "-o", str(tmp_path / "report.html"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.html").stat().st_size > 0


def test_collect_here_chooses_the_job_as_on_a_cluster(ended_job, tmp_path, monkeypatch):
    for name, value in ended_job["env"].items():
        monkeypatch.setenv(name, value)
    temp = ended_job["temp"] / "ray"
    newest = collect_local(tmp_path / "a")
    assert newest.local and newest.sessions == [SESSION] and newest.exit_code == 0
    older = collect_local(tmp_path / "b", session=OLDER)
    assert older.sessions == [OLDER] and any("old/policy.rank0" in f.path for f in older.copied)
    every = collect_local(tmp_path / "c", all_sessions=True)
    assert every.sessions is None and len([f for f in every.copied if f.path.endswith(".jsonl") and
                                           "manifest" in f.path]) == 2  # fmt: skip
    again = collect_local(tmp_path / "a")
    assert again.copied == [] and len(again.skipped) == len(newest.copied) and again.exit_code == 0
    with pytest.raises(BadInput, match="no such session dir"):
        collect_local(tmp_path / "d", session="session_2020-01-01_00-00-00_000001_1")
    with pytest.raises(BadInput, match="no Ray temp dir"):
        collect_local(tmp_path / "e", temp_dir=tmp_path / "nowhere")
    shutil.rmtree(temp / SESSION)
    shutil.rmtree(temp / OLDER)
    nothing = collect_local(tmp_path / "f")
    assert nothing.found_nothing and nothing.exit_code == 1 and "holds nrlprof manifests" in nothing.notes[0]


def test_collect_here_keeps_the_clusters_safety_rules(ended_job, tmp_path, monkeypatch):
    for name, value in ended_job["env"].items():
        monkeypatch.setenv(name, value)
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not a profile")
    manifest = ended_job["temp"] / "ray" / SESSION / "logs" / "nrlprof" / "manifest-h-1.jsonl"
    manifest_line(manifest, "policy", 1, 1, [secret])
    result = collect_local(tmp_path / "out")
    assert [item["path"] for item in result.rejected] == [str(secret)] and result.exit_code == 1
    assert not list((tmp_path / "out").rglob("secret.txt"))
    allowed = collect_local(tmp_path / "out", allow_dirs=[str(secret.parent)])
    assert allowed.exit_code == 0 and any(f.path.endswith("secret.txt") for f in allowed.copied)


def test_collect_options_that_do_not_go_together_are_bad_input(tmp_path):
    done = nrlprof({}, "collect", "--to", str(tmp_path / "x"), "--local", "--address", "auto")
    assert done.returncode == 2 and "--local" in done.stderr and done.stderr.count("\n") == 1


@pytest.fixture
def nsys_export(tmp_path) -> Path:
    return copy_nsys_export(tmp_path)


def test_merge_then_report_of_an_nsys_only_job(nsys_export, tmp_path):
    nsys_only = nsys_export.parent  # a real export, named as nrlprof names the report
    timeline = tmp_path / "timeline.json.gz"
    done = nrlprof({"PATH": "/usr/bin:/bin"}, "merge", str(nsys_only), "-o", str(timeline))
    assert done.returncode == 0, done.stderr
    assert "1 Nsight Systems capture(s)" in done.stdout
    events = json.loads(gzip.decompress(timeline.read_bytes()))["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {"vllm_generation_worker (nsys pid 4242)"}
    spans = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in spans if e["cat"] == "nvtx"] == ["step 3", "vllm_generation_worker.generate [step 3]"]
    assert len([e for e in spans if e["cat"] == "kernel"]) == 82
    step = next(e for e in spans if e["name"] == "step 3")
    assert all(step["ts"] <= k["ts"] <= step["ts"] + step["dur"] for k in spans if k["cat"] == "kernel")
    report = nrlprof({"PATH": "/usr/bin:/bin"}, "report", str(nsys_only), "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr


def test_an_nsys_report_with_no_export_and_no_nsys_is_skipped_with_the_reason(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "policy_3-4_77.nsys-rep").write_bytes(b"a report")
    done = nrlprof({"PATH": "/usr/bin:/bin"}, "merge", str(run), "-o", str(tmp_path / "t.json.gz"))
    assert done.returncode == 1 and "nsys not found to export this report" in done.stderr
    summary = nrlprof({"PATH": "/usr/bin:/bin"}, "summary", "--json", str(run))
    assert summary.returncode == 1  # every input skipped: done in part
    assert json.loads(summary.stdout)["skipped"][0]["path"].endswith("policy_3-4_77.nsys-rep")


def test_merge_of_a_step_anatomy_alone(tmp_path):
    anatomy = tmp_path / "step_anatomy"
    anatomy_run(anatomy, DRIVER_PID)
    timeline = tmp_path / "timeline.json.gz"
    done = nrlprof({}, "merge", str(anatomy), "-o", str(timeline))
    assert done.returncode == 0, done.stderr
    assert "the step anatomy" in done.stdout
    document = json.loads(gzip.decompress(timeline.read_bytes()))
    spans = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans} >= {"step 3", "step 4", "policy.train [step 3]", "policy.train [step 4]"}
    assert min(e["ts"] for e in spans) == 0 and document["baseTimeNanoseconds"] == T0  # on its own clock


def test_summary_merge_and_report_of_the_default_dirs_need_no_cluster(tmp_path):
    """The driver's own dirs, read where it ran: `torch_profiler_trace/` and `step_anatomy/`, no Ray at all."""
    write_json(tmp_path / "torch_profiler_trace" / "policy" / "0" / f"policy.rank0.steps3-4.{WORKER_PID}.pt.trace.json",
               gpu_trace(pid=WORKER_PID))  # fmt: skip
    anatomy_run(tmp_path / "step_anatomy", DRIVER_PID)
    nowhere = {"RAY_ADDRESS": "127.0.0.1:1"}
    summary = nrlprof(nowhere, "summary", "--json", ".", cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["anatomy"]["steps"]["3"]["phases"][0]["worker"] == "policy"
    merged = nrlprof(nowhere, "merge", "torch_profiler_trace", "step_anatomy", cwd=tmp_path)
    assert merged.returncode == 0 and "1 torch trace(s), the step anatomy" in merged.stdout, merged.stderr
    report = nrlprof(nowhere, "report", ".", cwd=tmp_path)
    assert report.returncode == 0 and (tmp_path / "nrlprof-report.html").is_file(), report.stderr
