"""Profiled workers a controller calls but did not create, gated like the ones it created.

OpenRLHF's PPOTrainer is a Ray actor that gets its actor groups from the driver; a driver may step workers an
actor created. The first time a controller calls a method of an actor it does not know, it asks that actor,
in order with the call, whether it is a profiled worker (and not an engine child, which its parent gates).
The answers are taken before each window action: a worker joins the windows that start after its answer.
"""

from __future__ import annotations

import threading
from typing import Any

from nrlprof.log import logger
from nrlprof.process import state
from nrlprof.process.kind import WORKER
from nrlprof.runtime.ray_link import ray_connected
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.tracker import TrackedActor


def describe_in_actor(_actor_instance: object) -> dict | None:
    """Runs inside an actor: who it is and its gated backends, if it is a profiled worker its parent does not gate."""
    session = state.session
    if session is None or session.kind != WORKER or session.gated_by_parent:
        return None
    kinds = [kind for kind, target in session.targets.items() if target is not None and _gated(session, kind)]
    if not kinds:
        return None
    identity = session.identity
    return {"identity": identity.__dict__, "kinds": kinds}


def _gated(session: Any, kind: str) -> bool:
    backend = session.plan.backend(kind)
    return backend is not None and backend.steps is not None


class Adoption:
    def __init__(self, host: Any) -> None:
        self.host = host
        self.asked: set[str] = set()
        self.pending: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def called(self, handle: Any) -> None:
        """A method of `handle` is being called by this controller."""
        try:
            actor_id = handle._actor_id.hex()
        except AttributeError:
            return
        if actor_id in self.asked or actor_id in self.host.known_actors:
            return
        with self._lock:
            if actor_id in self.asked:
                return
            self.asked.add(actor_id)
            try:
                self.pending[handle.__ray_call__.remote(describe_in_actor)] = handle
            except Exception as err:
                logger.debug("could not ask actor %s whether it is profiled: %s", actor_id, err)

    def take_answers(self) -> None:
        """Track the profiled workers that answered since the last window action."""
        if not self.pending:
            return
        if not ray_connected():
            self.pending.clear()
            return
        import ray

        with self._lock:
            ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
            answered = [(ref, self.pending.pop(ref)) for ref in ready]
        for ref, handle in answered:
            try:
                answer = ray.get(ref)
            except Exception:
                continue
            if not answer:
                continue
            data = answer["identity"]
            identity = WorkerIdentity(
                data["class_name"],
                data["actor_name"],
                data["rank"],
                data["explicit_name"],
                tuple(data["roles"]),
                data.get("framework"),
            )
            self.host.known_actors[handle._actor_id.hex()] = identity
            self.host.tracker.add(TrackedActor(handle, identity, tuple(answer["kinds"])))
            logger.info(
                "worker '%s' rank %d, created elsewhere and called by this controller, joins its windows",
                identity.name,
                identity.rank,
            )
