"""nrlprof on NeMo RL's shapes, as NeMo RL's guide promises them: patterns match NeMo's worker-type names only.

NeMo RL is not on the package index: `tests/frameworks/nemo_rl/` is a stand-in written from NeMo RL's source at
commit 7ea279abfbeb698b092856d0dab61e7cf39bc909 (`tests/frameworks/nemo_rl/COMMIT`), with its module paths, its
actor names (`lm_policy-<pg>-<bundle>`, `vllm_policy-<pg>-<bundle>`), its worker builder (workers created by a
pooled IsolatedWorkerInitializer actor from the class's import path, the driver's environment as env_vars) and
its GRPO loop (`maybe_gpu_profile_step` for the policy and the generation at the top of each step).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.framework_jobs import job_env, readme_block_variables, readme_log_lines, run_job
from helpers.on_demand import asked_steps, printed_answer
from helpers.trace_reading import load_trace, marker_steps, traces_under

pytestmark = pytest.mark.framework
HERE = Path(__file__).parent
README = HERE.parent.parent / "README.md"


def pids(stdout: str, label: str) -> list[int]:
    line = next(line for line in stdout.splitlines() if line.startswith(label + " "))
    return [int(word) for word in line.split()[1:]]


def test_readme_recipe_profiles_the_policy_workers_only_under_one_nsys(ray_cluster, tmp_path, calls, stand_in_env):
    variables = readme_block_variables(README, "**NeMo RL**")
    own_log = tmp_path / "nemo-own-profiling.log"
    env = job_env(**variables, NEMO_OWN_PROFILING_LOG=str(own_log))
    # NeMo RL gives its workers the driver's whole environment, PATH included: nsys is on the user's PATH.
    env["PATH"] = f"{stand_in_env['bin']}:{env['PATH']}"
    result = run_job(ray_cluster, tmp_path, HERE / "grpo_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    printed = readme_log_lines(README, "**NeMo RL**")
    assert len(printed) == 3 and all(line in log for line in printed), "the README's log lines, as printed"
    assert "worker 'vllm_generation_worker'" not in log, "`*policy*` does not select vLLM (its actors: vllm_policy-*)"
    assert not own_log.exists(), "NeMo RL's own start_gpu_profiling() was never called"
    policy, vllm = pids(result.stdout, "POLICY"), pids(result.stdout, "VLLM")
    launched = {r["pid"]: r["options"][-1] for r in calls() if r["pid"] in policy + vllm}
    assert sorted(launched) == policy, "each policy worker under exactly one nsys, the vLLM worker under none"
    session = Path(result.stdout.split("SESSION")[1].split()[0])
    first, stop = (int(n) for n in variables["NRL_NSYS_PROFILE_STEP_RANGE"].split(":"))
    label = str(first) if stop == first + 1 else f"{first}-{stop - 1}"
    for pid in policy:
        assert launched[pid].endswith(f"dtensor_policy_worker_{label}_%p")
        reports = list((session / "logs" / "nsight").glob(f"dtensor_policy_worker_{label}_{pid}.*nsys-rep"))
        assert len(reports) == 1, "one report, where the README says"


@pytest.mark.parametrize(
    ("pattern", "selected"),
    [("*vllm*", "vllm_generation_worker"), ("megatron_policy_worker", None)],
)
def test_a_pattern_selects_only_the_worker_types_it_names(ray_cluster, tmp_path, pattern, selected):
    traces = tmp_path / "traces"
    env = job_env(NRL_TORCH_PROFILE_WORKER_PATTERNS=pattern, NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                  NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_job(ray_cluster, tmp_path, HERE / "grpo_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    workers = sorted(p.name for p in traces.iterdir() if p.is_dir()) if traces.exists() else []
    assert workers == ([selected] if selected else [])
    if selected:
        assert f"Torch profiling enabled for worker '{selected}' (matched pattern '{pattern}')" in result.stderr
        (trace,) = traces_under(traces / selected)
        assert marker_steps(load_trace(trace), "vllm.generate.") == {2, 3}
        return
    (line,) = [line for line in result.stderr.splitlines() if "selects no worker" in line]
    assert "torch: pattern 'megatron_policy_worker' selects no worker of this job" in line
    listed = line.split("can be matched by: ")[1].split(", ")
    assert {"dtensor_policy_worker", "vllm_generation_worker"} <= set(listed)
    assert not any(name.startswith(("lm_policy", "vllm_policy")) for name in listed), "actor names are not matched"


def test_an_armed_grpo_job_takes_a_window_asked_for_at_its_own_steps(ray_cluster, tmp_path):
    import nrlprof

    traces = tmp_path / "traces"
    env = job_env(NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(traces))
    # This checkout's nrlprof first, in the job and in the workers NeMo RL gives the job's environment.
    env["PYTHONPATH"] = os.pathsep.join([str(Path(nrlprof.__file__).parent.parent), env["PYTHONPATH"]])
    result = run_job(ray_cluster, tmp_path, HERE / "armed_grpo_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    answer = printed_answer(result.stdout)
    assert answer.state == "closed", (answer, result.stderr[-6000:])
    steps = asked_steps(answer)
    assert len(steps) == 2 and answer.last < 30
    assert "NeMo RL's maybe_gpu_profile_step" in result.stderr or "took over NeMo RL" in result.stderr
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["vllm_generation_worker"]
    (trace,) = traces_under(traces / "vllm_generation_worker")
    assert marker_steps(load_trace(trace), "vllm.generate.") == steps
