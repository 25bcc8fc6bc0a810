"""The live actors of a running cluster: the names each can be matched by, and those a plan would profile."""

from __future__ import annotations

from nrlprof.config.plan import Plan
from nrlprof.workers.live import LiveActor, live_actors
from nrlprof.workers.matching import match_worker


def live_matches(plan: Plan, address: str | None) -> list[dict]:
    """Alive actors of a reachable cluster that the plan would profile, ranked by start time per name, each with
    the interpreter its runtime_env names (`py_executable`; None: the worker's own, Ray's default command).

    The cluster is joined as `ray.init` joins it (BadInput when it cannot be); actors are read from the
    GCS, so no dashboard is needed.
    """
    return [row for row in live_rows(plan, address) if row["backend"] is not None]


def live_rows(plan: Plan, address: str | None) -> list[dict]:
    """Every alive actor, with the names a pattern can match it by; one row per backend that would profile it
    (one row with `backend` None where none would)."""
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
