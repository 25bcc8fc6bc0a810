"""Worker identity (names, snake case, rank) and pattern matching."""

from __future__ import annotations

import pytest

from nrlprof.config.plan import BackendPlan, Plan, Target
from nrlprof.config.steps import StepSelection
from nrlprof.workers.identity import RankCounter, WorkerIdentity, file_safe, rank_from_env_vars, snake_case
from nrlprof.workers.matching import match_worker


@pytest.mark.parametrize(
    ("class_name", "snake"),
    [
        ("DTensorPolicyWorker", "dtensor_policy_worker"),
        ("VllmGenerationWorker", "vllm_generation_worker"),
        ("MegatronPolicyWorker", "megatron_policy_worker"),
        ("Worker2Go", "worker2_go"),
        ("HTTPServer", "httpserver"),
        ("already_snake", "already_snake"),
    ],
)
def test_snake_case_rule(class_name, snake):
    assert snake_case(class_name) == snake


def plan_with(*targets: Target) -> Plan:
    return Plan(backends=(BackendPlan("nsys", targets, StepSelection.from_steps([2])),))


def test_matched_against_actor_name_class_name_and_snake_name():
    plan = plan_with(Target("*policy*"))
    assert match_worker(plan, WorkerIdentity("DTensorPolicyWorker", None, 0))[0].matched_name == "dtensor_policy_worker"
    assert match_worker(plan, WorkerIdentity("Other", "my-policy", 0))[0].matched_name == "my-policy"
    assert match_worker(plan_with(Target("DTensor*")), WorkerIdentity("DTensorPolicyWorker", None, 0))
    assert not match_worker(plan, WorkerIdentity("RewardWorker", None, 0))


def test_first_matching_pattern_wins_and_ranks_filter():
    plan = plan_with(Target("*worker", frozenset({1})), Target("*policy*"), Target("dtensor*"))
    match = match_worker(plan, WorkerIdentity("DTensorPolicyWorker", None, 0))[0]
    assert match.target.pattern == "*policy*"
    assert match_worker(plan, WorkerIdentity("DTensorPolicyWorker", None, 1))[0].target.pattern == "*worker"
    assert not match_worker(
        plan_with(Target("*policy*", frozenset({0}))), WorkerIdentity("DTensorPolicyWorker", None, 2)
    )


def test_reported_name_and_file_name():
    identity = WorkerIdentity("DTensorPolicyWorker", "policy 0; rm -rf /", 0)
    assert identity.name == "dtensor_policy_worker"
    assert file_safe("policy 0; rm -rf /'\"") == "policy_0_rm_-rf"
    assert WorkerIdentity("X", None, 0, explicit_name="vllm_tp_worker").name == "vllm_tp_worker"


def test_rank_from_env_or_creation_order():
    assert rank_from_env_vars({"RANK": "3"}) == 3
    assert rank_from_env_vars({"RANK": "x"}) is None
    assert rank_from_env_vars(None) is None
    counter = RankCounter()
    assert [counter.take("a"), counter.take("a"), counter.take("b"), counter.take("a")] == [0, 1, 0, 2]


def test_an_explicit_name_is_matched_and_names_the_files():
    from nrlprof.config.env import plan_from_env
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import match_worker

    plan_ = plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "vllm_generation_worker", "NRL_NSYS_PROFILE_STEP_RANGE": "2"})
    named = WorkerIdentity("Worker", None, 0, explicit_name="vllm_generation_worker")
    assert [m.target.pattern for m in match_worker(plan_, named)] == ["vllm_generation_worker"]
    assert named.name == "vllm_generation_worker" and named.file_name == "vllm_generation_worker"
    assert not match_worker(plan_, WorkerIdentity("Worker", None, 0))
