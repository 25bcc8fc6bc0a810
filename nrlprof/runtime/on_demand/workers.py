"""The live workers a controller can reach with a window asked for: the actors it created (held weakly, so none is
kept alive) and those it adopted; each with who it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.config.plan import BackendPlan
from nrlprof.config.requests import WorkerRow
from nrlprof.log import logger
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.matching import Match, match_backend

if TYPE_CHECKING:
    from nrlprof.runtime.profiled import ProfiledProcess

# Readies an actor for a window asked for, run inside it (nrlprof.runtime.activation.enable_in_actor).
EnableInActor = Callable[[object, str, str, str], bool]


def live_workers(session: ProfiledProcess) -> list[tuple[Any, WorkerIdentity]]:
    """(handle, identity) of each actor this controller created that the job still holds, and each it adopted."""
    found = {actor_id: (handle, identity) for actor_id, handle, identity in session.held_actors()}
    for actor in session.tracker.actors():
        actor_id = rayapi.actor_id(actor.handle)
        if actor_id is not None and actor_id not in found:
            found[actor_id] = (actor.handle, actor.identity)
    return sorted(found.values(), key=lambda pair: (pair[1].name, pair[1].rank))


def ready_in_actors(
    calls: list[tuple[Any, WorkerIdentity, str, str]], plan_json: str, kind: str, wait_s: float, enable: EnableInActor
) -> tuple[list[tuple[Any, WorkerIdentity]], list[str]]:
    """`enable` run in each actor (handle, identity, descriptor, the name a problem shows) for the `kind` window asked
    for: the actors ready, and what went wrong with each of the others (also logged)."""
    import ray

    refs = {}
    for handle, identity, descriptor, shown in calls:
        try:
            refs[rayapi.call_in_actor(handle, enable, plan_json, descriptor, kind)] = (handle, identity, shown)
        except Exception as err:
            logger.warning("could not reach worker '%s': %s", shown, err)
    done, late = ray.wait(list(refs), num_returns=len(refs), timeout=wait_s)
    ready, problems = [], []
    for ref in done:
        handle, identity, _shown = refs[ref]
        try:
            ray.get(ref)
        except Exception as err:
            cause = getattr(err, "cause", None) or err
            logger.warning("worker '%s' rank %s is not ready: %s", identity.name, identity.rank, cause)
            problems.append(f"'{identity.name}' rank {identity.rank}: {cause}")
            continue
        ready.append((handle, identity))
    for ref in late:
        problems.append(f"'{refs[ref][2]}' did not answer within {wait_s:.0f} s")
        logger.warning("worker %s", problems[-1])
    return ready, problems


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
