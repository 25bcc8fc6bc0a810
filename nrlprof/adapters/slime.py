"""slime: its train actors' roles, the driver's and the rollout manager's `rollout_id`, its own profilers standing
down.

- `RayTrainGroup` makes one actor class for the actor and critic roles (`MegatronTrainRayActor`), gives the role at
  `init`, after creation: nrlprof records the group's role on the class while the group creates its ranks.
- Steps: the driver's loop variable `rollout_id`, from 0 as slime counts it, taken at each actor call the driver makes
  from the loop (the first, `rollout_manager.generate.remote(rollout_id)` or its `eval`, begins the step); the
  asynchronous loop (`train_async.py`) generates the next rollout inside the current step, so its step is the
  loop's too. The `RolloutManager` actor creates the SGLang engines, which the driver never calls: where it created
  profiled engines, it steps them itself at the rollout id it sets for each generation and evaluation
  (`set_current_rollout_id`).
- With NRL_PROFILE_FRAMEWORK_CONFIG=1 slime's profiling switches are read when the first train group creates its
  ranks (nrlprof.config.frameworks.slime). In a train actor where nrlprof runs torch or memory, slime's own torch
  profilers and memory recorder stand down.
"""

from __future__ import annotations

import sys
from typing import Any

from nrlprof.adapters.stand_down import standing_down
from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.host import ControllerHost, Host

DRIVER_SOURCE = "slime's train loop (rollout_id)"
MANAGER_SOURCE = "slime's RolloutManager (rollout_id)"
LOOP_VARIABLE = "rollout_id"
# How far up from an actor call the loop's frame may be (the loop, RayTrainGroup's method, Ray's own two).
MAX_FRAMES = 8
# Whether slime's own settings were read in this process (reading them reinstalls the patches).
_read: list[bool] = []


def record_roles(session: ControllerHost, module: Any) -> None:
    group = module.RayTrainGroup

    def wrap(original):
        def _allocate_gpus_for_actor(self, *args, **kwargs):
            if session.plan.framework_config and not _read:
                _read.append(True)
                configure_from_slime(session, self.args)
            actor_class = self._actor_cls or _default_actor_class()
            actor_class.__nrlprof_roles__ = (str(self.role),)
            try:
                return original(self, *args, **kwargs)
            finally:
                del actor_class.__nrlprof_roles__

        return _allocate_gpus_for_actor

    patches.install("slime RayTrainGroup._allocate_gpus_for_actor", group, "_allocate_gpus_for_actor", wrap)


def _default_actor_class() -> type:
    from slime.backends.megatron_utils.actor import MegatronTrainRayActor

    return MegatronTrainRayActor


def configure_from_slime(session: ControllerHost, args: Any) -> None:
    from nrlprof.config.frameworks.slime import slime_fragment

    start = getattr(args, "start_rollout_id", None)
    fragment = slime_fragment(vars(args), 0 if start is None else int(start))
    session.ask_reconfiguration(fragment.plan("slime"))
    logger.info("profiling settings read from slime's own switches (--use-pytorch-profiler, --record-memory-history; "
                "NRL_PROFILE_FRAMEWORK_CONFIG=1), its rollouts counted from 0")  # fmt: skip


def take_loop_steps(session: ControllerHost, module: Any) -> None:
    """In the driver: each actor call made from within the loop carries the loop's `rollout_id`."""
    from ray.actor import ActorMethod

    def wrap(original_remote):
        def _remote(self, *args, **kwargs):
            step = loop_rollout_id(sys._getframe(1))
            if step is not None:
                session.framework_step(step, DRIVER_SOURCE)
            return original_remote(self, *args, **kwargs)

        _remote.__wrapped__ = original_remote
        return _remote

    patches.install("slime rollout_id at the driver's actor calls", ActorMethod, "_remote", wrap)


def loop_rollout_id(frame: Any) -> int | None:
    """The `rollout_id` of the nearest caller that has one (slime's loop, or a train group's method it calls)."""
    for _ in range(MAX_FRAMES):
        if frame is None:
            return None
        value = frame.f_locals.get(LOOP_VARIABLE) if LOOP_VARIABLE in frame.f_code.co_varnames else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        frame = frame.f_back
    return None


def take_manager_steps(session: ControllerHost, module: Any) -> None:
    """In the RolloutManager: the rollout id it sets steps the SGLang engines it created, where it created profiled
    ones (elsewhere the call changes nothing)."""

    def wrap(original):
        def set_current_rollout_id(rollout_id, *args, **kwargs):
            if isinstance(rollout_id, int) and len(session.tracker):
                session.gate.tells_unmatched = False  # the driver, the job's controller, tells
                session.framework_step(rollout_id, MANAGER_SOURCE)
            return original(rollout_id, *args, **kwargs)

        return set_current_rollout_id

    patches.install_with_copies("slime set_current_rollout_id", module, "set_current_rollout_id", wrap)


def stand_down_profilers(session: Host, module: Any) -> None:
    """slime's torch profilers (`_create_torch_profiler`) and memory recorder (`_BaseMemoryProfiler.create`) are idle in
    a train actor where nrlprof runs the same kind of profiler."""
    ours = standing_down(session, "slime")

    def idle_where_ours(kind: str, what: str, original):
        def make(*args, **kwargs):
            return _Idle() if ours(kind, what) else original(*args, **kwargs)

        return make

    patches.install("slime _create_torch_profiler", module, "_create_torch_profiler",
                    lambda original: idle_where_ours("torch", "torch profiler", original))  # fmt: skip
    memory = module._BaseMemoryProfiler
    patches.install("slime _BaseMemoryProfiler.create", memory, "create",
                    lambda original: staticmethod(idle_where_ours("memory", "memory recorder", original)))  # fmt: skip


class _Idle:
    """A profiler that does nothing: slime's calls on its own (start, step, stop) go here."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None
