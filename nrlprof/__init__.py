"""nrlprof: Nsight Systems, PyTorch-profiler and rocprof-sys profiling for chosen Ray workers and steps.

`import nrlprof` reads the NRL_* variables. With none set it does nothing: no patch,
no output, no import of ray or torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nrlprof.errors import ConfigError, NrlprofError
from nrlprof.process import state
from nrlprof.ranges.annotate import annotate, timings

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
    """Activate from a verl/RLinf-style mapping (dict or OmegaConf); NRL_* variables override it.

    Called after a framework's modules were imported, its adapters patch them at once; what cannot change
    that late is said in one log line."""
    from nrlprof.runtime.activation import configure_late

    configure_late(config)


def activate_from_env() -> bool:
    """(Re)read the NRL_* variables of `os.environ` now, e.g. after a launcher set them in-process."""
    from nrlprof.config.env import load_plan
    from nrlprof.runtime.activation import activate_driver

    activate_driver(load_plan(os.environ))
    return state.session is not None


def disable() -> None:
    """Close windows (their files are kept) and remove every patch nrlprof installed."""
    if state.session is None:
        from nrlprof.process import patches

        patches.uninstall_all()
        return
    from nrlprof.runtime.activation import deactivate

    deactivate()


def runtime_env_for(worker_name: str, rank: int | None = None) -> dict:
    """The runtime_env fragment for a worker, for frameworks that build runtime envs themselves."""
    session = state.session
    if session is None:
        return {}
    from nrlprof.launch.runtime_env import fragment_for
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import log_matches, match_worker

    if rank is None:
        rank = session.ranks.take(WorkerIdentity(worker_name, None, 0, explicit_name=worker_name).name)
    identity = WorkerIdentity(worker_name, None, rank, explicit_name=worker_name)
    matches = match_worker(session.plan, identity)
    log_matches(identity, matches)
    return fragment_for(session.plan, identity, matches)


def _activate_from_environment() -> None:
    """At import (also at interpreter start-up, through nrlprof-startup.pth): activate as what this process is."""
    if not any(name.startswith(("NRL_", "NRLPROF_")) for name in os.environ):
        return
    from nrlprof.config.variables import may_activate
    from nrlprof.process.kind import CHILD, DRIVER, process_kind

    kind = process_kind()
    if kind == DRIVER:
        _warn_misspelled_variables()
    if kind is None:
        return
    if kind == CHILD:
        from nrlprof.runtime.activation import activate_child

        activate_child(os.environ)
        return
    if not may_activate(os.environ):
        return
    from nrlprof.runtime.activation import activate_from_env

    activate_from_env(os.environ, kind)


def _warn_misspelled_variables() -> None:
    """`NRL_NSYS_RANK is not read by nrlprof; did you mean NRL_NSYS_RANKS?`, once per name, in a driver."""
    from nrlprof.config.misspelled import misspelled_variables

    close = {name: known for name, known in misspelled_variables(os.environ).items() if known}
    if not close:
        return
    from nrlprof.log import configure_logging, logger

    level = os.environ.get("NRL_PROFILE_LOG_LEVEL", "").strip().upper()
    configure_logging(level if level in ("DEBUG", "INFO", "WARNING", "ERROR") else "INFO")
    for name, known in close.items():
        logger.warning("%s is not a variable nrlprof reads; did you mean %s?", name, known)


_activate_from_environment()
