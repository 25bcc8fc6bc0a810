"""SkyRL: its workers' roles, its trainers' global step, its controller task's end, its own profilers standing down.

- `PPORayActorGroup` creates its rank actors unnamed, in rank order; the role comes from the worker's base class
  (`PolicyWorkerBase`, `CriticWorkerBase`, `RefWorkerBase`), not from the FSDP or Megatron class: nrlprof records
  the role on each base, so `policy` selects the policy ranks of either backend.
- Steps: `RayPPOTrainer.global_step`, from 1. The synchronous trainer fires `on_step_start` at the top of each step;
  the fully async trainer fires none, but calls `_profiler_start` before its first step and `_profiler_step` after
  each: there step n begins at the `_profiler_step` that ends step n-1.
- The loop runs in a Ray task (`skyrl_entrypoint`), the controller, where no exit hook runs: `train` closes the
  windows when it ends. With NRL_PROFILE_FRAMEWORK_CONFIG=1 the trainer's `trainer.policy.torch_profiler_config`
  and `record_memory` are read when it is made (nrlprof.config.frameworks.skyrl), and again from the step the loop
  starts at when a resumed run does not start at 1.
- In a worker where nrlprof runs torch, SkyRL's own `Profiler` stands down; where it runs memory, so does
  `save_memory_snapshot`.
"""

from __future__ import annotations

from typing import Any

from nrlprof.adapters.stand_down import standing_down
from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.host import ControllerHost, Host

ROLE_BASES = {"PolicyWorkerBase": "policy", "CriticWorkerBase": "critic", "RefWorkerBase": "ref"}
SYNC_SOURCE = "SkyRL's RayPPOTrainer (global_step)"
ASYNC_SOURCE = "SkyRL's fully async trainer (global_step)"
FIRST_STEP = 1
ASYNC_TRAINER = "FullyAsyncRayPPOTrainer"


def record_roles(session: ControllerHost, module: Any) -> None:
    for name, role in ROLE_BASES.items():
        base = getattr(module, name, None)
        if isinstance(base, type):
            patches.install_undoable(f"skyrl {name} role", lambda base=base, role=role: _set_role(base, role))


def _set_role(base: type, role: str):
    base.__nrlprof_roles__ = (role,)

    def undo() -> None:
        if "__nrlprof_roles__" in vars(base):
            del base.__nrlprof_roles__

    return undo


def take_trainer_steps(session: ControllerHost, module: Any) -> None:
    trainer = module.RayPPOTrainer

    def wrap_fire(original):
        def _fire(self, event_name, *args, **kwargs):
            if event_name == "on_step_start" and not _fully_async(self):
                session.framework_step(int(self.global_step), SYNC_SOURCE)
            return original(self, event_name, *args, **kwargs)

        return _fire

    def wrap_profiler_start(original):
        def _profiler_start(self, *args, **kwargs):
            if session.plan.framework_config and int(self.global_step) != FIRST_STEP:
                configure_from_skyrl(session, self, int(self.global_step))
            if _fully_async(self):
                session.framework_step(int(self.global_step), ASYNC_SOURCE)
            return original(self, *args, **kwargs)

        return _profiler_start

    def wrap_profiler_step(original):
        def _profiler_step(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            last = getattr(self, "total_training_steps", None)
            following = int(self.global_step) + 1
            if _fully_async(self) and (not isinstance(last, int) or following <= last):
                session.framework_step(following, ASYNC_SOURCE)
            return result

        return _profiler_step

    def wrap_init(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if session.plan.framework_config:
                configure_from_skyrl(session, self, FIRST_STEP)

        return __init__

    patches.install("skyrl RayPPOTrainer._fire", trainer, "_fire", wrap_fire)
    patches.install("skyrl RayPPOTrainer._profiler_start", trainer, "_profiler_start", wrap_profiler_start)
    patches.install("skyrl RayPPOTrainer._profiler_step", trainer, "_profiler_step", wrap_profiler_step)
    patches.install("skyrl RayPPOTrainer.__init__", trainer, "__init__", wrap_init)
    finish_after_train(session, trainer)


def _fully_async(trainer: Any) -> bool:
    """SkyRL's fully async trainer (or a subclass): it fires no on_step_start, only the profiler hooks."""
    return any(klass.__name__ == ASYNC_TRAINER for klass in type(trainer).__mro__)


def take_async_trainer_end(session: ControllerHost, module: Any) -> None:
    trainer = getattr(module, ASYNC_TRAINER, None)
    if isinstance(trainer, type) and "train" in vars(trainer):
        finish_after_train(session, trainer)


def finish_after_train(session: ControllerHost, trainer: type) -> None:
    """The controller task keeps running after `train` (no exit hook runs): its windows close when `train` ends."""
    patches.install_finally(f"skyrl {trainer.__name__}.train", trainer, "train", session.finish)


def configure_from_skyrl(session: ControllerHost, trainer: Any, first_step: int) -> None:
    """`trainer.policy.torch_profiler_config` and `record_memory`, as SkyRL's docs mean them, from `first_step`."""
    import dataclasses

    from nrlprof.config.frameworks.skyrl import skyrl_fragment

    cfg = trainer.cfg.trainer
    policy = cfg.policy
    section = {
        "torch_profiler_config": dataclasses.asdict(policy.torch_profiler_config),
        "record_memory": policy.record_memory,
    }
    last = getattr(trainer, "total_training_steps", None)
    fragment = skyrl_fragment(section, cfg.ckpt_path, first_step, last if isinstance(last, int) else None)
    session.ask_reconfiguration(fragment.plan("skyrl"))
    logger.info(
        "profiling settings read from SkyRL's own config (trainer.policy.torch_profiler_config, record_memory; "
        "NRL_PROFILE_FRAMEWORK_CONFIG=1), its schedule from global step %d",
        first_step,
    )


def stand_down_profiler(session: Host, module: Any) -> None:
    """SkyRL's `Profiler` (torch_profiler_config) does nothing in a worker where nrlprof runs its torch profiler."""
    ours = standing_down(session, "SkyRL")

    def wrap(original):
        def act(self, *args, **kwargs):
            return None if ours("torch", "torch profiler") else original(self, *args, **kwargs)

        return act

    for name in ("start", "step", "stop"):
        patches.install(f"skyrl Profiler.{name}", module.Profiler, name, wrap)


def stand_down_memory_snapshots(session: Host, module: Any) -> None:
    """SkyRL's `save_memory_snapshot` (record_memory) does nothing in a worker where nrlprof runs its memory backend."""
    worker = getattr(module, "Worker", None)
    if not isinstance(worker, type) or "save_memory_snapshot" not in vars(worker):
        return

    def wrap(original):
        def save_memory_snapshot(self, *args, **kwargs):
            if session.targets.get("memory") is not None:
                return None
            return original(self, *args, **kwargs)

        return save_memory_snapshot

    patches.install("skyrl Worker.save_memory_snapshot", worker, "save_memory_snapshot", wrap)
