"""nrlprof: Nsight Systems, PyTorch-profiler and rocprof-sys profiling for chosen Ray workers and steps.

`import nrlprof` reads the NRL_* variables. With none set it does nothing: no patch,
no output, no import of ray or torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from nrlprof.errors import ConfigError, NrlprofError
from nrlprof.ranges.annotate import annotate, timings
from nrlprof.runtime import state

__all__ = [
    "ConfigError",
    "NrlprofError",
    "activate_from_env",
    "annotate",
    "configure",
    "disable",
    "finish",
    "is_active",
    "runtime_env_for",
    "step",
    "timings",
]
__version__ = "0.1.0"


def step(n: int) -> None:
    """Call at the start of training step `n` (1-indexed) in the driver."""
    session = state.session
    if session is not None:
        session.step(n)


def finish() -> None:
    """Close open windows and flush their files (also done at interpreter exit)."""
    session = state.session
    if session is not None:
        session.finish()


def is_active() -> bool:
    return state.session is not None


def configure(config: Mapping[str, object] | object) -> None:
    """Activate from a verl/RLinf-style mapping (dict or OmegaConf); NRL_* variables override it."""
    from nrlprof.config.env import TORCH_DIR_VARIABLE, plan_from_env
    from nrlprof.config.yaml_config import plan_from_mapping
    from nrlprof.runtime.session import activate_driver

    source = TORCH_DIR_VARIABLE if TORCH_DIR_VARIABLE in os.environ else "profiling config (torch trace directory)"
    activate_driver(plan_from_env(os.environ, base=plan_from_mapping(config)), source)


def activate_from_env() -> bool:
    """(Re)read the NRL_* variables of `os.environ` now, e.g. after a launcher set them in-process."""
    from nrlprof.config.env import load_plan
    from nrlprof.runtime.session import activate_driver

    activate_driver(load_plan(os.environ))
    return state.session is not None


def disable() -> None:
    """Close windows (their files are kept) and remove every patch nrlprof installed."""
    if state.session is None:
        from nrlprof.runtime import patches

        patches.uninstall_all()
        return
    from nrlprof.runtime.session import deactivate

    deactivate()


def runtime_env_for(worker_name: str, rank: int | None = None) -> dict:
    """The runtime_env fragment for a worker, for frameworks that build runtime envs themselves."""
    session = state.session
    if session is None:
        return {}
    from nrlprof.workers.creation_hook import log_matches
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import match_worker
    from nrlprof.workers.runtime_env import fragment_for

    if rank is None:
        rank = session.ranks.take(WorkerIdentity(worker_name, None, 0, explicit_name=worker_name).name)
    identity = WorkerIdentity(worker_name, None, rank, explicit_name=worker_name)
    matches = match_worker(session.plan, identity)
    log_matches(identity, matches)
    return fragment_for(session.plan, identity, matches)


def _launched_as_cli() -> bool:
    """`nrlprof ...` or `python -m nrlprof ...`: the tools read the plan themselves; no hooks, no log lines.

    `python -m pkg.main` also has `sys.argv[0] == "-m"` while `pkg` imports; only the interpreter's own
    arguments say which module runs.
    """
    if sys.argv and os.path.basename(sys.argv[0]) == "nrlprof":
        return True
    arguments = getattr(sys, "orig_argv", [])
    for index, argument in enumerate(arguments[:-1]):
        if argument == "-m":
            return arguments[index + 1] in ("nrlprof", "nrlprof.cli")
    return False


def _in_ray_runtime_env_agent() -> bool:
    """The agent imports nrlprof's agent hook for the plugin fix; it is no driver."""
    return bool(sys.argv) and sys.argv[0].endswith(os.path.join("runtime_env", "agent", "main.py"))


def _activate_from_environment() -> None:
    from nrlprof.config.variables import may_activate

    if not may_activate(os.environ):
        return
    if _launched_as_cli() or _in_ray_runtime_env_agent():
        return
    from nrlprof.runtime.session import activate_from_env

    activate_from_env(os.environ)


_activate_from_environment()
