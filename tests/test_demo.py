"""`nrlprof demo` end to end: the bundled job on a local Ray cluster, in a subprocess, as a user runs it."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import clusters
from helpers.environment import environment_without

from nrlprof.demo.cli import add_arguments, demo_environment

ROOT = Path(__file__).resolve().parent.parent

PROFILED = {
    ("dtensor_policy_worker", "*policy*", (0, 1)),
    ("vllm_generation_worker", "*generation*", (0,)),
    ("vllm_tensor_parallel_worker", "*tensor_parallel*", (0, 1)),
}


# A guard against a hang, not a time limit: the demo took 41 s on a quiet machine and more than 240 s beside other
# Ray jobs at a load of 9-14 on 2 cores; pytest-timeout's 600 s covers the fixture's test too.
DEMO_HANG_S = 540


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    work = tmp_path_factory.mktemp("demo")
    out = work / "out"
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "nrlprof", "demo", "--steps", "4", "--range", "2:4", "--out", str(out)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_HANG_S,
    )
    clusters.count_start("of their own, in tests")  # the demo is the job the README starts first: its own cluster
    return result, out


def test_exits_zero(demo_run):
    result, _ = demo_run
    assert result.returncode == 0, result.stdout + result.stderr


def test_traces_for_every_matched_worker_and_rank(demo_run):
    _, out = demo_run
    for worker, _, ranks in PROFILED:
        for rank in ranks:
            traces = list((out / "torch" / worker / str(rank)).glob("*.steps2-3.*.pt.trace.json"))
            assert len(traces) == 1, f"{worker} rank {rank}: {traces}"
    assert sorted(p.name for p in (out / "torch").iterdir() if not p.name.startswith(".") and p.is_dir()) == sorted(
        worker for worker, _, _ in PROFILED
    )


def test_no_trace_for_the_unmatched_reward_worker(demo_run):
    _, out = demo_run
    assert not [p for p in out.rglob("*") if "reward" in p.name]


def test_controller_traces_at_the_top(demo_run):
    _, out = demo_run
    assert len(list((out / "torch").glob("controller.steps2-3.*.pt.trace.json"))) == 1


def test_match_lines_printed(demo_run):
    result, _ = demo_run
    output = result.stdout + result.stderr
    for worker, pattern, ranks in PROFILED:
        line = f"Torch profiling enabled for worker '{worker}' (matched pattern '{pattern}')"
        assert output.count(line) == len(ranks), line
    assert "worker 'reward_worker'" not in output  # unprofiled: only the step anatomy shows its calls


def test_files_and_step_table_printed(demo_run):
    result, _ = demo_run
    assert "dtensor_policy_worker/1/dtensor_policy_worker.rank1.steps2-3." in result.stdout
    assert "step 2" in result.stdout and "step 3" in result.stdout
    assert "vllm_tensor_parallel_worker rank 1" in result.stdout


def test_step_anatomy_of_every_step_printed(demo_run):
    result, out = demo_run
    assert len(list((out / "step_anatomy").glob("run-*/steps.jsonl"))) == 1
    text = result.stdout[result.stdout.index("step anatomy") :]
    # The job runs generation, then reward, then training: that chain sets every step's length.
    path = "critical path: vllm_generation_worker.generate -> reward_worker.score -> dtensor_policy_worker.train"
    assert text.count(path) == 4, text
    for step in (1, 2, 3, 4):
        assert f"\nstep {step}: " in text
    # the tensor-parallel workers, created by the generation worker, matched a pattern of their own: every view
    # names them as their traces do
    assert "vllm_tensor_parallel_worker.generate  2 call(s), ranks 0-1" in text
    assert "vllm_generation_worker.vllm_tensor_parallel_worker" not in text
    assert f"nrlprof summary {out}" in text
    # nrlprof's own time in the driver, apart from the job's: warm-up, start and stop of the window 2-3
    for step, work in ((1, "prepare torch 2-3"), (2, "start torch 2-3"), (4, "stop torch")):
        step_text = text[text.index(f"\nstep {step}: ") :].split("\nstep ", 2)[1]
        assert f"ms  nrlprof in the driver: {work}" in step_text, step_text


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_settings_flags_then_variables_then_defaults(tmp_path):
    environ = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "1:2"}
    torch_dir = demo_environment(parse("--range", "2:3", "--out", str(tmp_path)), environ, nsys=None)
    assert environ["NRL_TORCH_PROFILE_WORKER_PATTERNS"] == "*policy*"
    assert environ["NRL_TORCH_PROFILE_STEP_RANGE"] == "2:3"
    assert torch_dir == tmp_path / "torch"
    assert environ["NRL_STEP_ANATOMY_DIR"] == str(tmp_path / "step_anatomy")
    assert not any(name.startswith("NRL_NSYS_") for name in environ)


def test_settings_defaults_and_nsys_when_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    environ = {"NRL_TORCH_PROFILE_DIR": str(tmp_path / "mine")}
    torch_dir = demo_environment(parse(), environ, nsys="/usr/bin/nsys")
    assert environ["NRL_TORCH_PROFILE_STEP_RANGE"] == environ["NRL_NSYS_PROFILE_STEP_RANGE"] == "3:5"
    assert environ["NRL_NSYS_WORKER_PATTERNS"] == "*policy*"
    assert torch_dir == tmp_path / "mine"


def test_the_demo_writes_and_reads_manifests_like_a_real_job(demo_run):
    result, out = demo_run
    manifests = sorted((out / "manifests").glob("manifest-*.jsonl"))
    assert len(manifests) == 6  # the controller, two policy ranks, the generation worker, its two children
    assert "profiled windows, from the manifests (6):" in result.stdout
    done = subprocess.run([sys.executable, "-m", "nrlprof", "summary", "--json", str(out)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    windows = sorted((o["worker"], o["rank"], o["status"]) for o in data["profiler_overhead"])
    assert windows == sorted([("controller", None, "ok"), ("dtensor_policy_worker", 0, "ok"),
                              ("dtensor_policy_worker", 1, "ok"), ("vllm_generation_worker", 0, "ok"),
                              ("vllm_tensor_parallel_worker", 0, "ok"), ("vllm_tensor_parallel_worker", 1, "ok")],
                             key=str)  # fmt: skip
    groups = {p["worker"] for step in data["anatomy"]["steps"].values() for p in step["phases"]}
    assert groups == {"dtensor_policy_worker", "vllm_generation_worker", "vllm_tensor_parallel_worker",
                      "reward_worker"}  # fmt: skip
