"""The live actors of a running cluster that a plan would profile."""

from __future__ import annotations

from nrlprof.config.plan import Plan
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import match_worker


def live_matches(plan: Plan, address: str | None) -> list[dict]:
    """Alive actors of a reachable cluster that the plan would profile, ranked by start time per name, each with
    the interpreter its runtime_env names (`py_executable`; None: the worker's own, Ray's default command).

    The cluster is joined as `ray.init` joins it (BadInput when it cannot be); actors are read from the
    GCS, so no dashboard is needed.
    """
    from nrlprof.tools.cluster import connected

    with connected(address):
        from ray._private.state import actors as actor_table

        table = actor_table(actor_state_name="ALIVE")
        interpreters = _interpreters()
    rows = []
    counters: dict[str, int] = {}
    for actor in sorted(table.values(), key=lambda a: (a.get("StartTime", 0), a.get("ActorID", ""))):
        class_name, name = actor.get("ActorClassName", "?"), actor.get("Name") or None
        probe = WorkerIdentity(class_name, name, 0)
        rank = counters.get(probe.name, 0)
        counters[probe.name] = rank + 1
        identity = WorkerIdentity(class_name, name, rank)
        for match in match_worker(plan, identity):
            rows.append(
                {
                    "actor_id": actor.get("ActorID", ""),
                    "worker": identity.name,
                    "rank": rank,
                    "backend": match.backend.kind,
                    "pattern": match.target.pattern,
                    "node_id": (actor.get("Address") or {}).get("NodeID", ""),
                    "interpreter": interpreters.get(actor.get("ActorID", "")),
                }
            )
    return rows


def _interpreters() -> dict[str, str]:
    """Actor id -> the `py_executable` of its runtime_env, for the alive actors that have one (read from the GCS;
    empty where this Ray does not give it)."""
    import json

    try:
        from ray._private.state import state
        from ray.core.generated import gcs_pb2

        rows = state._connect_and_get_accessor().get_actor_table(None, "ALIVE")
        found = {}
        for raw in rows:
            data = gcs_pb2.ActorTableData.FromString(raw)
            runtime_env = json.loads(data.serialized_runtime_env or "{}")
            if isinstance(runtime_env, dict) and runtime_env.get("py_executable"):
                found[data.actor_id.hex()] = str(runtime_env["py_executable"])
        return found
    except Exception:  # a private interface of Ray's: the interpreter is then "the worker's own"
        return {}
