"""`nrlprof explain` on real Ray jobs whose cause is planted (tests/planted_jobs.py): each kind of finding is named
where its cause is, with the worker, rank and steps, and no waiting rank or unrelated phase is blamed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from planted_jobs import Plan, run_job

from nrlprof.tools.advice.explain import explain
from nrlprof.tools.advice.phases import phase_map
from nrlprof.tools.figures.summarize import summarize

BOUNDS = ("rollout", "logprob", "training", "weight_sync", "reward")
PLANTED_S = 0.25


def explained(directory: Path, *options: str) -> dict:
    """`nrlprof explain DIR --json` as a user runs it."""
    run = subprocess.run(
        [sys.executable, "-m", "nrlprof", "explain", str(directory), "--json", *options],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def kinds(result: dict) -> list[str]:
    return [f["kind"] for f in result["findings"]]


def finding(result: dict, kind: str) -> dict:
    found = [f for f in result["findings"] if f["kind"] == kind]
    assert len(found) == 1, (kind, result["findings"], result["cannot_tell"])
    return found[0]


def job(activate, tmp_path: Path, plan: Plan, **variables: str) -> Path:
    nrlprof = activate(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(tmp_path / "step_anatomy"), **variables)
    run_job(nrlprof, plan)
    return tmp_path


PLANTED = {
    "rollout": {"generate_s": PLANTED_S},
    "logprob": {"logprob_s": PLANTED_S / 2, "ref_logprob_s": PLANTED_S / 2},
    "training": {"train_s": PLANTED_S},
    "weight_sync": {"sync_s": PLANTED_S},
    "reward": {"reward_s": PLANTED_S},
}


@pytest.mark.parametrize("phase", BOUNDS)
def test_the_phase_that_holds_the_critical_path_is_named_with_its_share(ray_cluster, activate, tmp_path, phase):
    result = explained(job(activate, tmp_path, Plan(**PLANTED[phase])))
    bounds = [k for k in kinds(result) if k.endswith("_bound") and k != "controller_bound"]
    assert bounds == [f"{phase}_bound"], result["findings"]
    top = finding(result, f"{phase}_bound")
    # The planted phase is 0.25 s of a step of about 0.25 + 5 x 0.04 s of other phases.
    assert 40 <= top["impact_pct"] <= 80, top
    assert top["evidence"]["figures"]["share_pct"] == top["impact_pct"]
    assert top["evidence"]["look"]["step"] in top["steps"]
    assert result["findings"][0]["kind"] == f"{phase}_bound", "the largest share comes first"
    assert all(result["steps"][s]["bound"] == phase for s in result["steps"]), result["steps"]
    assert "controller_bound" not in kinds(result)
    assert result["phases"]["policy_worker.update_actor"] == "training"
    assert result["phases"]["rollout_worker.update_weights"] == "weight_sync"


def test_the_controllers_own_time_between_calls(ray_cluster, activate, tmp_path):
    result = explained(job(activate, tmp_path, Plan(controller_s=PLANTED_S)))
    top = result["findings"][0]
    assert top["kind"] == "controller_bound", result["findings"]
    assert 40 <= top["impact_pct"] <= 80
    per_step = top["evidence"]["figures"]["ms_per_step"]
    assert 1000 * PLANTED_S <= per_step <= 1000 * PLANTED_S + 60
    assert top["evidence"]["figures"]["worst_step_ms"]["before_first_call"] >= 1000 * PLANTED_S - 5
    assert all(step["phases_ms"]["controller"] >= 1000 * PLANTED_S - 5 for step in result["steps"].values())


def test_a_rollout_replica_that_finishes_last_is_a_long_tail(ray_cluster, activate, tmp_path):
    plan = Plan(rollout_replicas=3, generate_s=0.08, extra={("generate", 2, None): 0.2})
    result = explained(job(activate, tmp_path, plan))
    tail = finding(result, "long_tail")
    assert (tail["worker"], tail["rank"]) == ("rollout_worker", 2)
    # The others wait about 0.2 s of a 0.28 s phase for it.
    assert 55 <= tail["evidence"]["figures"]["others_wait_pct_of_phase"] <= 80
    assert "straggler" not in kinds(result)


def test_a_rank_whose_calls_end_last_while_its_peers_wait_is_the_straggler(ray_cluster, activate, tmp_path):
    plan = Plan(trainers=3, train_s=0.05, extra={("train", 1, None): PLANTED_S})
    result = explained(job(activate, tmp_path, plan))
    straggler = finding(result, "straggler")
    assert (straggler["worker"], straggler["rank"]) == ("policy_worker", 1)
    assert straggler["evidence"]["figures"]["source"] == "anatomy"
    assert (
        straggler["evidence"]["figures"]["late_ms"] >= 0.6 * 1000 * PLANTED_S
    )  # the others' ends vary on a busy machine
    assert "long_tail" not in kinds(result)


def test_a_rank_late_to_the_collectives_is_named_never_the_rank_that_waits(ray_cluster, activate, tmp_path):
    # Data parallelism: both ranks all-reduce after training, so both calls end together; rank 1 arrives late.
    plan = Plan(trainers=2, train_s=0.05, collective_mb=1, extra={("train", 1, None): PLANTED_S})
    directory = job(activate, tmp_path, plan, NRL_TORCH_PROFILE_WORKER_PATTERNS="policy_worker",
                    NRL_TORCH_PROFILE_STEP_RANGE="3:6", NRL_TORCH_PROFILE_DIR=str(tmp_path / "torch"))  # fmt: skip
    result = explained(directory)
    straggler = finding(result, "straggler")
    assert (straggler["worker"], straggler["rank"]) == ("policy_worker", 1), straggler
    figures = straggler["evidence"]["figures"]
    assert figures["source"] == "trace"
    assert figures["peers_collective_ms"] - figures["its_collective_ms"] >= 1000 * PLANTED_S - 50
    assert straggler["evidence"]["look"]["file"].endswith(".pt.trace.json")
    assert "/policy_worker/1/" in straggler["evidence"]["look"]["file"]
    assert not any(f["kind"] == "straggler" and f["rank"] == 0 for f in result["findings"])


def test_collectives_no_compute_hides_are_exposed_communication(ray_cluster, activate, tmp_path):
    # Both ranks arrive together and all-reduce 64 MB with gloo after their work, nothing beside it.
    plan = Plan(trainers=2, train_s=0.05, collective_mb=64)
    directory = job(activate, tmp_path, plan, NRL_TORCH_PROFILE_WORKER_PATTERNS="policy_worker",
                    NRL_TORCH_PROFILE_STEP_RANGE="3:6", NRL_TORCH_PROFILE_DIR=str(tmp_path / "torch"))  # fmt: skip
    result = explained(directory)
    exposed = finding(result, "exposed_comm")
    figures = exposed["evidence"]["figures"]
    assert exposed["worker"] == "policy_worker" and figures["device"] == "cpu"
    assert figures["exposed_ms_per_step"] >= 10, figures
    assert exposed["steps"] == [3, 4, 5]
    assert "straggler" not in kinds(result)


def test_a_step_slower_on_every_rank_is_a_slow_step_not_a_straggler(ray_cluster, activate, tmp_path):
    plan = Plan(steps=7, extra={("train", None, 5): 0.6})
    result = explained(job(activate, tmp_path, plan))
    slow = finding(result, "slow_steps")
    assert 5 in slow["steps"], slow  # (a busy machine may slow another step too: it is then named as well)
    detail = next(d for d in slow["evidence"]["figures"]["slow"] if d["step"] == 5)
    assert detail["slowest"] == "policy_worker.update_actor" and detail["factor"] >= 1.5
    assert detail["grew_ms"] >= 400
    assert "straggler" not in kinds(result)
    assert any("step 1, the job's first" in s for s in result["cannot_tell"])


def test_a_group_idle_while_another_phase_runs_names_what_it_waits_on(ray_cluster, activate, tmp_path):
    plan = Plan(generate_s=PLANTED_S, train_s=PLANTED_S)
    result = explained(job(activate, tmp_path, plan))
    idle = {f["worker"]: f for f in result["findings"] if f["kind"] == "idle"}
    assert "waiting on rollout" in idle["policy_worker"]["evidence"]["summary"], idle
    assert "waiting on training" in idle["rollout_worker"]["evidence"]["summary"], idle
    assert 40 <= idle["policy_worker"]["evidence"]["figures"]["waiting_on_workers_pct"] <= 75


def test_async_rollout_overlapping_training_is_not_idle_and_its_waits_come_from_overlaps(ray_cluster, activate,
                                                                                         tmp_path):  # fmt: skip
    # The next batch is generated (0.3 s) beside this step's training (0.15 s): the trainer waits on rollout for
    # the rest, rollout never waits on the trainer.
    plan = Plan(generate_s=0.3, train_s=0.15, async_rollout=True)
    result = explained(job(activate, tmp_path, plan))
    total = result["overlap"]["total_ms"]
    steps = len(result["steps"])
    assert total["overlap_ms"] >= steps * (150 - 40), total
    assert steps * (150 - 40) <= total["trainer_waits_on_rollout_ms"] <= steps * (150 + 150), total
    assert total["rollout_waits_on_trainer_ms"] <= steps * 40, total
    idle = [f for f in result["findings"] if f["kind"] == "idle" and f["worker"] == "rollout_worker"]
    assert all(f["evidence"]["figures"]["waits_on_pct"].get("training", 0) <= 25 for f in idle), idle


def test_windows_that_slow_their_steps_are_said_to_overstate(ray_cluster, activate, tmp_path):
    plan = Plan(steps=8, slower_under_profiler_s=0.2)
    directory = job(activate, tmp_path, plan, NRL_TORCH_PROFILE_WORKER_PATTERNS="policy_worker",
                    NRL_TORCH_PROFILE_STEP_RANGE="4:6", NRL_TORCH_PROFILE_DIR=str(tmp_path / "torch"))  # fmt: skip
    result = explained(directory)
    distortion = finding(result, "profiler_distortion")
    assert {4, 5} <= set(distortion["steps"]), distortion
    assert 7 not in distortion["steps"] and 8 not in distortion["steps"]
    assert distortion["evidence"]["figures"]["slower_pct"] > 20


def test_memory_that_grows_every_step(ray_cluster, activate, tmp_path):
    plan = Plan(steps=6, grow_mb=64)
    directory = job(activate, tmp_path, plan, NRL_MEMORY_PROFILE_WORKER_PATTERNS="policy_worker",
                    NRL_MEMORY_PROFILE_STEP_RANGE="2:6", NRL_MEMORY_PROFILE_DIR=str(tmp_path / "memory"))  # fmt: skip
    result = explained(directory)
    growth = [f for f in result["findings"] if f["kind"] == "memory_growth"]
    assert {(f["worker"], f["rank"]) for f in growth} == {("policy_worker", 0), ("policy_worker", 1)}, result
    assert all(55 <= f["evidence"]["figures"]["mb_per_step"] <= 80 for f in growth)


def test_the_same_job_explained_in_process_and_by_the_command(ray_cluster, activate, tmp_path):
    result = explained(job(activate, tmp_path, Plan(**PLANTED["training"])))
    here = explain(summarize(tmp_path, anatomy_view=False), phase_map()).to_json()
    assert [f["kind"] for f in here["findings"]] == kinds(result)
    assert here["steps"] == result["steps"]


def test_a_balanced_job_gets_none_of_the_findings_whose_cause_is_absent(ray_cluster, activate, tmp_path):
    """No rank or replica slower, no collectives, no growth under a memory window, no controller work: those kinds stay
    silent (the planted tests above name each where its cause is). The window's own per-step work in steps of 0.2 s
    is a profiler_distortion, rightly: it is not asserted either way here."""
    plan = Plan(steps=8)
    directory = job(activate, tmp_path, plan, NRL_MEMORY_PROFILE_WORKER_PATTERNS="policy_worker",
                    NRL_MEMORY_PROFILE_STEP_RANGE="2:8", NRL_MEMORY_PROFILE_DIR=str(tmp_path / "memory"))  # fmt: skip
    result = explained(directory, "--all")
    absent = {"straggler", "long_tail", "exposed_comm", "memory_growth", "controller_bound"}
    assert absent.isdisjoint(kinds(result)), result["findings"]
