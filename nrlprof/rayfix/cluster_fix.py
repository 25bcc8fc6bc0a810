"""Profiling on a cluster whose runtime-env agent lacks nrlprof's fix: detect it, and launch the profiler ourselves.

A driver may join a cluster started before it (`ray start` with neither `nrlprof patch-ray` nor the agent hook).
Ray's own nsight plugin then runs `nsys ... python`, and with no `python` on the workers' PATH a matched actor never
starts. `agent_has_fix()` tells whether this node's agent builds the fixed command; `prefixed_runtime_env()` turns
`_nsight` / `_rocprof_sys` into a `py_executable` prefix, which needs no plugin at all. Neither raises.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from nrlprof.log import logger

PROFILER_FIELDS = ("_nsight", "_rocprof_sys")
# The interpreter a prefixed worker runs ("" for the node's default): children of that worker inherit the prefix.
INTERPRETER_VARIABLE = "NRLPROF_PY_EXECUTABLE"
# Fields whose plugins choose the interpreter themselves; a py_executable would fight them.
INTERPRETER_FIELDS = ("pip", "uv", "conda", "container", "image_uri")

_verdicts: dict[str, bool | None] = {}


def _connected_node_id() -> str | None:
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_node_id()


def agent_has_fix() -> bool | None:
    """Whether the runtime-env agent of this driver's node builds the fixed profiler command; None when unknown.

    True: its raylet lists nrlprof's hook in RAY_RUNTIME_ENV_PLUGINS, or the Ray package it imports has fixed plugin
    files older than the agent. False: neither. None: Ray is not initialised, or the raylet is not on this machine
    or not readable. Other nodes are not inspected. Cached per node once known; never raises.
    """
    try:
        node_id = _connected_node_id()
        if node_id is None:
            return None
        if node_id not in _verdicts:
            _verdicts[node_id] = _judge(node_id)
        return _verdicts[node_id]
    except Exception as err:  # a check must never break actor creation
        logger.warning("could not tell whether Ray's runtime-env agent has nrlprof's fix: %s", err)
        return None


def _judge(node_id: str) -> bool | None:
    from nrlprof.rayfix.node_agent import agent_fix, find_raylet_pid

    raylet_pid = find_raylet_pid(node_id)
    if raylet_pid is None:
        logger.debug("the raylet of node %s is not on this machine; its agent's fix is unknown", node_id)
        return None
    verdict = agent_fix(raylet_pid)
    if verdict.fixed is False:
        logger.warning(
            "Ray's runtime-env agent on this node runs Ray's unfixed profiler plugins (%s); nrlprof starts profiled "
            "workers through py_executable instead. To use the plugins, run `nrlprof patch-ray` before `ray start`.",
            verdict.reason,
        )
    else:
        logger.debug("runtime-env agent fix: %s (%s)", verdict.fixed, verdict.reason)
    return verdict.fixed


def forget_verdicts() -> None:
    """Drop the cached verdicts (a new cluster in the same process)."""
    _verdicts.clear()


def _inherited(field: str) -> object:
    """A field of the job's (or the parent worker's) runtime_env, which Ray merges into an actor's own."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return (ray.get_runtime_context().runtime_env or {}).get(field)


def prefixed_runtime_env(runtime_env: Mapping | None) -> Mapping | None:
    """`runtime_env` with `_nsight` / `_rocprof_sys` replaced by a profiler-prefixed `py_executable`.

    Keeps the actor's (or the job's) `py_executable`, else runs the node's default Python. Returns the input itself
    when there is nothing to replace or it cannot be replaced (pip/uv/conda/container choose the interpreter); logs
    why. Never raises.
    """
    if not runtime_env:
        return runtime_env
    try:
        return _prefixed(runtime_env)
    except Exception as err:  # fall back to Ray's plugins rather than fail actor creation
        logger.warning("could not move the profiler into py_executable; leaving the runtime_env as it is: %s", err)
        return runtime_env


def _prefixed(runtime_env: Mapping) -> Mapping:
    from nrlprof.rayfix.worker_prefix import worker_prefix

    nsight, rocprof = runtime_env.get("_nsight"), runtime_env.get("_rocprof_sys")
    if not nsight and not rocprof:
        return runtime_env
    choosers = [field for field in INTERPRETER_FIELDS if runtime_env.get(field) or _inherited(field)]
    if choosers:
        logger.warning(
            "runtime_env field %s chooses the interpreter; nrlprof cannot prefix it with the profiler and leaves "
            "the worker to Ray's profiler plugin",
            "/".join(choosers),
        )
        return runtime_env
    interpreter = _interpreter(runtime_env)
    prefixed = {key: value for key, value in runtime_env.items() if key not in PROFILER_FIELDS}
    prefixed["py_executable"] = worker_prefix(nsight or None, rocprof or None, interpreter)
    prefixed["env_vars"] = {**dict(runtime_env.get("env_vars") or {}), INTERPRETER_VARIABLE: interpreter or ""}
    return prefixed


def _is_prefix(py_executable: object) -> bool:
    from nrlprof.rayfix.worker_prefix import SCRIPT_NAME

    return (
        isinstance(py_executable, str)
        and py_executable.startswith("bash -c ")
        and py_executable.endswith(" " + SCRIPT_NAME)
    )


def _interpreter(runtime_env: Mapping) -> str | None:
    """The interpreter the worker would run without nrlprof: its own py_executable, the job's, or None (default)."""
    own = runtime_env.get("py_executable")
    if own is not None and not isinstance(own, str):
        raise ValueError(f"py_executable={own!r} is not a string")
    if own and not _is_prefix(own):
        return own
    inherited = own or _inherited("py_executable")
    if not _is_prefix(inherited):
        return inherited or None
    env_vars = dict(_inherited("env_vars") or {})
    env_vars.update(runtime_env.get("env_vars") or {})
    return env_vars.get(INTERPRETER_VARIABLE) or None


def isolation_overrides() -> dict:
    """For an actor created inside a prefixed worker: the py_executable that runs it without the parent's profiler.

    Ray merges the parent's runtime_env into the child's, prefix included; {} when this worker is not prefixed.
    """
    try:
        if not _is_prefix(_inherited("py_executable")):
            return {}
        from nrlprof.rayfix.worker_prefix import worker_prefix

        interpreter = (_inherited("env_vars") or {}).get(INTERPRETER_VARIABLE) or None
        return {"py_executable": interpreter or worker_prefix(None, None, None)}
    except Exception as err:
        logger.warning("could not tell whether this worker runs under nrlprof's py_executable prefix: %s", err)
        return {}
