"""Profiled workers a controller calls but did not create (OpenRLHF's PPOTrainer's actor groups), asked once, in order
with the call, who they are; they join the windows that start after their answer. In an armed job every actor answers,
matched or not, so a window asked for can select it. docs/design.md, "Steps, and gating"."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from typing import Any, Protocol

from nrlprof import rayapi
from nrlprof.config.plan import Plan
from nrlprof.log import logger
from nrlprof.process import state
from nrlprof.process.kind import WORKER
from nrlprof.workers.frameworks import framework_of_class
from nrlprof.workers.identity import RankCounter, WorkerIdentity, rank_from_env_vars
from nrlprof.workers.tracker import TrackedActor, Tracker


@dataclass(frozen=True)
class Described:
    """An actor's answer to `describe_in_actor`: who it is (`ranked`: its rank is its own, not yet given here) and its
    gated backends."""

    identity: WorkerIdentity
    kinds: tuple[str, ...]
    ranked: bool = True


def describe_in_actor(actor_instance: object) -> Described | None:
    """Runs inside an actor: who it is and its gated backends, if it is a profiled worker its parent does not gate;
    in an armed job, who any other actor is (no backends: windows asked for may select it)."""
    session = state.session
    if session is None or (session.kind == WORKER and session.gated_by_parent):
        return None
    armed = session.plan.on_demand is not None
    if session.kind != WORKER:
        return _own_identity(actor_instance) if armed else None
    kinds = tuple(kind for kind, target in session.targets.items() if target is not None and _gated(session.plan, kind))
    if not kinds and not armed:
        return None
    return Described(session.identity, kinds)


def _own_identity(actor_instance: object) -> Described:
    """An unmatched actor's identity as the creation hook names actors; not ranked where `RANK` does not say it."""
    import ray

    cls = type(actor_instance)
    rank = rank_from_env_vars(dict(os.environ))
    identity = WorkerIdentity(
        cls.__name__,
        ray.get_runtime_context().get_actor_name() or None,
        0 if rank is None else rank,
        roles=tuple(getattr(cls, "__nrlprof_roles__", ())),
        framework=framework_of_class(cls),
    )
    return Described(identity, (), ranked=rank is not None)


class AdoptionHost(Protocol):
    """What adoption reads and fills of the controller's Session."""

    ranks: RankCounter
    known_actors: dict[str, WorkerIdentity]
    tracker: Tracker

    def know_actor(self, handle: Any, identity: WorkerIdentity, held: bool) -> None: ...


def _gated(plan: Plan, kind: str) -> bool:
    backend = plan.backend(kind)
    return backend is not None and backend.steps is not None


class Adoption:
    def __init__(self, host: AdoptionHost) -> None:
        self.host = host
        self.asked: set[str] = set()
        self.pending: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def called(self, handle: Any) -> None:
        """A method of `handle` is being called by this controller."""
        actor_id = rayapi.actor_id(handle)
        if actor_id is None:
            return
        if actor_id in self.asked or actor_id in self.host.known_actors:
            return
        with self._lock:
            if actor_id in self.asked:
                return
            self.asked.add(actor_id)
            try:
                self.pending[rayapi.call_in_actor(handle, describe_in_actor)] = handle
            except Exception as err:
                logger.debug("could not ask actor %s whether it is profiled: %s", actor_id, err)

    def take_answers(self, wait_s: float = 0) -> None:
        """Know the workers that answered since the last window action, and track the profiled ones (waiting up to
        `wait_s` for answers not in yet; the step path never waits). The controller's thread and the listener's
        both take answers."""
        if not self.pending:
            return
        if not rayapi.connected():
            self.pending.clear()
            return
        import ray

        with self._lock:
            asked = list(self.pending)
        ready, _ = ray.wait(asked, num_returns=len(asked), timeout=wait_s)
        with self._lock:
            for ref in ready:
                handle = self.pending.pop(ref, None)
                if handle is not None:
                    self._take(ray, ref, handle)

    def _take(self, ray: Any, ref: Any, handle: Any) -> None:
        try:
            answer = ray.get(ref)
        except Exception:
            return
        if not answer:
            return
        identity = answer.identity
        if not answer.ranked:
            identity = replace(identity, rank=self.host.ranks.take(identity.name))
        self.host.know_actor(handle, identity, held=not answer.kinds)
        if not answer.kinds:  # a worker of an armed job, which windows asked for may select
            return
        self.host.tracker.add(TrackedActor(handle, identity, answer.kinds))
        logger.info(
            "worker '%s' rank %d, created elsewhere and called by this controller, joins its windows",
            identity.name,
            identity.rank,
        )
