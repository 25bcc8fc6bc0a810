"""What a pattern means under each framework, patches of names other modules copied, and RLinf's step numbers."""

from __future__ import annotations

import sys
import types
from fnmatch import fnmatchcase

import pytest

from nrlprof.config.plan import Plan
from nrlprof.config.yaml_config import plan_from_mapping
from nrlprof.process import patches
from nrlprof.workers.frameworks import framework_of_class
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker

NEMO_WORKERS = [("DTensorPolicyWorker", "lm_policy-0-0"), ("VllmGenerationWorker", "vllm_policy-0-0")]


def nemo(class_name: str, actor_name: str) -> WorkerIdentity:
    return WorkerIdentity(class_name, actor_name, 0, framework="nemo_rl")


@pytest.mark.parametrize(
    ("pattern", "selected"),
    [
        ("*policy*", ["dtensor_policy_worker"]),
        ("*vllm*", ["vllm_generation_worker"]),
        ("megatron_policy_worker", []),
        ("lm_policy*", []),
    ],
)
def test_nemo_rl_patterns_match_its_worker_type_names_only(pattern, selected):
    workers = [nemo(*worker) for worker in NEMO_WORKERS]
    assert [w.name for w in workers if any(fnmatchcase(n, pattern) for n in w.match_names)] == selected


def test_the_framework_is_read_from_the_class_and_its_bases():
    fake = types.ModuleType("rlinf.scheduler.worker.worker")
    base = type("Worker", (), {"__module__": fake.__name__})
    own = type("ActorWorker", (base,), {"__module__": "my_job"})
    assert framework_of_class(own) == "rlinf"
    assert framework_of_class(type("Plain", (), {"__module__": "my_job"})) is None


def test_rlinf_workers_are_their_group_and_plain_actors_keep_todays_names():
    rlinf = WorkerIdentity("ActorWorker", "ActorGroup:1", 1, framework="rlinf")
    assert rlinf.match_names == ("ActorGroup",) and rlinf.name == "ActorGroup"
    plain = WorkerIdentity("DTensorPolicyWorker", "lm_policy-0-0", 0)
    assert plain.match_names == ("lm_policy-0-0", "DTensorPolicyWorker", "dtensor_policy_worker")
    openrlhf = WorkerIdentity("PolicyModelActor", None, 0, framework="openrlhf")
    assert openrlhf.match_names == ("PolicyModelActor", "policy_model_actor")


def test_rlinf_steps_count_from_zero_as_rlinf_counts_them():
    section = {"cluster": {"profiling": {"backend": "nsight", "worker_groups": ["ActorGroup"], "steps": [0, 1]}}}
    plan = plan_from_mapping(section)
    (backend,) = plan.backends
    assert [(w.first, w.last) for w in backend.steps.windows] == [(0, 1)]
    identity = WorkerIdentity("ActorWorker", "ActorGroup:0", 0, framework="rlinf")
    assert [m.matched_name for m in match_worker(plan, identity)] == ["ActorGroup"]
    assert match_worker(Plan(), identity) == ()


def test_a_function_other_modules_imported_by_name_is_patched_there_too_and_restored(monkeypatch):
    def original() -> str:
        return "framework's"

    owner, copier = types.ModuleType("fw_owner"), types.ModuleType("fw_copier")
    owner.helper = copier.helper = original
    monkeypatch.setitem(sys.modules, "fw_owner", owner)
    monkeypatch.setitem(sys.modules, "fw_copier", copier)
    try:
        patches.install_with_copies("test helper", owner, "helper", lambda _: lambda: "nrlprof's")
        assert owner.helper() == copier.helper() == "nrlprof's"
    finally:
        patches.uninstall("test helper")
        patches.uninstall("test helper in fw_copier")
    assert owner.helper is copier.helper is original
