"""A pattern that selects no worker of the job says so, once, at its backend's first window, in a plain Ray job: the
pattern, and the names the job's workers can be matched by (nrlprof.runtime.windows.unmatched)."""

from __future__ import annotations

from pathlib import Path

from helpers.framework_jobs import job_env, run_job

PLAIN_JOB = Path(__file__).parent / "programs" / "named_policy_workers_job.py"


def test_only_the_pattern_that_selects_nothing_is_named_with_the_names_the_workers_answer_to(ray_cluster, tmp_path):
    env = job_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="policy_worker,critic*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                  NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"))  # fmt: skip
    result = run_job(ray_cluster, tmp_path, PLAIN_JOB, env)
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-4000:]
    warnings = [line for line in result.stderr.splitlines() if "selects no worker" in line]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert "torch: pattern 'critic*' selects no worker of this job; its workers can be matched by: " in warning
    assert warning.split("matched by: ")[1].split(", ") == ["PolicyWorker", "policy-0", "policy-1", "policy_worker"]
    assert (tmp_path / "traces" / "policy_worker").is_dir(), "the pattern that selects them still does"


def test_a_pattern_that_selects_a_worker_is_not_named(ray_cluster, tmp_path):
    env = job_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="policy-1", NRL_TORCH_PROFILE_STEP_RANGE="2",
                  NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"))  # fmt: skip
    result = run_job(ray_cluster, tmp_path, PLAIN_JOB, env)
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-4000:]
    assert "selects no worker" not in result.stderr
