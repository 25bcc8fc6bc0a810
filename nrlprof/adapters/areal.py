"""AReaL (`scheduler.type=ray`): its workers' roles, its trainer's global step, its own profilers standing down.

- Every worker is a `RayRPCServer` named `<role>/<index>` (the role's rank), and a role colocated with another
  (`scheduling_strategy: {type: colocation, target: actor}`, not forked) runs in the target's actors, created before
  that role is: the roles each actor will host are read from the experiment config when the `RayScheduler` is made,
  and recorded on the actor class while the scheduler creates that role's actors (`actor-ref`).
- Steps: the driver's `global_step`, from 0 as AReaL counts it, at the `train.rollout` scope that opens each step of
  `PPOTrainer.train` (`perf_tracer.trace_scope`, called whether the perf tracer is on or not); `train` closes the
  windows when it ends, before the trainer's `close()` ends its workers.
- With NRL_PROFILE_FRAMEWORK_CONFIG=1 the experiment's `perf_tracer` and `memory_profiler` are read when the
  RayScheduler is made (nrlprof.config.frameworks.areal). Where nrlprof runs torch in a process, the perf tracer's own
  torch profiler stands down there; where its memory backend runs in a role's workers, so does AReaL's
  `start_memory_profile`/`stop_memory_profile` of that role.
- `scheduler.type=local` and `slurm` start processes, and `areal.infra.launcher.ray` Ray tasks, that nrlprof does
  not see: the log says so once.
"""

from __future__ import annotations

import getpass
import os
import weakref
from fnmatch import fnmatchcase
from typing import Any

from nrlprof import rayapi
from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.host import ControllerHost, Host
from nrlprof.process.kind import WORKER

SOURCE = "AReaL's PPOTrainer (global_step)"
STEP_SCOPE = "train.rollout"
# The roles AReaL's trainer configures its perf tracer for (PPOTrainer._config_perf_tracer).
PERF_ROLES = ("actor", "critic", "ref", "rollout", "eval-rollout")
UNSEEN = (
    "AReaL's %s starts its workers as %s, which nrlprof does not see: it profiles none of them (scheduler.type=ray "
    "makes them Ray actors nrlprof profiles)"
)


def colocated_roles(exp: Any) -> dict[str, tuple[str, ...]]:
    """Role -> the roles colocated in its actors (not forked), as the experiment config says."""
    online = getattr(getattr(getattr(exp, "rollout", None), "agent", None), "mode", None) == "online"
    roles = {"actor": exp.actor, "critic": getattr(exp, "critic", None), "rollout": getattr(exp, "rollout", None)}
    if getattr(exp, "ref", None) is not None and getattr(exp.actor, "kl_ctl", 0) > 0:
        roles["ref"] = exp.ref
    hosted: dict[str, list[str]] = {}
    for role, config in roles.items():
        strategy = getattr(config, "scheduling_strategy", None)
        kind = getattr(getattr(strategy, "type", None), "value", getattr(strategy, "type", None))
        if kind == "colocation" and getattr(strategy, "target", None) and not getattr(strategy, "fork", False):
            hosted.setdefault(str(strategy.target), []).append(role)
    if roles["rollout"] is not None and not online:  # the eval rollout shares the rollout's servers
        hosted.setdefault("rollout", []).append("eval-rollout")
    return {role: tuple(others) for role, others in hosted.items()}


