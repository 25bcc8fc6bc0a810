"""Profiling on a cluster whose runtime-env agents lack nrlprof's fix: detect it, and launch the profiler ourselves.

A driver may join a cluster started before it (`ray start` with neither `nrlprof patch-ray` nor the agent hook), on
some nodes or all. Ray's own nsight plugin then runs `nsys ... python`, and with no `python` on a worker node's PATH
a matched actor placed there never starts. `needs_prefix()` tells whether a matched actor must bypass the plugins:
some alive node's agent lacks the fix (`agent_has_fix()`), or cannot be judged. `prefixed_runtime_env()` then turns
`_nsight` / `_rocprof_sys` into a `py_executable` prefix, which needs no plugin at all and works on fixed nodes too.
None of them raises.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from nrlprof.log import logger

if TYPE_CHECKING:
    from nrlprof.rayfix.node_agent import AgentFix

PROFILER_FIELDS = ("_nsight", "_rocprof_sys")
# The interpreter a prefixed worker runs ("" for the node's default): children of that worker inherit the prefix.
INTERPRETER_VARIABLE = "NRLPROF_PY_EXECUTABLE"
# Fields whose plugins choose the interpreter themselves; a py_executable would fight them.
INTERPRETER_FIELDS = ("pip", "uv", "conda", "container", "image_uri")
# How long the tasks that judge the nodes whose raylet is not on this machine may take, together.
CHECK_TIMEOUT_S = 30.0

KV_NAMESPACE = "nrlprof"  # Ray's internal KV, where judged nodes' verdicts are shared with the cluster's workers
# Node id -> its agent's verdict; a node is judged once, when first seen alive (by any process of the cluster).
_verdicts: dict[str, AgentFix] = {}
_judging = threading.Lock()


def _alive_nodes() -> dict[str, str] | None:
    """Node id -> IP of every alive node; None when Ray is not initialised."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return {node["NodeID"]: node.get("NodeManagerAddress", "") for node in ray.nodes() if node.get("Alive")}


def _node_states(package: Mapping | None) -> set[bool | None] | None:
    """The verdicts of the alive nodes, judging those not seen before; None when Ray is not initialised."""
    nodes = _alive_nodes()
    if nodes is None:
        return None
    with _judging:
        unseen = [node_id for node_id in nodes if node_id not in _verdicts]
        _verdicts.update(shared_verdicts(unseen))
        unseen_ips = {node_id: nodes[node_id] for node_id in unseen if node_id not in _verdicts}
        if unseen_ips:
            judged = _judge(list(unseen_ips), package)
            _verdicts.update(judged)
            _report(unseen_ips, judged)
            share_verdicts(judged)
        return {_verdicts[node_id].fixed for node_id in nodes}


def shared_verdicts(node_ids: list[str]) -> dict[str, AgentFix]:
    """The verdicts another process of this cluster published for these nodes (the driver's, for its workers)."""
    from ray.experimental import internal_kv

    from nrlprof.rayfix.node_agent import AgentFix

    found = {}
    for node_id in node_ids:
        try:
            raw = internal_kv._internal_kv_get(_verdict_key(node_id), namespace=KV_NAMESPACE)
            verdict = json.loads(raw) if raw else None
            if verdict is not None:
                reason = f"{verdict['reason']} (judged by pid {verdict['pid']})"
                found[node_id] = AgentFix(bool(verdict["fixed"]), reason)
        except Exception as err:  # sharing only saves a check: this process judges the node itself
            logger.debug("could not read the verdict shared for node %s: %s", node_id, err)
    return found


def share_verdicts(verdicts: Mapping[str, AgentFix]) -> None:
    """Publish the definite verdicts in Ray's internal KV (a node's agent keeps its fix for the raylet's life).

    Unknown ones are not: a check that timed out on a busy node may succeed later, in another process.
    """
    from ray.experimental import internal_kv

    for node_id, verdict in verdicts.items():
        if verdict.fixed is None:
            continue
        value = json.dumps({"fixed": verdict.fixed, "reason": verdict.reason, "pid": os.getpid()})
        try:
            internal_kv._internal_kv_put(_verdict_key(node_id), value, overwrite=False, namespace=KV_NAMESPACE)
        except Exception as err:  # sharing only saves others a check
            logger.debug("could not share the verdict for node %s: %s", node_id, err)


def _verdict_key(node_id: str) -> str:
    return f"agent_fix/v1/{node_id}"


