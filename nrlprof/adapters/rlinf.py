"""RLinf: the runners' own step counter drives the windows, and RLinf's own step-gated profiling stands down.

RLinf counts steps from 0 (`global_step` / `global_steps` at the top of a step), and its
`cluster.profiling.steps` counts them the same way, so nrlprof takes that number as the step: a step
range means the same steps as in RLinf's own config. The embodied runners ask `_should_profile_step(step)`
at the top of every step; the reasoning runner puts each batch in (`_put_batch`) at the top of its steps.
While nrlprof profiles, `_should_profile_step` answers False, so RLinf's own windows do not also open.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from nrlprof.log import logger
from nrlprof.process import patches
from nrlprof.process.host import ControllerHost


def take_embodied_steps(session: ControllerHost, module: ModuleType) -> None:
    def wrap(original):
        def _should_profile_step(self, step_idx, *args, **kwargs):
            session.framework_step(int(step_idx), "RLinf's embodied runner (global_step)")
            if session.plan.active:  # nrlprof opens the windows in the workers it profiles
                return False
            return original(self, step_idx, *args, **kwargs)

        return _should_profile_step

    patches.install("rlinf EmbodiedRunner._should_profile_step", module.EmbodiedRunner, "_should_profile_step", wrap)


def take_reasoning_steps(session: ControllerHost, module: ModuleType) -> None:
    def wrap(original):
        def _put_batch(self, *args, **kwargs):
            session.framework_step(int(self.global_steps), "RLinf's reasoning runner (global_steps)")
            return original(self, *args, **kwargs)

        return _put_batch

    patches.install("rlinf ReasoningRunner._put_batch", module.ReasoningRunner, "_put_batch", wrap)


# RLinf's profiling backends, as nrlprof's backends that take their place.
RLINF_BACKENDS = {"nsight": "nsys", "rocprof_sys": "rocprof"}


def take_over_launcher(session: ControllerHost, module: ModuleType) -> None:
    """RLinf's `Cluster` wraps a selected group's interpreter in its own `nsys profile ...`: while nrlprof runs
    that backend, the interpreter stays as it is and nrlprof's own nsys (with its windows) runs in the worker.

    Its `cluster.profiling` section is read when the Cluster is made (variables that configure the same backend
    win), so RLinf's groups, steps and output_dir select nrlprof's workers, windows and files.
    """
    cluster = module.Cluster
    told: set[str] = set()

    def ours(profiling_cfg: Any) -> bool:
        kind = RLINF_BACKENDS.get(str(getattr(profiling_cfg, "backend", "")))
        return kind is not None and session.plan.backend(kind) is not None

    def wrap_init(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            profiling = getattr(getattr(self, "_cluster_cfg", None), "profiling", None)
            if profiling is not None and getattr(profiling, "worker_groups", None):
                configure_from_rlinf(session, profiling)

        return __init__

    def wrap_launcher(original):
        def modify_profile_context(python_interpreter_path, worker_name, profiling_cfg, *args, **kwargs):
            if profiling_cfg is None or not ours(profiling_cfg):
                return original(python_interpreter_path, worker_name, profiling_cfg, *args, **kwargs)
            group = str(worker_name).split(":", 1)[0]
            if group not in told:
                told.add(group)
                logger.info(
                    "RLinf's own %s launcher stands down for worker group '%s': nrlprof's runs in its workers (one "
                    "per process, nrlprof's windows)",
                    profiling_cfg.backend,
                    group,
                )
            return python_interpreter_path

        return classmethod(lambda cls, *args, **kwargs: modify_profile_context(*args, **kwargs))

    def wrap_env_vars(original):
        def get_profiling_env_vars_for_worker(worker_name, profiling_cfg, *args, **kwargs):
            if profiling_cfg is not None and ours(profiling_cfg):
                return {}
            return original(worker_name, profiling_cfg, *args, **kwargs)

        return classmethod(lambda cls, *args, **kwargs: get_profiling_env_vars_for_worker(*args, **kwargs))

    patches.install("rlinf Cluster.__init__", cluster, "__init__", wrap_init)
    patches.install(
        "rlinf Cluster.modify_profile_context",
        cluster,
        "modify_profile_context",
        lambda _: wrap_launcher(cluster.modify_profile_context),
    )
    patches.install(
        "rlinf Cluster.get_profiling_env_vars_for_worker",
        cluster,
        "get_profiling_env_vars_for_worker",
        lambda _: wrap_env_vars(cluster.get_profiling_env_vars_for_worker),
    )


def configure_from_rlinf(session: ControllerHost, profiling: Any) -> None:
    """RLinf's parsed `cluster.profiling` (a ProfileConfig dataclass), as `nrlprof.configure` reads the section."""
    import dataclasses

    from nrlprof.config.readers import framework_keys

    section = {k: v for k, v in dataclasses.asdict(profiling).items() if v is not None}
    with framework_keys():
        session.ask_reconfiguration({"cluster": {"profiling": section}})
    logger.info("profiling settings read from RLinf's own config (cluster.profiling)")