# Each RayScheduler's roles hosted by each role's actors; kept here, not in a patch, since reading AReaL's settings
# reinstalls the patches while the scheduler is being made.
HOSTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def take_scheduler(session: ControllerHost, module: Any) -> None:
    scheduler = module.RayScheduler
    server_class = rayapi.modified_class(module.RayRPCServer)

    def wrap_init(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            exp = getattr(self, "exp_config", None)
            if exp is not None:
                HOSTED[self] = colocated_roles(exp)
                if session.plan.framework_config:
                    configure_from_areal(session, exp)

        return __init__

    def wrap_create(original):
        def _create_ray_workers(self, role, *args, **kwargs):
            server_class.__nrlprof_roles__ = HOSTED.get(self, {}).get(str(role), ())
            try:
                return original(self, role, *args, **kwargs)
            finally:
                del server_class.__nrlprof_roles__

        return _create_ray_workers

    patches.install("areal RayScheduler.__init__", scheduler, "__init__", wrap_init)
    patches.install("areal RayScheduler._create_ray_workers", scheduler, "_create_ray_workers", wrap_create)


def configure_from_areal(session: ControllerHost, exp: Any) -> None:
    """The experiment's `perf_tracer` and `memory_profiler`, as AReaL's docs mean them."""
    import dataclasses

    from nrlprof.config.frameworks.areal import areal_fragment

    def section(name: str) -> dict | None:
        value = getattr(exp, name, None)
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value

    perf, memory = section("perf_tracer"), section("memory_profiler")
    roles = tuple(r for r in PERF_ROLES if r in ("actor", "rollout", "eval-rollout") or getattr(exp, r, None))
    fragment = areal_fragment(perf, memory, roles, _log_dir(perf), _log_dir(section("stats_logger")))
    session.ask_reconfiguration(fragment.plan("areal"))
    logger.info("profiling settings read from AReaL's own config (perf_tracer, memory_profiler; "
                "NRL_PROFILE_FRAMEWORK_CONFIG=1), its steps counted from 0")  # fmt: skip


def _log_dir(section: dict | None) -> str | None:
    """`{fileroot}/logs/{user}/{experiment}/{trial}`, where AReaL writes a section's files."""
    if not section:
        return None
    parts = [section.get(k) for k in ("fileroot", "experiment_name", "trial_name")]
    if not all(isinstance(p, str) and p and p != "???" for p in parts):
        return None
    root, experiment, trial = parts
    return os.path.join(os.path.expanduser(os.path.expandvars(root)), "logs", getpass.getuser(), experiment, trial)


def take_trainer_steps(session: ControllerHost, module: Any) -> None:
    """`trace_scope("train.rollout", args={"global_step": n})` opens each step of PPOTrainer.train."""

    def wrap(original):
        def trace_scope(name, *args, **kwargs):
            if name == STEP_SCOPE:
                step = (kwargs.get("args") or {}).get("global_step")
                if isinstance(step, int):
                    session.framework_step(step, SOURCE)
            return original(name, *args, **kwargs)

        return trace_scope

    patches.install_with_copies("areal perf_tracer.trace_scope", module, "trace_scope", wrap)


def stand_down_perf_profiler(session: Host, module: Any) -> None:
    """The perf tracer's own torch profiler (`profile_steps`) does not start in a process where nrlprof runs torch."""

    def wrap(original):
        def _should_enable_profiler(self, *args, **kwargs):
            return False if runs(session, "torch") else original(self, *args, **kwargs)

        return _should_enable_profiler

    patches.install("areal PerfTracer._should_enable_profiler", module.PerfTracer, "_should_enable_profiler", wrap)


def runs(session: Host, kind: str) -> bool:
    """Whether nrlprof runs the backend in this process (a worker's targets; a controller's backends)."""
    if session.kind == WORKER:
        return session.targets.get(kind) is not None
    return kind in session.targets


def finish_after_train(session: ControllerHost, module: Any) -> None:
    """The trainer's `close()` ends the workers after `train`: the windows close first."""
    patches.install_finally("areal PPOTrainer.train", module.PPOTrainer, "train", session.finish)


def stand_down_memory_profiler(session: ControllerHost, module: Any) -> None:
    """AReaL's memory profiler of a role (the actor's) does not run where nrlprof's memory backend profiles all of its
    workers."""
    controller = module.TrainController
    told: set[str] = set()

    def ours(role: str) -> bool:
        backend = session.plan.backend("memory")
        if backend is None or not any(t.ranks is None and fnmatchcase(role, t.pattern) for t in backend.targets):
            return False
        if role not in told:
            told.add(role)
            logger.info("AReaL's own memory profiler stands down for role '%s': nrlprof's memory backend runs in its "
                        "workers", role)  # fmt: skip
        return True

    def wrap(original):
        def profile(self, *args, **kwargs):
            return None if ours(str(getattr(self, "_worker_role", ""))) else original(self, *args, **kwargs)

        return profile

    for name in ("start_memory_profile", "stop_memory_profile"):
        patches.install(f"areal TrainController.{name}", controller, name, wrap)


def tell_unseen_scheduler(class_name: str, mode: str):
    """`scheduler.type=local` (LocalScheduler) and `slurm` (SlurmScheduler): their workers are processes."""

    def apply(session: ControllerHost, module: Any) -> None:
        def wrap(original):
            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                logger.warning(UNSEEN, f"scheduler.type={mode}", "processes")

            return __init__

        patches.install(f"areal {class_name}.__init__", getattr(module, class_name), "__init__", wrap)

    return apply


LAUNCHERS = ("areal.infra.launcher.ray", "areal.launcher.ray")


def tell_if_ray_launcher(argv: list[str]) -> bool:
    """`python -m areal.infra.launcher.ray train.py ...`: the older launcher runs the trainers as Ray tasks."""
    launched = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-m" and argv[i + 1] in LAUNCHERS), None)
    if launched is not None:
        logger.warning(UNSEEN, f"launcher {launched}", "Ray tasks")
    return launched is not None
