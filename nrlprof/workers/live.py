"""The alive actors of the cluster this process is connected to, as the identities a plan matches.

Read from the GCS (no dashboard needed): each actor's class and module (which framework it belongs to), its
name, and `RANK` from its runtime_env; ranked by start time per reported name where it has no `RANK`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from nrlprof.workers.frameworks import framework_of_module
from nrlprof.workers.identity import WorkerIdentity, rank_from_env_vars


@dataclass(frozen=True)
class LiveActor:
    actor_id: str
    node_id: str
    identity: WorkerIdentity
    interpreter: str | None
    # The env_vars of its runtime_env: a profiled worker's own descriptor is there (nrlprof.launch.runtime_env).
    env_vars: dict = field(default_factory=dict)


def live_actors(job_id: str | None = None) -> list[LiveActor]:
    """Every alive actor of the connected cluster (of one job, given its id in hex), oldest first."""
    from nrlprof import rayapi

    rows = rayapi.alive_actor_rows()
    if job_id is not None:
        rows = [row for row in rows if row.job_id.hex() == job_id]
    rows.sort(key=lambda row: (row.start_time, row.actor_id))
    counters: dict[str, int] = {}
    actors = []
    for row in rows:
        descriptor = row.function_descriptor.python_function_descriptor
        runtime_env = _runtime_env(row.serialized_runtime_env)
        framework = framework_of_module(descriptor.module_name)
        class_name = descriptor.class_name or row.class_name or "?"
        probe = WorkerIdentity(class_name, row.name or None, 0, framework=framework)
        rank = rank_from_env_vars(runtime_env.get("env_vars"))
        if rank is None:
            rank = counters.get(probe.name, 0)
            counters[probe.name] = rank + 1
        identity = WorkerIdentity(class_name, row.name or None, rank, framework=framework)
        interpreter = runtime_env.get("py_executable")
        interpreter = str(interpreter) if interpreter else None
        env_vars = runtime_env.get("env_vars")
        env_vars = env_vars if isinstance(env_vars, dict) else {}
        actors.append(LiveActor(row.actor_id.hex(), row.address.node_id.hex(), identity, interpreter, env_vars))
    return actors


def _runtime_env(serialized: str) -> dict:
    try:
        data = json.loads(serialized or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