def agent_has_fix(package: Mapping | None = None) -> bool | None:
    """Whether the runtime-env agent of every alive node builds the fixed profiler command.

    True: on every node, its raylet lists nrlprof's hook in RAY_RUNTIME_ENV_PLUGINS, or the Ray package the agent
    imports has fixed plugin files older than the agent. False: some node's agent has neither. None: Ray is not
    initialised, or no node is known to lack the fix but some could not be judged. Each node is judged once, when
    first seen alive: from /proc when its raylet runs on this machine, else by a task pinned to it (`package`: the
    runtime_env entry that ships nrlprof there, if it is not installed); a definite verdict is shared through Ray's
    internal KV, so the workers (and later drivers) of the cluster do not judge that node again. Never raises.
    """
    try:
        states = _node_states(package)
    except Exception as err:  # a check must never break actor creation
        logger.warning("could not tell whether Ray's runtime-env agents have nrlprof's fix: %s", err)
        return None
    if not states:
        return None
    if False in states:
        return False
    return None if None in states else True


def needs_prefix(package: Mapping | None = None) -> bool:
    """Whether a matched actor must get its profiler through `py_executable` rather than Ray's plugins.

    Yes when this worker already runs under the prefix (its children follow its parent's route), or when some alive
    node's agent lacks the fix or cannot be judged: the prefix works on every node, the plugin hangs on an unfixed
    one. No when every node is fixed, or Ray is not initialised yet (the cluster this process starts gets the
    in-memory fix). Never raises.
    """
    try:
        if _is_prefix(_inherited("py_executable")):
            return True
        states = _node_states(package)
    except Exception as err:  # a check must never break actor creation
        logger.warning("could not tell whether Ray's runtime-env agents have nrlprof's fix: %s", err)
        return True
    return states is not None and states != {True}


def _judge(node_ids: list[str], package: Mapping | None) -> dict[str, AgentFix]:
    from nrlprof.rayfix.node_agent import agent_fix, raylet_pids

    here = raylet_pids()
    verdicts = {node_id: agent_fix(here[node_id]) for node_id in node_ids if node_id in here}
    elsewhere = [node_id for node_id in node_ids if node_id not in here]
    if elsewhere:
        verdicts.update(judge_on_nodes(elsewhere, package))
    return verdicts


def check_task_env(package: Mapping | None) -> dict:
    """The runtime_env of a check task: nrlprof shipped, and nothing a profiled parent worker would pass on."""
    from nrlprof.launch.runtime_env import isolation_from_parent

    return {**isolation_from_parent((), None), **isolation_overrides(), **dict(package or {})}


def judge_on_nodes(
    node_ids: list[str], package: Mapping | None = None, timeout_s: float = CHECK_TIMEOUT_S
) -> dict[str, AgentFix]:
    """Each node's verdict, from a task pinned to it; None verdicts for tasks that fail or do not answer in time."""
    import ray

    from nrlprof.rayfix.node_agent import AgentFix, judge_node
    from nrlprof.rayfix.node_tasks import pinned

    remote, env = ray.remote(max_retries=0)(judge_node), check_task_env(package)
    refs = {node_id: remote.options(runtime_env=env, **pinned(node_id)).remote(node_id) for node_id in node_ids}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    verdicts = {}
    for node_id, ref in refs.items():
        if ref not in ready:
            ray.cancel(ref, force=True)
            verdicts[node_id] = AgentFix(None, f"the check task pinned to it did not finish within {timeout_s:.0f}s")
            continue
        try:
            verdicts[node_id] = ray.get(ref)
        except Exception as err:
            first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
            verdicts[node_id] = AgentFix(None, f"the check task pinned to it failed: {first_line}")
    return verdicts


def _report(nodes: dict[str, str], verdicts: dict[str, AgentFix]) -> None:
    """One warning for the newly seen nodes whose agent lacks the fix, one for those that could not be judged."""

    def listed(fixed: bool | None) -> str:
        return "; ".join(
            f"node {node_id} ({ip}): {verdicts[node_id].reason}"
            for node_id, ip in nodes.items()
            if verdicts[node_id].fixed is fixed
        )

    unfixed, unknown = listed(False), listed(None)
    if unfixed:
        logger.warning(
            "Ray's runtime-env agent runs Ray's unfixed profiler plugins, where a profiled worker would hang, on %s. "
            "nrlprof starts profiled workers through py_executable instead. To use the plugins, run "
            "`nrlprof patch-ray` on each of those nodes before `ray start`.",
            unfixed,
        )
    if unknown:
        logger.warning(
            "could not tell whether Ray's runtime-env agent has nrlprof's fix on %s; nrlprof starts profiled workers "
            "through py_executable, which works either way.",
            unknown,
        )
    for node_id, verdict in verdicts.items():
        if verdict.fixed:
            logger.debug("runtime-env agent of node %s (%s) has the fix: %s", node_id, nodes[node_id], verdict.reason)


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
