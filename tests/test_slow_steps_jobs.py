"""Windows that open themselves when a step is slow, on real Ray jobs with slow steps planted (tests/slow_jobs.py) on
the shared cluster: a window at the step after a slow one (`slow`), the slow step's own traces (`slow:keep`), in every
matched worker and the controller, with the trigger in the manifest and the trace; a run of slow steps and a
straggler; the budget; nothing else profiled."""

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
from slow_jobs import SlowPlan

import nrlprof

TESTS = Path(__file__).parent
PROGRAM = TESTS / "programs" / "slow_steps.py"
PYTHONPATH = os.pathsep.join([str(TESTS), str(Path(nrlprof.__file__).parent.parent)])


def run(ray_cluster, tmp_path: Path, plan: SlowPlan, **variables: str) -> subprocess.CompletedProcess:
    env = {**joining_env(ray_cluster.get_runtime_context().gcs_address), "PYTHONPATH": PYTHONPATH,
           "NRL_TORCH_PROFILE_DIR": str(tmp_path / "traces"), "NRL_STEP_ANATOMY": "0", **variables}  # fmt: skip
    result = subprocess.run([sys.executable, str(PROGRAM), plan.to_json()], env=env, capture_output=True, text=True,
                            timeout=600, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-6000:]
    return result


def records_of(ray_cluster, directory: Path) -> list[dict]:
    """The manifest records (of the shared cluster's session) whose files are under `directory`, or that name no
    file but came from this test's workers."""
    session = Path(ray_cluster._private.worker.global_worker.node.get_session_dir_path())
    found = []
    for manifest in (session / "logs" / "nrlprof").glob("manifest-*.jsonl"):
        for line in manifest.read_text().splitlines():
            record = json.loads(line)
            if any(str(directory) in path for path in record["files"]):
                found.append(record)
    return found


def trace_steps(directory: Path) -> dict[str, set[int]]:
    """Each trace under `directory`, by its path below it, with the planted workers' steps it holds."""
    return {
        str(t.relative_to(directory)): marker_steps(load_trace(t), "policy.train.") for t in traces_under(directory)
    }


