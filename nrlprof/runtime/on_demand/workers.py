"""The live workers a controller can reach with a window asked for: the actors it created (held weakly, so none is
kept alive) and those it adopted; each with who it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.config.plan import BackendPlan
from nrlprof.config.requests import WorkerRow
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import Match, match_backend

if TYPE_CHECKING:
    from nrlprof.runtime.session import Session


def live_created(session: Session) -> list[tuple[str, Any, WorkerIdentity]]:
    """(actor id, handle, identity at creation) of each actor this process created that the job still holds."""
    found = []
    for actor_id, reference in list(session.created_handles.items()):
        handle, identity = reference(), session.known_actors.get(actor_id)
        if handle is None:
            session.created_handles.pop(actor_id, None)
        elif identity is not None:
            found.append((actor_id, handle, identity))
    return found


def live_workers(session: Session) -> list[tuple[Any, WorkerIdentity]]:
    """(handle, identity) of each actor this controller created that the job still holds, and each it adopted."""
    found = {actor_id: (handle, identity) for actor_id, handle, identity in live_created(session)}
    for actor in session.tracker.actors():
        actor_id = rayapi.actor_id(actor.handle)
        if actor_id is not None and actor_id not in found:
            found[actor_id] = (actor.handle, actor.identity)
    return sorted(found.values(), key=lambda pair: (pair[1].name, pair[1].rank))


def selected(workers: list[tuple[Any, WorkerIdentity]], backend: BackendPlan) -> list[tuple[Any, Match]]:
    """The workers the backend's targets select (patterns and ranks, as the variables mean them)."""
    return [(handle, match) for handle, identity in workers if (match := match_backend(backend, identity)) is not None]


def names_and_ranks(workers: list[tuple[Any, WorkerIdentity]]) -> tuple[WorkerRow, ...]:
    """One row per worker name, as the job's card and refusals show them."""
    ranks: dict[str, list[int]] = {}
    for _handle, identity in workers:
        ranks.setdefault(identity.name, []).append(identity.rank)
    return tuple(WorkerRow(name, tuple(sorted(found))) for name, found in sorted(ranks.items()))


def describe_names(rows: tuple[WorkerRow, ...]) -> str:
    """`policy (ranks 0,1), reward (rank 0)`, or `none`."""
    if not rows:
        return "none"
    return ", ".join(f"{row.name} (rank{'s' if len(row.ranks) > 1 else ''} {','.join(map(str, row.ranks))})"
                     for row in rows)  # fmt: skip
