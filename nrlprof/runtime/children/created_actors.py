"""Actors that a process a worker started created (vLLM V2's `RayWorkerProc`s) join a window asked for through that
process: readied as the controller readies a worker, tracked, named `<worker>.<class>`. docs/design.md, "Windows asked
for while the job runs"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nrlprof import rayapi
from nrlprof.config.plan import Plan, Target
from nrlprof.launch.runtime_env import worker_descriptor
from nrlprof.runtime.on_demand.workers import ready_in_actors
from nrlprof.workers.identity import RankCounter, WorkerIdentity, snake_case
from nrlprof.workers.matching import Match
from nrlprof.workers.tracker import TrackedActor

if TYPE_CHECKING:
    from nrlprof.runtime.on_demand.workers import EnableInActor
    from nrlprof.runtime.profiled import ProfiledProcess


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
    session: ProfiledProcess,
    names: CreatedActorNames,
    plan_json: str,
    kind: str,
    worker: WorkerIdentity,
    target: Target,
    enable_in_actor: EnableInActor,
) -> None:
    """Ready every live actor this process created for the `kind` window asked for, and track it."""
    created = session.held_actors()
    if not created or not rayapi.connected():
        return
    match = Match(Plan.from_json(plan_json).backend(kind), target, worker.name)
    calls = []
    for actor_id, handle, own in created:
        identity = names.of(actor_id, own, worker)
        calls.append((handle, identity, worker_descriptor(identity, (match,), worker.name), identity.name))
    ready, _problems = ready_in_actors(calls, plan_json, kind, session.plan.timeout_s, enable_in_actor)
    for handle, identity in ready:
        _track(session, handle, identity, kind)


def _track(session: ProfiledProcess, handle: Any, identity: WorkerIdentity, kind: str) -> None:
    tracked = session.tracker.find(handle)
    if tracked is None:
        session.tracker.add(TrackedActor(handle, identity, (kind,)))
    elif kind not in tracked.kinds:
        session.tracker.remove(tracked)
        session.tracker.add(replace(tracked, kinds=(*tracked.kinds, kind)))