def torch_slow(mode: str = "slow", **more: str) -> dict[str, str]:
    return {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": mode, **more}


def test_a_slow_step_opens_a_window_at_the_next_step_in_every_matched_worker_and_the_controller(ray_cluster, tmp_path):
    plan = SlowPlan(steps=20, slow={12: 0.6})
    result = run(ray_cluster, tmp_path, plan, **torch_slow())
    traces = tmp_path / "traces"
    found = trace_steps(traces)
    assert {name.split("/")[0] for name in found} == {
        "policy_worker",
        f"controller.steps13.{_pid(result)}.pt.trace.json",
    }
    policy = {name: steps for name, steps in found.items() if name.startswith("policy_worker/")}
    assert sorted(policy) == [f"policy_worker/{r}/" + n for r, n in _names(policy)], "one trace per rank"
    assert set(map(frozenset, policy.values())) == {frozenset({13})}, "the window is the step after the slow one"
    (line,) = [m for m in result.stderr.splitlines() if "slow step 12: " in m and "opens" in m]
    assert re.search(r"step 13: torch window 13 \(slow step 12: [\d.]+x\) started in 2 worker", result.stderr)
    assert re.search(r"slow step 12: \d+ ms, [\d.]+x the median of \d+ ms \(NRL_PROFILE_SLOW_FACTOR\); slowest: "
                     r"policy_worker rank [01]'s train \d+ ms against \d+ ms; torch window 13 opens in 2 worker\(s\) "
                     r"and the controller \(1 of 3 for this run\)", line), line  # fmt: skip
    records = records_of(ray_cluster, traces)
    assert len(records) == 3 and {r["window"] for r in records} == {"13"}
    for record in records:
        trigger = record["trigger"]
        assert trigger["step"] == 12 and trigger["cause"] == "slow step" and trigger["factor"] >= 1.5
        assert trigger["slowest"]["worker"] == "policy_worker" and trigger["slowest"]["method"] == "train"
    block = json.loads(json.dumps(load_trace(traces_under(traces / "policy_worker")[0])["nrlprof"]))
    assert block["trigger"]["step"] == 12 and block["steps"] == [13]


def test_slow_keep_keeps_the_slow_steps_own_traces_and_nothing_else(ray_cluster, tmp_path):
    plan = SlowPlan(steps=20, slow={11: 0.6})
    anatomy = tmp_path / "traces" / "step_anatomy"
    result = run(ray_cluster, tmp_path, plan, **torch_slow("slow:keep", NRL_PROFILE_SLOW_FACTOR="3"),
                 NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(anatomy))  # fmt: skip
    traces = tmp_path / "traces"
    found = trace_steps(traces)
    policy = {name: steps for name, steps in found.items() if name.startswith("policy_worker/")}
    assert len(policy) == 2 and set(map(frozenset, policy.values())) == {frozenset({11})}, found
    assert len([name for name in found if name.startswith("controller.steps11.")]) == 1
    assert len(found) == 3, "every other step was recorded and dropped"
    assert "torch trace of step 11 kept in 2 worker(s) and the controller" in result.stderr
    records = records_of(ray_cluster, traces)
    assert len(records) == 3 and {(r["window"], r["trigger"]["step"]) for r in records} == {("11", 11)}
    block = load_trace(traces_under(traces / "policy_worker")[0])["nrlprof"]
    assert block["trigger"]["step"] == 11 and block["steps"] == [11]
    # The tools on the job's files (its manifest lines beside its traces and step anatomy) mark the slow step.
    (traces / ".nrlprof").mkdir()
    (traces / ".nrlprof" / "manifest-h-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = nrlprof_command("summary", str(traces))
    assert "Slow steps caught" in summary.stdout, summary.stdout
    assert re.search(r"step 11: [\d.]+x the median \(\d+ ms against \d+ ms\); policy_worker rank [01]'s `train` \d+ "
                     r"ms against \d+ ms; the steps around it \d+ ms \(the step anatomy\); torch trace of step 11 kept "
                     r"in 3 process\(es\)", " ".join(summary.stdout.split())), summary.stdout  # fmt: skip
    data = json.loads(nrlprof_command("summary", "--json", str(traces)).stdout)
    (caught,) = data["slow_steps"]
    assert caught["kept"] and caught["trigger"]["step"] == 11 and len(caught["files"]) == 3
    marked = data["anatomy"]["steps"]["11"]["caught"]
    assert (
        marked["cause"] == "slow step" and marked["kept"] and abs(marked["factor"] - caught["trigger"]["factor"]) < 0.06
    )
    explained = json.loads(nrlprof_command("explain", "--json", str(traces)).stdout)
    assert any(note.startswith("slow step caught: step 11: ") for note in explained["notes"])
    (slow,) = [f for f in explained["findings"] if f["kind"] == "slow_steps"]
    assert "caught by nrlprof: step 11 (torch trace of step 11 kept in 3 process(es))" in slow["evidence"]["summary"]
    assert slow["evidence"]["look"]["file"] in caught["files"]
    assert not [f for f in explained["findings"] if f["kind"] == "profiler_distortion"], "the slow step is no window's"
    nrlprof_command("report", str(traces), "-o", str(tmp_path / "report.html"))
    assert "Slow steps caught" in (tmp_path / "report.html").read_text()


def test_a_run_of_slow_steps_and_a_straggler_each_trigger_once_and_the_budget_holds(ray_cluster, tmp_path):
    # A run of 6 slow steps (one event), then rank 1 straggles from step 30 on (one event: its call 4x its peer's while
    # the step grows 1.3x, the controller's own work holding most of it), then one more slow step past the budget of 2.
    plan = SlowPlan(steps=50, base_s=0.05, controller_s=0.5, slow={s: 1.5 for s in range(10, 16)},
                    straggle={s: 0.15 for s in range(30, 50)} | {45: 3.0})  # fmt: skip
    result = run(ray_cluster, tmp_path, plan, **torch_slow(NRL_PROFILE_SLOW_MAX="2"))
    said = [m for m in result.stderr.splitlines() if "for this run)" in m]
    assert len(said) == 2, "\n".join(said)
    assert "slow step 10:" in said[0]
    assert re.search(r"straggler at step 30: policy_worker rank 1's train \d+ ms against \d+ ms, [\d.]+x its peers'",
                     said[1]), said[1]  # fmt: skip
    assert len([m for m in result.stderr.splitlines() if "are spent" in m]) == 1
    windows = {frozenset(steps) for name, steps in trace_steps(tmp_path / "traces").items()
               if name.startswith("policy_worker/")}  # fmt: skip
    assert windows == {frozenset({11}), frozenset({31})}


def nrlprof_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "nrlprof", *args], capture_output=True, text=True, timeout=300,
                          env={**(env or os.environ), "PYTHONPATH": PYTHONPATH})  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done


