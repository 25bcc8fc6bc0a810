"""SkyRL's own profiling settings as SkyRL's docs mean them, and its workers' names (no cluster, no SkyRL install)."""

from __future__ import annotations

import pytest

from nrlprof.config.frameworks.skyrl import skyrl_fragment
from nrlprof.config.plan import MEMORY, TORCH
from nrlprof.errors import ConfigError
from nrlprof.workers.identity import WorkerIdentity


def windows(fragment, kind=TORCH) -> list[tuple[int, int]]:
    (backend,) = [b for b in fragment.backends if b.kind == kind]
    return [(w.first, w.last) for w in backend.steps.windows]


def policy(**profiler) -> dict:
    return {"torch_profiler_config": {"enable": True, "save_path": "/abs/traces", **profiler}, "record_memory": False}


def test_skyrls_default_schedule_records_global_step_12_of_rank_0_of_the_policy():
    fragment = skyrl_fragment(policy(), "/ckpt", 1, None)
    assert windows(fragment) == [(12, 12)]
    (backend,) = fragment.backends
    assert [(t.pattern, t.ranks) for t in backend.targets] == [("policy", frozenset({0}))]
    assert not backend.controller, "SkyRL profiles neither the controller nor critic, ref and engines"
    assert dict(fragment.torch) == {"record_shapes": True, "profile_memory": False, "with_stack": True,
                                    "with_flops": False, "gzip": False, "directory": "/abs/traces"}  # fmt: skip


def test_each_cycle_is_a_window_and_repeat_zero_runs_to_the_last_step():
    assert windows(skyrl_fragment(policy(skip_first=0, warmup=1, active=2, repeat=2), "/c", 1, None)) == [
        (2, 3),
        (5, 6),
    ]
    assert windows(skyrl_fragment(policy(skip_first=0, warmup=0, active=1, repeat=3), "/c", 1, None)) == [
        (1, 1), (2, 2), (3, 3)
    ], "adjacent cycles stay a trace each, as SkyRL writes them"  # fmt: skip
    assert windows(skyrl_fragment(policy(skip_first=1, wait=1, warmup=1, active=1, repeat=0), "/c", 1, 10)) == [
        (4, 4), (7, 7), (10, 10)
    ]  # fmt: skip


def test_a_resumed_run_counts_the_schedule_from_the_step_its_loop_starts_at():
    assert windows(skyrl_fragment(policy(skip_first=2, warmup=1, active=1), "/c", 41, None)) == [(44, 44)]


def test_record_memory_is_the_policy_ranks_whole_run_under_the_checkpoint_path():
    fragment = skyrl_fragment({"record_memory": True}, "/ckpt", 1, 20)
    (backend,) = fragment.backends
    assert backend.kind == MEMORY and backend.output_dir == "/ckpt/memory_snapshots"
    assert windows(fragment, MEMORY) == [(1, 20)] and [t.pattern for t in backend.targets] == ["policy"]


def test_off_or_stacks_leaves_nothing_to_nrlprof():
    assert skyrl_fragment({"torch_profiler_config": {"enable": False}}, "/c", 1, None).backends == ()
    assert skyrl_fragment(policy(export_type="stacks"), "/c", 1, None).backends == ()


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        (policy(ranks="0"), "trainer.policy.torch_profiler_config.ranks"),
        (policy(active=0), "trainer.policy.torch_profiler_config.active"),
        (policy(skip_first=-1), "trainer.policy.torch_profiler_config.skip_first"),
        (policy(enable="yes"), "trainer.policy.torch_profiler_config.enable"),
        ({"record_memory": "yes"}, "trainer.policy.record_memory"),
    ],
)
def test_a_bad_setting_is_one_config_error_naming_it(settings, named):
    with pytest.raises(ConfigError) as error:
        skyrl_fragment(settings, "/c", 1, None)
    assert str(error.value).startswith(named)


def test_a_schedule_past_the_last_step_is_refused():
    with pytest.raises(ConfigError, match="after the run's last step 5"):
        skyrl_fragment(policy(), "/c", 1, 5)


def test_skyrl_workers_are_their_roles_and_their_classes():
    fsdp = WorkerIdentity("FSDPPolicyWorkerBase", None, 1, roles=("policy",), framework="skyrl")
    assert fsdp.name == "policy"
    assert fsdp.match_names == ("policy", "FSDPPolicyWorkerBase", "fsdppolicy_worker_base")
    server = WorkerIdentity("VLLMServerActor", None, 0, framework="skyrl")
    assert server.name == "vllmserver_actor" and "VLLMServerActor" in server.match_names
