"""Actors that a process a worker started created (vLLM V2's `RayWorkerProc`s) join a window asked for through that
process: readied as the controller readies a worker, tracked, named `<worker>.<class>`. docs/design.md, "Windows asked
for while the job runs"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.config.plan import Plan, Target
from nrlprof.launch.runtime_env import worker_descriptor
from nrlprof.log import logger
from nrlprof.runtime.on_demand.worker import enable_in_actor
from nrlprof.runtime.on_demand.workers import live_created
from nrlprof.workers.identity import RankCounter, WorkerIdentity, snake_case
from nrlprof.workers.matching import Match
from nrlprof.workers.tracker import TrackedActor

if TYPE_CHECKING:
    from nrlprof.runtime.session import Session


class CreatedActorNames:
    """Each created actor's name under its worker, fixed the first time a window reaches it."""

    def __init__(self) -> None:
        self._given: dict[str, WorkerIdentity] = {}
        self._ranks = RankCounter()

    def of(self, actor_id: str, own: WorkerIdentity, worker: WorkerIdentity) -> WorkerIdentity:
        if own.explicit_name is not None and own.explicit_name.startswith(f"{worker.name}."):
            return own  # created once the process knew its worker: named as an engine child then
        given = self._given.get(actor_id)
        if given is None:
            name = f"{worker.name}.{snake_case(own.class_name)}"
            given = WorkerIdentity(own.class_name, own.actor_name, self._ranks.take(name), name)
            self._given[actor_id] = given
        return given


def enable_created_actors(
    session: Session, names: CreatedActorNames, plan_json: str, kind: str, worker: WorkerIdentity, target: Target
) -> None:
    """Ready every live actor this process created for the `kind` window asked for, and track it."""
    created = live_created(session)
    if not created or not rayapi.connected():
        return
    import ray

    backend = Plan.from_json(plan_json).backend(kind)
    refs: dict[Any, tuple[Any, WorkerIdentity]] = {}
    for actor_id, handle, own in created:
        identity = names.of(actor_id, own, worker)
        descriptor = worker_descriptor(identity, (Match(backend, target, worker.name),), worker.name)
        try:
            refs[rayapi.call_in_actor(handle, enable_in_actor, plan_json, descriptor, kind)] = (handle, identity)
        except Exception as err:
            logger.warning("actor '%s' rank %d is not in the window asked for: %s", identity.name, identity.rank, err)
    timeout_s = session.plan.timeout_s
    done, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    for ref in done:
        handle, identity = refs[ref]
        try:
            ray.get(ref)
        except Exception as err:
            cause = getattr(err, "cause", None) or err
            logger.warning("actor '%s' rank %d is not in the window asked for: %s", identity.name, identity.rank, cause)
            continue
        _track(session, handle, identity, kind)
    for ref in late:
        _handle, identity = refs[ref]
        logger.warning(
            "actor '%s' rank %d is not in the window asked for: it did not answer within %.0f s",
            identity.name, identity.rank, timeout_s,
        )  # fmt: skip


def _track(session: Session, handle: Any, identity: WorkerIdentity, kind: str) -> None:
    tracked = session.tracker.find(handle)
    if tracked is None:
        session.tracker.add(TrackedActor(handle, identity, (kind,)))
    elif kind not in tracked.kinds:
        session.tracker.remove(tracked)
        session.tracker.add(replace(tracked, kinds=(*tracked.kinds, kind)))
