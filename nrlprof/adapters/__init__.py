"""Framework adapters: small named patches, each applied when the framework's own module is imported.

They take the steps from the framework's own loop (verl's trainer, NeMo RL's loops, RLinf's runners,
OpenRLHF's PPO trainer, SkyRL's trainers, AReaL's PPO trainer, slime's train loop), record the roles of workers whose
class does not say them (SkyRL, AReaL, slime), take over the framework's own profiling hooks so only one
implementation acts, and read the framework's own profiling config. Each is undone by `nrlprof.disable()`. Nothing
here imports a framework: a framework that is never imported costs one dict entry per module name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

from nrlprof.process import import_hooks
from nrlprof.process.host import ControllerHost, Host
from nrlprof.process.kind import CONTROLLER, DRIVER, WORKER

# (module, what the adapter does, the process kinds it acts in, the function applying it to the module)
# (an adapter for controllers only takes a ControllerHost: the process kinds say which one it is given)
Adapter = tuple[str, str, tuple[str, ...], Callable[[ControllerHost, ModuleType], None]]


def _adapters() -> tuple[Adapter, ...]:
    from nrlprof.adapters import areal, nemo_rl, openrlhf, rlinf, skyrl, slime, verl

    controllers = (DRIVER, CONTROLLER)
    return (
        ("verl.single_controller.ray.base", "verl's fused worker roles", controllers, verl.record_fused_roles),
        ("verl.trainer.ppo.ray_trainer", "verl's trainer steps", controllers, verl.take_trainer_steps),
        ("verl.trainer.ppo.v1.trainer_base", "verl's v1 trainer steps", controllers, verl.take_trainer_steps),
        ("verl.trainer.main_ppo", "verl's controller actor", (DRIVER,), verl.mark_task_runner),
        ("verl.utils.profiler.profile", "verl's own profilers stand down", (WORKER,), verl.stand_down_profilers),
        ("nemo_rl.utils.nsys", "NeMo RL's profiling helpers", controllers, nemo_rl.take_over_nsys_helpers),
        (
            "nemo_rl.distributed.worker_group_utils",
            "NeMo RL's nsight runtime_env",
            (*controllers, WORKER),
            nemo_rl.take_over_nsight_config,
        ),
        ("rlinf.scheduler.cluster.cluster", "RLinf's profiler launcher", controllers, rlinf.take_over_launcher),
        ("rlinf.runners.embodied_runner", "RLinf's embodied runner steps", controllers, rlinf.take_embodied_steps),
        ("rlinf.runners.reasoning_runner", "RLinf's reasoning runner steps", controllers, rlinf.take_reasoning_steps),
        ("openrlhf.trainer.ppo_trainer", "OpenRLHF's PPO trainer steps", controllers, openrlhf.take_trainer_steps),
        ("skyrl.backends.skyrl_train.workers.worker", "SkyRL's worker roles", controllers, skyrl.record_roles),
        ("skyrl.train.trainer", "SkyRL's trainer steps", controllers, skyrl.take_trainer_steps),
        (
            "skyrl.train.fully_async_trainer",
            "SkyRL's fully async trainer's end",
            controllers,
            skyrl.take_async_trainer_end,
        ),
        (
            "skyrl.backends.skyrl_train.utils.profiler",
            "SkyRL's own profiler stands down",
            (WORKER,),
            skyrl.stand_down_profiler,
        ),
        (
            "skyrl.backends.skyrl_train.workers.worker",
            "SkyRL's memory snapshots stand down",
            (WORKER,),
            skyrl.stand_down_memory_snapshots,
        ),
        ("areal.infra.scheduler.ray", "AReaL's Ray scheduler", controllers, areal.take_scheduler),
        (
            "areal.infra.scheduler.local",
            "AReaL's local scheduler",
            controllers,
            areal.tell_unseen_scheduler("LocalScheduler", "local"),
        ),
        (
            "areal.infra.scheduler.slurm",
            "AReaL's Slurm scheduler",
            controllers,
            areal.tell_unseen_scheduler("SlurmScheduler", "slurm"),
        ),
        ("areal.utils.perf_tracer", "AReaL's trainer steps", controllers, areal.take_trainer_steps),
        (
            "areal.utils.perf_tracer",
            "AReaL's perf tracer's profiler stands down",
            (*controllers, WORKER),
            areal.stand_down_perf_profiler,
        ),
        ("areal.trainer.rl_trainer", "AReaL's trainer's end", controllers, areal.finish_after_train),
        (
            "areal.infra.controller.train_controller",
            "AReaL's memory profiler stands down",
            controllers,
            areal.stand_down_memory_profiler,
        ),
        ("slime.ray.actor_group", "slime's train actor roles", controllers, slime.record_roles),
        ("slime.ray.placement_group", "slime's train loop steps", (DRIVER,), slime.take_loop_steps),
        ("slime.rollout.sample_hooks", "slime's rollout manager steps", (CONTROLLER,), slime.take_manager_steps),
        (
            "slime.observability.profile_utils",
            "slime's own profilers stand down",
            (WORKER,),
            slime.stand_down_profilers,
        ),
    )


def install(session: Host | ControllerHost) -> None:
    for module_name, description, kinds, apply in _adapters():
        if session.kind in kinds:
            import_hooks.when_imported(module_name, description, _bound(apply, session))
    if session.kind == DRIVER:  # a launcher run as the program itself is never imported by its name
        from nrlprof.adapters.areal import tell_if_ray_launcher

        tell_if_ray_launcher(list(getattr(sys, "orig_argv", sys.argv)))


# What an adapter cannot change once the framework has used the module, by framework.
LATE_LIMITS = {
    "verl": "verl WorkerDict classes made before now are matched by class only, not by role",
    "nemo_rl": "NeMo RL worker classes defined before now keep the nsight runtime_env their decorator read at import",
    "rlinf": "an RLinf Cluster made before now keeps its own profiler command",
    "openrlhf": "",
    "skyrl": "SkyRL workers created before now are matched by class only, not by role",
    "areal": "AReaL workers created before now are matched by their own role only, not by the roles colocated with it",
    "slime": "slime train actors created before now are matched by class only, not by role",
}


def tell_late(session: Host) -> None:
    """One line when `configure()` comes after a framework's modules were imported: they were patched now (also
    where other modules imported their functions by name); what cannot change that late, and what to do."""
    late = sorted({name.split(".", 1)[0] for name, _, kinds, _ in _adapters() if name in sys.modules
                   and session.kind in kinds})  # fmt: skip
    if not late:
        return
    from nrlprof.log import logger

    limits = "; ".join(text for name in late if (text := LATE_LIMITS.get(name)))
    logger.info(
        "nrlprof was configured after %s was imported: its modules are patched now; what cannot change now: actors "
        "created before now run unprofiled%s. To have those too, call configure() before the job creates its "
        "workers, or set the NRL_* variables (or NRL_PROFILE_CONFIG) before the job starts",
        ", ".join(late),
        f"; {limits}" if limits else "",
    )


def _bound(apply: Callable[[ControllerHost, ModuleType], None], session: Host) -> Callable[[ModuleType], None]:
    def applied(module: ModuleType) -> None:
        try:
            apply(session, module)
        except Exception as err:  # a framework version nrlprof does not know: the framework runs as it is
            from nrlprof.log import logger

            logger.warning("nrlprof's adapter for %s does not apply (%s); it runs as it is", module.__name__, err)

    return applied
