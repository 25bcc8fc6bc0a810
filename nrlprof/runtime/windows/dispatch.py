"""Window actions applied in a process (its engines' switches, its backends, the processes it started, the actors it
created), and carried to the actors it tracks through `__ray_call__`, in order with their work: the fan-out's transport
over Ray. Nothing here calls Ray once the job has shut it down."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from nrlprof import rayapi
from nrlprof.config.plan import NSYS
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.process import state
from nrlprof.runtime.windows.deaths import death_cause, died_record
from nrlprof.runtime.windows.fanout import Answer, Fanout, Gone, OpenWindow, Peer
from nrlprof.runtime.windows.profiler import STOP, Action, ProcessProfiler
from nrlprof.workers.tracker import TrackedActor, Tracker

if TYPE_CHECKING:
    from nrlprof.runtime.children.channel import ChildChannel


class ProcessWithChildren(Protocol):
    """What applying actions needs of a process: its own profiler and the children it started."""

    process: ProcessProfiler
    children: ChildChannel | None


def apply_in_actor(actor_instance: object, actions: tuple[Action, ...]) -> Answer:
    """Runs inside a worker: its engines, its own backends and child processes, then the actors it tracks."""
    session = state.session
    if session is None:
        return Answer()
    records: list[WindowRecord] = []
    for_children = actions
    if session.engines is not None:
        records, for_children = session.engines.apply(actor_instance, actions)
    records = apply_with_children(session, actions, for_children) + records
    if len(session.tracker):
        records += session.channel.send(actions)
    return Answer(session.process.open_kinds(), tuple(records))


def apply_with_children(
    session: ProcessWithChildren, actions: tuple[Action, ...], for_children: tuple[Action, ...] | None = None
) -> list[WindowRecord]:
    """This process's backends and those of the processes it started (`for_children`, by default the same
    actions), at once.

    An nsys stop reaches the children first: the report of the nsys session is written when its last capture
    range closes, and that is then the worker's own, so the worker's record finds the report it waits for.
    """
    children = session.children
    for_children = actions if for_children is None else for_children
    if children is None or not len(children) or not for_children:
        return list(session.process.apply(actions).records)
    with children.acting:
        posting = children.fanout.post(for_children)
        if any(a.op == STOP and a.kind == NSYS for a in for_children):
            child_records = children.fanout.collect(posting)
            records = list(session.process.apply(actions).records)
        else:
            records = list(session.process.apply(actions).records)
            child_records = children.fanout.collect(posting)
    return records + child_records + written_child_records(session, posting.unwritten)


def written_child_records(session: ProcessWithChildren, records: list[WindowRecord]) -> list[WindowRecord]:
    """The records the children left to their worker (nsys: the report is the worker's), completed and written."""
    written = []
    for record in records:
        backend = session.process.backends.get(record.backend)
        if backend is not None:
            record = backend.complete_child_record(record)
        session.process.write_manifest(record)
        written.append(record)
    return written


class RayPeers:
    """The actors a process tracks, as peers of its fan-out."""

    def __init__(self, tracker: Tracker, node_ip: str = "") -> None:
        self.tracker = tracker
        self.node_ip = node_ip
        self._peers: dict[object, Peer] = {}

    def peers(self) -> tuple[Peer, ...]:
        if not rayapi.connected():
            return ()
        live = {}
        for actor in self.tracker.actors():
            key = rayapi.actor_key(actor.handle)
            peer = live[key] = self._peers.get(key) or Peer(actor)
            peer.link, peer.kinds = actor, frozenset(actor.kinds)
        self._peers = live
        return tuple(live.values())

    def peer_of(self, actor: TrackedActor) -> Peer:
        self.peers()
        return self._peers.get(rayapi.actor_key(actor.handle)) or Peer(actor, frozenset(actor.kinds))

    def describe(self, peer: Peer) -> str:
        identity = peer.link.identity
        return f"worker '{identity.name}' rank {identity.rank}"

    def send(self, peer: Peer, actions: tuple[Action, ...], deadline: float) -> object | None:
        try:
            return rayapi.call_in_actor(peer.link.handle, apply_in_actor, actions)
        except Exception as err:
            logger.warning("could not reach %s: %s", self.describe(peer), err)
            return None

    def wait(self, tokens: dict[object, Peer], wanted: set[object], deadline: float) -> dict[object, Answer | Gone]:
        """The answers in by the deadline (those `wanted`; the others, without waiting): one `ray.get` for all, one
        each if any failed."""
        if not rayapi.connected():
            return {}
        import ray
        from ray.exceptions import RayActorError

        waited = [ref for ref in tokens if ref in wanted]
        ready = []
        if waited:
            # Ray counts the timeout in whole milliseconds, dropping the rest: rounded up, it lasts to the deadline.
            timeout = math.ceil(max(0.0, deadline - time.monotonic()) * 1000) / 1000
            ready = ray.wait(waited, num_returns=len(waited), timeout=timeout)[0]
        others = [ref for ref in tokens if ref not in wanted]
        if others:
            ready += ray.wait(others, num_returns=len(others), timeout=0)[0]
        if not ready:
            return {}
        try:
            return dict(zip(ready, ray.get(ready), strict=True))
        except Exception:
            pass
        answers: dict[object, Answer | Gone] = {}
        for ref in ready:
            try:
                answers[ref] = ray.get(ref)
            except RayActorError as err:
                answers[ref] = Gone(death_cause(err))
            except Exception as err:
                logger.warning("%s failed a window action: %s", self.describe(tokens[ref]), err)
                answers[ref] = Answer()
        return answers

    def forget(self, peer: Peer) -> None:
        self.tracker.remove(peer.link)
        self._peers.pop(rayapi.actor_key(peer.link.handle), None)

    def gone_records(self, peer: Peer, gone: Gone, during: dict[str, OpenWindow], after: dict[str, OpenWindow],
                     found_at: int | None) -> list[WindowRecord]:  # fmt: skip
        """A tracked worker is dead: each window it was in (or stopped, its files not known final) says so."""
        identity, death = peer.link.identity, gone.cause
        records = [
            died_record(kind, identity.name, identity.rank, window, death, found_at, self.node_ip, stopped)
            for windows, stopped in ((during, False), (after, True))
            for kind, window in windows.items()
        ]
        in_during = " during window " + ", ".join(sorted({w.window for w in during.values()})) if during else ""
        in_after = (f" after window {', '.join(sorted({w.window for w in after.values()}))} stopped, before its "
                    "files were known to be final" if after else "")  # fmt: skip
        logger.warning(
            "worker '%s' rank %s%s is dead%s%s; it is no longer profiled: %s",
            identity.name,
            identity.rank,
            f" (pid {death.pid})" if death.pid is not None else "",
            in_during,
            in_after,
            death.cause,
        )
        return records


def actor_fanout(tracker: Tracker, timeout_s: float, write: Callable[[WindowRecord], None] | None = None,
                 node_ip: str = "") -> Fanout:  # fmt: skip
    """The fan-out to the actors a process tracks."""
    return Fanout(RayPeers(tracker, node_ip), timeout_s, write)