def _pid(result: subprocess.CompletedProcess) -> str:
    return re.search(r"controller \(driver\) runs on \S+ pid (\d+)", result.stderr).group(1)


def _names(policy: dict[str, set[int]]) -> list[tuple[str, str]]:
    return sorted((name.split("/")[1], name.split("/")[2]) for name in policy)


def test_steps_from_the_step_marker_beside_a_planned_window_of_another_backend(ray_cluster, tmp_path):
    plan = SlowPlan(steps=18, slow={10: 0.8}, steps_from="marker")
    memory = tmp_path / "memory"
    result = run(ray_cluster, tmp_path, plan, **torch_slow(NRL_PROFILE_SLOW_FACTOR="3"),
                 NRL_STEP_METHOD="*policy*.train", NRL_MEMORY_PROFILE_WORKER_PATTERNS="*policy*",
                 NRL_MEMORY_PROFILE_STEP_RANGE="3:5",
                 NRL_MEMORY_PROFILE_DIR=str(memory))  # fmt: skip
    assert "steps come from the step marker NRL_STEP_METHOD=*policy*.train" in result.stderr
    policy = {n: s for n, s in trace_steps(tmp_path / "traces").items() if n.startswith("policy_worker/")}
    assert len(policy) == 2 and set(map(frozenset, policy.values())) == {frozenset({11})}
    figures = [json.loads(p.read_text()) for p in memory.rglob("*.memory.json")]
    assert len(figures) == 3 and all([row["step"] for row in f["steps"]] == [3, 4] for f in figures), "as planned"


def test_a_controller_actor_catches_the_slow_steps_of_the_workers_it_created(ray_cluster, tmp_path):
    plan = SlowPlan(steps=16, slow={9: 0.8}, in_actor=True)
    result = run(ray_cluster, tmp_path, plan, **torch_slow(NRL_PROFILE_SLOW_FACTOR="3"))
    found = trace_steps(tmp_path / "traces")
    policy = {name: steps for name, steps in found.items() if name.startswith("policy_worker/")}
    assert len(policy) == 2 and set(map(frozenset, policy.values())) == {frozenset({10})}, found
    assert [name for name in found if name.startswith("controller.steps10.")], "the Trainer actor's own trace"
    assert re.search(r"slow step 9: \d+ ms, [\d.]+x the median .* torch window 10 opens in 2 worker\(s\) and the "
                     r"controller", result.stderr), result.stderr[-3000:]  # fmt: skip


def test_slow_keep_reaches_a_workers_engine_process_and_the_actors_it_created(ray_cluster, activate, tmp_path):
    import time

    from engine_shapes import VllmRayGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_slow("slow:keep", NRL_TORCH_PROFILE_WORKER_PATTERNS="*vllm*"),
                       NRL_TORCH_PROFILE_DIR=str(torch_dir))  # fmt: skip
    worker = VllmRayGenerationWorker.remote(2)
    ray_cluster.get(worker.tensor_parallel_pids.remote(), timeout=300)
    for step in range(1, 15):
        nrlprof.step(step)
        time.sleep(0.15 + (1.2 if step == 9 else 0.0))  # the controller's own work: step 9 is slow
        ray_cluster.get(worker.generate.remote(step), timeout=300)
    nrlprof.finish()
    tp = "vllm_ray_generation_worker.ray_worker_proc"
    assert sorted(p.name for p in torch_dir.iterdir() if p.is_dir()) == ["vllm_ray_generation_worker", tp]
    traces = [load_trace(p) for p in traces_under(torch_dir / tp)]
    assert len(traces) == 2, "each of the engine's actors kept its trace of the slow step"
    for trace in traces:
        assert marker_steps(trace, "tp.execute.") == {9} and trace["nrlprof"]["trigger"]["step"] == 9
    (worker_trace,) = traces_under(torch_dir / "vllm_ray_generation_worker")
    assert load_trace(worker_trace)["nrlprof"]["steps"] == [9]


