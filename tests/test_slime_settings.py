"""slime's own profiling switches as slime acts on them, its train actors' names, the loop's rollout id, and patches
of one attribute undone in turn (no cluster)."""

from __future__ import annotations

import types

import pytest

from nrlprof.adapters.slime import loop_rollout_id
from nrlprof.config.frameworks.slime import slime_fragment
from nrlprof.config.plan import MEMORY, TORCH
from nrlprof.errors import ConfigError
from nrlprof.process import patches
from nrlprof.workers.identity import WorkerIdentity

DEFAULTS = {"profile_target": ["train_overall"], "profile_step_start": 10, "profile_step_end": 12,
            "memory_recorder": "torch", "memory_snapshot_num_steps": None, "memory_snapshot_dir": "."}  # fmt: skip


def windows(fragment, kind) -> list[tuple[int, int]]:
    (backend,) = [b for b in fragment.backends if b.kind == kind]
    return [(w.first, w.last) for w in backend.steps.windows]


def test_the_pytorch_profiler_is_the_actor_roles_rollouts_from_start_to_end_of_the_run():
    fragment = slime_fragment({**DEFAULTS, "use_pytorch_profiler": True, "tensorboard_dir": "/tb"})
    assert windows(fragment, TORCH) == [(10, 11)], "Megatron's defaults 10 and 12"
    (backend,) = fragment.backends
    assert [(t.pattern, t.ranks) for t in backend.targets] == [("actor", None)] and not backend.controller
    assert dict(fragment.torch) == {"directory": "/tb"}
    assert windows(slime_fragment({**DEFAULTS, "use_pytorch_profiler": True}, first=5), TORCH) == [(15, 16)]


def test_micro_batch_targets_stay_slimes():
    profiler = {**DEFAULTS, "use_pytorch_profiler": True, "profile_target": ["train_actor", "train_log_probs"]}
    assert slime_fragment(profiler).backends == ()


def test_memory_history_runs_to_the_snapshot_rollout_with_the_out_of_memory_dump():
    fragment = slime_fragment({**DEFAULTS, "record_memory_history": True, "memory_snapshot_num_steps": 3,
                               "memory_snapshot_dir": "/mem"})  # fmt: skip
    (backend,) = fragment.backends
    assert windows(fragment, MEMORY) == [(0, 2)] and backend.output_dir == "/mem"
    assert dict(backend.options)["on_oom"] == "1"
    assert slime_fragment({**DEFAULTS, "record_memory_history": True, "memory_recorder": "memray"}).backends == ()


@pytest.mark.parametrize(
    ("switches", "named"),
    [
        ({"profile_step_start": 4, "profile_step_end": 4}, "--profile-step-end"),
        ({"profile_step_start": -1}, "--profile-step-start"),
    ],
)
def test_a_bad_switch_is_one_config_error_naming_it(switches, named):
    with pytest.raises(ConfigError) as error:
        slime_fragment({**DEFAULTS, "use_pytorch_profiler": True, **switches})
    assert str(error.value).startswith(named)


def test_slimes_train_actors_are_their_roles_not_their_one_class():
    actor = WorkerIdentity("MegatronTrainRayActor", None, 1, roles=("actor",), framework="slime")
    assert actor.name == "actor" and actor.match_names == ("actor",)
    engine = WorkerIdentity("SGLangEngine", None, 0, framework="slime")
    assert engine.name == "sglang_engine" and "SGLangEngine" in engine.match_names


def test_the_rollout_id_is_the_nearest_callers():
    def loop():
        rollout_id = 7  # noqa: F841 (read from the frame, as slime's loop variable is)
        return group_method()

    def group_method():
        return loop_rollout_id(__import__("sys")._getframe(0))

    assert loop() == 7

    def before_the_loop():
        for rollout_id in ():  # noqa: B007 (never bound: the loop has not begun)
            pass
        return loop_rollout_id(__import__("sys")._getframe(0))

    assert before_the_loop() is None, "the loop variable is not bound yet"


def test_two_patches_of_one_attribute_are_undone_last_first():
    owner = types.SimpleNamespace(call=lambda: "original")
    patches.install("test first", owner, "call", lambda original: lambda: "first " + original())
    patches.install("test second", owner, "call", lambda original: lambda: "second " + original())
    assert owner.call() == "second first original"
    patches.uninstall_all(keep=tuple(name for name in patches.installed() if not name.startswith("test ")))
    assert owner.call() == "original"
