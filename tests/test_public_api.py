"""The public API's promises in README: runtime_env_for, the NeMo RL drop-ins, finish() and disable()."""

from __future__ import annotations

from nrlprof.launch.runtime_env import parse_worker_descriptor
from nrlprof.process import patches


def test_runtime_env_for_gives_a_matched_worker_its_fragment_and_nothing_to_others(activate):
    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="3:5")
    fragment = nrlprof.runtime_env_for("dtensor_policy_worker", rank=1)
    assert fragment["_nsight"]["o"] == "dtensor_policy_worker_3-4_%p"
    assert fragment["_nsight"]["capture-range"] == "cudaProfilerApi"
    worker = parse_worker_descriptor(fragment["env_vars"]["NRLPROF_WORKER"]).identity
    assert (worker.explicit_name, worker.rank) == ("dtensor_policy_worker", 1)
    assert nrlprof.runtime_env_for("reward_worker") == {}


def test_runtime_env_for_ranks_by_call_order_when_no_rank_is_given(activate):
    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="3")
    fragments = [nrlprof.runtime_env_for("policy") for _ in range(3)]
    ranks = [parse_worker_descriptor(f["env_vars"]["NRLPROF_WORKER"]).identity.rank for f in fragments]
    assert ranks == [0, 1, 2]


def test_nemo_rl_drop_ins(activate):
    from nrlprof.compat import nemo_rl

    activate(
        NRL_NSYS_WORKER_PATTERNS="*policy*",
        NRL_NSYS_PROFILE_STEP_RANGE="2",
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*none*",
        NRL_TORCH_PROFILE_STEP_RANGE="2",
    )
    config = nemo_rl.get_nsight_config_if_pattern_matches("dtensor_policy_worker")
    assert set(config) == {"nsight"} and config["nsight"]["t"] == "cuda,nvtx"
    assert nemo_rl.get_nsight_config_if_pattern_matches("vllm_generation_worker") == {}
    from nrlprof.process import state

    nemo_rl.maybe_gpu_profile_step(object(), 2)
    assert state.session.windows.is_open("torch"), "the controller's torch window opened at step 2"
    nemo_rl.maybe_gpu_profile_step(object(), 3)
    assert not state.session.windows.any_open


def test_finish_closes_open_windows_and_writes_their_files(activate, tmp_path):
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:9",
        NRL_TORCH_PROFILE_DIR=str(tmp_path),
    )
    nrlprof.step(1)
    nrlprof.step(2)
    assert not list(tmp_path.glob("controller.*.pt.trace.json"))
    nrlprof.finish()
    assert [p.name.split(".")[1] for p in tmp_path.glob("controller.*.pt.trace.json")] == ["steps2-8"]


def test_disable_removes_every_patch_and_restores_the_originals(activate):
    from ray.actor import ActorClass

    original = ActorClass.__dict__["_remote"]
    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    assert patches.installed() and ActorClass.__dict__["_remote"] is not original
    nrlprof.disable()
    assert patches.installed() == ()
    assert ActorClass.__dict__["_remote"] is original
    assert not nrlprof.is_active()
    nrlprof.step(2)  # inert after disable
