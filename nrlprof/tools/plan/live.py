"""The live actors of a running cluster: the names each can be matched by, and the backends a plan would profile
them with."""

from __future__ import annotations

from nrlprof.config.plan import Plan
from nrlprof.workers.live import LiveActor, live_actors
from nrlprof.workers.matching import match_worker


def live_rows(plan: Plan, address: str | None) -> list[dict]:
    """Every alive actor, ranked by start time per name, with the names a pattern can match it by and the
    interpreter its runtime_env names (`py_executable`; None: the worker's own); one row per backend that would
    profile it (one row with `backend` None where none would). The cluster is joined as `ray.init` joins it
    (BadInput when it cannot be); actors are read from the GCS, so no dashboard is needed."""
    from nrlprof.tools.cluster import connected

    with connected(address):
        actors = _read()
    rows = []
    for actor in actors:
        identity = actor.identity
        base = {
            "actor_id": actor.actor_id,
            "worker": identity.name,
            "rank": identity.rank,
            "framework": identity.framework,
            "names": list(identity.match_names),
            "node_id": actor.node_id,
            "interpreter": actor.interpreter,
        }
        matches = match_worker(plan, identity)
        for match in matches:
            rows.append({**base, "backend": match.backend.kind, "pattern": match.target.pattern,
                         "matched_name": match.matched_name})  # fmt: skip
        if not matches:
            rows.append({**base, "backend": None, "pattern": None, "matched_name": None})
    return rows


def _read() -> list[LiveActor]:
    try:
        return live_actors()
    except Exception:  # a private interface of Ray's: no live actors can be read then
        return []