def test_a_window_asked_for_and_a_window_a_slow_step_opens_in_one_armed_job(ray_cluster, tmp_path):
    from helpers.on_demand import asked_window_of

    plan = SlowPlan(steps=24, slow={16: 0.8}, ask="memory")
    result = run(ray_cluster, tmp_path, plan, **torch_slow(NRL_PROFILE_SLOW_FACTOR="3"), NRL_PROFILE_ON_DEMAND="1",
                 NRL_MEMORY_PROFILE_DIR=str(tmp_path / "memory"))  # fmt: skip
    asked = asked_window_of(result)
    assert asked == {3, 4}, "the job waited at step 3 for its request to be taken"
    figures = [json.loads(p.read_text()) for p in (tmp_path / "memory").rglob("*.memory.json")]
    assert figures and all({row["step"] for row in f["steps"]} == asked for f in figures), "the window asked for"
    policy = {n: s for n, s in trace_steps(tmp_path / "traces").items() if n.startswith("policy_worker/")}
    assert set(map(frozenset, policy.values())) == {frozenset({17})}, "and the slow step's"


def test_a_machine_that_gets_busy_is_caught_once_and_one_that_stays_busy_triggers_no_more(ray_cluster, tmp_path):
    """Each step is CPU work of a fixed size (about 0.1 s alone); from step 12 on, processes that never sleep take the
    machine's cores (twice as many as it has, beside the job's), so the steps take several times as long, to the end."""
    import time

    from slow_jobs import busy

    began, iterations = time.perf_counter(), 200_000
    busy(iterations)
    iterations = max(50_000, int(iterations * 0.1 / (time.perf_counter() - began)))
    plan = SlowPlan(steps=45, base_s=0.0, cpu_iterations=iterations)
    env = {**joining_env(ray_cluster.get_runtime_context().gcs_address), "PYTHONPATH": PYTHONPATH,
           "NRL_TORCH_PROFILE_DIR": str(tmp_path / "traces"), "NRL_STEP_ANATOMY": "0",
           **torch_slow(NRL_PROFILE_SLOW_FACTOR="2", NRL_PROFILE_SLOW_MAX="5")}  # fmt: skip
    job = subprocess.Popen([sys.executable, str(PROGRAM), plan.to_json()], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path)  # fmt: skip
    hogs = []
    try:
        for line in job.stdout:
            if line.strip() == "STEP 11":
                hog = [sys.executable, "-c", "while True: pass"]
                hogs = [subprocess.Popen(hog) for _ in range(2 * (os.cpu_count() or 1))]
            if line.strip() == "DONE":
                break
        stderr = job.communicate(timeout=600)[1]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert job.returncode == 0, stderr[-4000:]
    triggered = [int(m.group(1)) for m in re.finditer(r"slow step (\d+): \d+ ms.*for this run\)", stderr)]
    said = "\n".join(m for m in stderr.splitlines() if "slow" in m)
    # Before step 12 the suite's own load may make a step slow (a slow step all the same); from then on the machine
    # stays busy: its onset is caught, and the 34 busy steps after it use at most one more of the 5 windows (the
    # suite's other tests change the load too: one run saw a step at 2.2x the busy median, 14 steps on).
    busy_triggers = [step for step in triggered if step >= 12]
    assert busy_triggers and 12 <= busy_triggers[0] <= 16, said
    assert len(busy_triggers) <= 2 and busy_triggers[-1] - busy_triggers[0] in (0, *range(11, 50)), said


