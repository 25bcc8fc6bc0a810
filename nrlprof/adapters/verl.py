"""verl: its trainer's step, its fused worker roles, its controller actor, its own profilers standing down.

- The trainers' `_start_profiling` (the legacy `RayPPOTrainer` and the v1 `PPOTrainer`) runs at the top of
  every step with `self.global_steps`: the step.
  `__init__` reads verl's own profiling config when NRL_PROFILE_FRAMEWORK_CONFIG=1, and `fit` closes the
  open windows when it ends (the trainer runs in an actor, where no exit hook runs).
- `create_colocated_worker_cls` fuses roles into one `WorkerDict` class: nrlprof records the roles on it, so
  a role selects the workers that host it and a role's methods (`actor_rollout_generate_sequences`) are
  known as that role's.
- `run_ppo` starts the TaskRunner actor: the controller, launched under nsys with verl's
  controller_nsight_options where nrlprof profiles with nsys.
- In a worker nrlprof profiles with a tool, verl's own profiler for that tool stands down.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from nrlprof import rayapi
from nrlprof.adapters.stand_down import standing_down
from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.host import ControllerHost, Host

# verl's profiler tools, as nrlprof's backends that take their place.
TOOL_BACKENDS = {"nsys": "nsys", "torch": "torch", "torch_memory": "memory"}


TRAINER_CLASSES = ("RayPPOTrainer", "PPOTrainer")


def take_trainer_steps(session: ControllerHost, module: ModuleType) -> None:
    """verl's trainers (the legacy RayPPOTrainer and the v1 PPOTrainer; their subclasses inherit the patch)."""
    for name in TRAINER_CLASSES:
        trainer = getattr(module, name, None)
        if isinstance(trainer, type) and "_start_profiling" in vars(trainer):
            _patch_trainer(session, trainer)


def _patch_trainer(session: ControllerHost, trainer: type) -> None:
    source = f"verl's {trainer.__name__} (global_steps)"

    def wrap_start(original):
        def _start_profiling(self, *args, **kwargs):
            session.framework_step(int(self.global_steps), source)
            return original(self, *args, **kwargs)

        return _start_profiling

    def wrap_init(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if session.plan.framework_config:
                configure_from_verl(session, getattr(self, "config", None))

        return __init__

    name = f"verl {trainer.__name__}"
    patches.install(f"{name}._start_profiling", trainer, "_start_profiling", wrap_start)
    patches.install(f"{name}.__init__", trainer, "__init__", wrap_init)
    patches.install_finally(f"{name}.fit", trainer, "fit", session.finish)


def configure_from_verl(session: ControllerHost, config: Any) -> None:
    """verl's global_profiler and role profiler blocks, as `nrlprof.configure(config)` reads them."""
    if config is None:
        return
    from nrlprof.config.readers import framework_keys

    with framework_keys():
        session.ask_reconfiguration(config)
    logger.info("profiling settings read from verl's own config (NRL_PROFILE_FRAMEWORK_CONFIG=1)")


def record_fused_roles(session: ControllerHost, module: ModuleType) -> None:
    def roles_recorded(original, remote: bool):
        def create(class_dict, *args, **kwargs):
            created = original(class_dict, *args, **kwargs)
            fused = _fused_class(created) if remote else created
            if fused is not None:
                fused.__nrlprof_roles__ = tuple(str(role) for role in class_dict)
            return created

        return create

    patches.install_with_copies(
        "verl create_colocated_worker_cls",
        module,
        "create_colocated_worker_cls",
        lambda original: roles_recorded(original, True),
    )
    if hasattr(module, "create_colocated_worker_raw_cls"):
        patches.install_with_copies(
            "verl create_colocated_worker_raw_cls",
            module,
            "create_colocated_worker_raw_cls",
            lambda original: roles_recorded(original, False),
        )


def _fused_class(class_with_args: Any) -> type | None:
    return rayapi.modified_class(getattr(class_with_args, "cls", None))


def mark_task_runner(session: ControllerHost, module: ModuleType) -> None:
    def wrap(original):
        def run_ppo(config, task_runner_class=None, *args, **kwargs):
            if session.plan.framework_config:
                configure_from_verl(session, config)
            runner = task_runner_class or getattr(module, "TaskRunner", None)
            name = _remote_class_name(runner)
            if name:
                session.launch_as_controller(name)
            if task_runner_class is None:
                return original(config, *args, **kwargs)
            return original(config, task_runner_class, *args, **kwargs)

        return run_ppo

    patches.install("verl main_ppo.run_ppo", module, "run_ppo", wrap)


def _remote_class_name(actor_class: Any) -> str | None:
    modified = rayapi.modified_class(actor_class)
    return modified.__name__ if modified is not None else None


def stand_down_profilers(session: Host, module: ModuleType) -> None:
    profiler = module.DistProfiler
    ours = standing_down(session, "verl")

    def wrap(original):
        def act(self, *args, **kwargs):
            tool = str(getattr(self, "_tool", None))
            if tool in TOOL_BACKENDS and ours(TOOL_BACKENDS[tool], f"{tool} profiler"):
                return None
            return original(self, *args, **kwargs)

        return act

    for name in ("start", "stop"):
        patches.install(f"verl DistProfiler.{name}", profiler, name, wrap)
