"""nrlprof: Nsight Systems, PyTorch-profiler and rocprof-sys profiling for chosen Ray workers and steps.

`import nrlprof` reads the NRL_* variables. With none set it does nothing: no patch,
no output, no import of ray or torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nrlprof.errors import ConfigError
from nrlprof.ranges.annotate import annotate, timings

__all__ = [
    "ConfigError",
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

_gate_step = None


def _bind_gate() -> None:
    """`step` calls the gate; the gate itself is built at the first step, after `ray.init()`."""
    global _gate_step
    from nrlprof.runtime import session as activation
    state = activation.state()
    _gate_step = None if state is None or state.identity is not None else _first_step


def _first_step(n: int) -> None:
    global _gate_step
    from nrlprof.runtime import session as activation
    state = activation.state()
    _gate_step = None if state is None else state.gate.step
    if _gate_step is not None:
        _gate_step(n)


def step(n: int) -> None:
    """Call at the start of training step `n` (1-indexed) in the driver."""
    if _gate_step is not None:
        _gate_step(n)


def finish() -> None:
    """Close open windows and flush their files (also done at interpreter exit)."""
    from nrlprof.runtime import session as activation
    state = activation.state()
    if state is not None and state._gate is not None:
        state._gate.finish()


def is_active() -> bool:
    from nrlprof.runtime import session as activation
    return activation.state() is not None


def configure(config: Mapping[str, object] | object) -> None:
    """Activate from a verl/RLinf-style mapping (dict or OmegaConf); NRL_* variables override it."""
    from nrlprof.config.env import plan_from_env
    from nrlprof.config.yaml_config import plan_from_mapping
    from nrlprof.runtime import session as activation

    activation.activate_driver(plan_from_env(os.environ, base=plan_from_mapping(config)))
    _bind_gate()


def activate_from_env() -> bool:
    """(Re)read the NRL_* variables of `os.environ` now, e.g. after a launcher set them in-process."""
    from nrlprof.config.env import load_plan
    from nrlprof.runtime import session as activation

    activation.activate_driver(load_plan(os.environ))
    _bind_gate()
    return activation.state() is not None


def disable() -> None:
    """Close windows and remove every patch nrlprof installed."""
    from nrlprof.runtime import session as activation
    activation.deactivate()
    _bind_gate()


def runtime_env_for(worker_name: str, rank: int | None = None) -> dict:
    """The runtime_env fragment for a worker, for frameworks that build runtime envs themselves."""
    from nrlprof.runtime import session as activation
    state = activation.state()
    if state is None:
        return {}
    from nrlprof.workers.creation_hook import log_matches
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import match_worker
    from nrlprof.workers.runtime_env import fragment_for

    identity = WorkerIdentity(worker_name, None, 0 if rank is None else rank, explicit_name=worker_name)
    if rank is None:
        identity = WorkerIdentity(worker_name, None, state.ranks.take(identity.name), explicit_name=worker_name)
    matches = match_worker(state.plan, identity)
    log_matches(identity, matches)
    return fragment_for(state.plan, identity, matches)


def _launched_as_cli() -> bool:
    """`nrlprof ...` or `python -m nrlprof ...`: the tools read the plan themselves; no hooks, no log lines."""
    import sys

    launcher = sys.argv[0] if sys.argv else ""
    return launcher == "-m" or os.path.basename(launcher) == "nrlprof"


def _in_ray_runtime_env_agent() -> bool:
    """The agent imports nrlprof.rayfix.agent_hook for the plugin fix; it is no driver."""
    import sys

    return bool(sys.argv) and sys.argv[0].endswith(os.path.join("runtime_env", "agent", "main.py"))


def _activate_from_environment() -> None:
    if (
        _launched_as_cli()
        or _in_ray_runtime_env_agent()
        or not any(
            name.startswith(("NRL_NSYS_", "NRL_TORCH_PROFILE_", "NRL_ROCPROF_", "NRL_PROFILE_", "NRLPROF_"))
            for name in os.environ
        )
    ):
        return
    from nrlprof.runtime import session as activation
    activation.activate_from_env(os.environ)
    _bind_gate()


_activate_from_environment()