def test_capture_list_shows_a_job_armed_for_slow_steps_and_what_is_left_of_its_budget(ray_cluster, tmp_path):
    address = ray_cluster.get_runtime_context().gcs_address
    hold = tmp_path / "hold"
    hold.touch()
    plan = SlowPlan(steps=14, slow={8: 0.8}, hold=str(hold))
    env = {**joining_env(address), "PYTHONPATH": PYTHONPATH, "NRL_TORCH_PROFILE_DIR": str(tmp_path / "traces"),
           "NRL_STEP_ANATOMY": "0", **torch_slow(NRL_PROFILE_SLOW_FACTOR="3")}  # fmt: skip
    job = subprocess.Popen([sys.executable, str(PROGRAM), plan.to_json()], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path)  # fmt: skip
    try:
        for line in job.stdout:
            if line.strip() == "STEP 14":
                break
        deadline = time.monotonic() + 60
        while True:  # the job's card is rewritten every second: it may still say an earlier step
            listed = nrlprof_command("capture", "--address", address, "--list", env=joining_env(address))
            if "step 14" in listed.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        asked = subprocess.run([sys.executable, "-m", "nrlprof", "capture", "--address", address, "--workers",
                                "*policy*", "--backend", "memory", "--steps", "1"], capture_output=True, text=True,
                               timeout=300, env={**joining_env(address), "PYTHONPATH": PYTHONPATH})  # fmt: skip
    finally:
        hold.unlink()
        stderr = job.communicate(timeout=300)[1]
    assert job.returncode == 0, stderr[-3000:]
    assert "step 14" in listed.stdout and "policy_worker: ranks 0,1" in listed.stdout, listed.stdout
    # A factor of 3, as in the other job tests here that do not test the default: the planted step is 9x the median,
    # and a 100 ms step that a busy machine made 200 ms is not taken for slow.
    assert "armed for slow steps (torch slow; >= 3x the median): 2 of 3 left (slow steps 8)" in listed.stdout
    assert "takes no window asked for (NRL_PROFILE_ON_DEMAND is not set)" in listed.stdout
    assert asked.returncode == 2 and "armed for slow steps only" in asked.stderr, asked.stderr


def test_slow_keep_of_memory_keeps_only_the_slow_steps_figures_in_every_matched_process(ray_cluster, tmp_path):
    # Rank 0 grows by 64 MB during step 5, past a host budget of 16 MB. On CPU a kept step holds only its figures (a
    # few numbers; the budget bounds the allocator history, tests/test_memory_snapshots.py), so rank 0 goes on: the
    # policy ranks and the controller keep the figures of slow step 11 and of no other step (torch is not configured).
    plan = SlowPlan(steps=16, slow={11: 0.8}, grow={5: 64})
    memory = tmp_path / "memory"
    result = run(ray_cluster, tmp_path, plan, NRL_MEMORY_PROFILE_WORKER_PATTERNS="*policy*",
                 NRL_MEMORY_PROFILE_STEP_RANGE="slow:keep", NRL_MEMORY_PROFILE_DIR=str(memory),
                 NRL_PROFILE_MAX_HOST_MB="16", NRL_PROFILE_SLOW_FACTOR="3")  # fmt: skip
    assert "memory trace of step 11 kept in 2 worker(s) and the controller" in result.stderr
    figures = {str(p.relative_to(memory)): json.loads(p.read_text()) for p in memory.rglob("*.memory.json")}
    where = sorted(name.rsplit("/", 1)[0] if "/" in name else name.split(".")[0] for name in figures)
    assert where == ["controller", "policy_worker/0", "policy_worker/1"], figures.keys()
    assert all([row["step"] for row in f["steps"]] == [11] and f["nrlprof"]["trigger"]["step"] == 11
               for f in figures.values())  # fmt: skip
    grown = figures[next(name for name in figures if "/0/" in name)]["steps"][0]["host_rss_mb"]
    assert grown > figures[next(name for name in figures if "/1/" in name)]["steps"][0]["host_rss_mb"] + 48
    assert "records no more" not in result.stderr


def test_a_slow_step_opens_its_window_on_a_ray_start_cluster_with_token_auth(ray_start_head, tmp_path):
    """The job joins a cluster started with `ray start` (token auth on, nrlprof's agent hook): the window of the step
    after the slow one, in both policy ranks and the controller."""
    traces = tmp_path / "traces"
    env = {**joining_env(ray_start_head["address"], ray_start_head["env"]), "PYTHONPATH": PYTHONPATH,
           "NRL_TORCH_PROFILE_DIR": str(traces), "NRL_STEP_ANATOMY": "0"}  # fmt: skip
    env.update(torch_slow(NRL_PROFILE_SLOW_FACTOR="3"))
    result = subprocess.run([sys.executable, str(PROGRAM), SlowPlan(steps=16, slow={10: 0.8}).to_json()], env=env,
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-6000:]
    found = trace_steps(traces)
    policy = {name: steps for name, steps in found.items() if name.startswith("policy_worker/")}
    assert len(policy) == 2 and set(map(frozenset, policy.values())) == {frozenset({11})}, found
    assert [name for name in found if not name.startswith("policy_worker/")] == [
        f"controller.steps11.{_pid(result)}.pt.trace.json"
    ]
    assert load_trace(traces_under(traces / "policy_worker")[0])["nrlprof"]["trigger"]["step"] == 10
