"""Sending window actions to tracked actors through `__ray_call__`, in order with their work.

A worker that does not answer an action in time (busy in a long call) is not waited on again until every
window is closed: later actions still reach it, in order, but flagged late, so its record says so. A worker found
dead during a window (SIGKILL, the OOM killer) gets a record that says so (nrlprof.runtime.windows.deaths); one that the
job ends (`ray.kill`) closes its windows first (`release`). Nothing here calls Ray once the job has shut it down.

Inside a worker, the actions reach the engines' own profiler switches, its own backends, the processes it
started (over its own channel, all at once; nrlprof.runtime.children.channel; without the torch actions of a window
an engine's own profiler records), then the actors it created.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from nrlprof import rayapi
from nrlprof.backends import backend_class
from nrlprof.config.plan import NSYS
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.process import state
from nrlprof.process.kind import WORKER
from nrlprof.runtime.windows.deaths import OpenWindow, death_cause, died_record
from nrlprof.runtime.windows.profiler import SETTLE, START, STEP, STOP, UNWRITTEN, Action, ProcessProfiler
from nrlprof.workers.tracker import TrackedActor, Tracker


class ProcessWithChildren(Protocol):
    """What applying actions needs of a session: its own profiler and the children it started."""

    process: ProcessProfiler
    children: Any


def apply_in_actor(actor_instance: object, actions: tuple[Action, ...]) -> list[dict]:
    """Runs inside a worker: its engines, its own backends and child processes, then the actors it tracks."""
    session = state.session
    if state.on_demand is not None and (session is None or session.kind != WORKER):
        session = state.on_demand
    if session is None:
        return []
    records: list[dict] = []
    for_children = actions
    if session.engines is not None:
        records, for_children = session.engines.apply(actor_instance, actions)
    records = apply_with_children(session, actions, for_children) + records
    if len(session.tracker):
        records += session.channel.send(actions)
    return records


def apply_with_children(
    session: ProcessWithChildren, actions: tuple[Action, ...], for_children: tuple[Action, ...] | None = None
) -> list[dict]:
    """This process's backends and those of the processes it started (`for_children`, by default the same
    actions), at once.

    An nsys stop reaches the children first: the report of the nsys session is written when its last capture
    range closes, and that is then the worker's own, so the worker's record finds the report it waits for.
    """
    children = session.children
    for_children = actions if for_children is None else for_children
    if children is None or not len(children) or not for_children:
        return session.process.apply(actions)
    with children.acting:
        posting = children.post(for_children)
        if any(a.op == STOP and a.kind == NSYS for a in for_children):
            child_records = children.collect(posting)
            records = session.process.apply(actions)
        else:
            records = session.process.apply(actions)
            child_records = children.collect(posting)
    return records + [written_child_record(session, r) for r in child_records]


def written_child_record(session: ProcessWithChildren, record: dict) -> dict:
    """A child's record it left to its worker (nsys: the report is the worker's), completed and written."""
    if not record.pop(UNWRITTEN, False):
        return record
    backend = session.process.backends.get(record.get("backend"))
    if backend is not None:
        record = backend.complete_child_record(record)
    session.process.write_manifest(WindowRecord(**record))
    return record


@dataclass
class Posted:
    """Actions sent to the tracked actors, not yet waited for: the answers awaited, the records already in."""

    actions: tuple[Action, ...]
    waiting: dict[object, TrackedActor]
    records: list[dict]


class WorkerChannel:
    """The tracked actors of one process, reached with window actions; remembers who fell behind."""

    def __init__(
        self,
        tracker: Tracker,
        timeout_s: float,
        write: Callable[[WindowRecord], None] | None = None,
        node_ip: str = "",
    ) -> None:
        self.tracker = tracker
        self.timeout_s = timeout_s
        # Writes a record in this process's manifest: that of a worker found dead.
        self.write = write
        self.node_ip = node_ip
        self.late: set[TrackedActor] = set()
        self.unanswered: dict[object, TrackedActor] = {}
        self.answered = 0
        # The windows the actions sent so far opened, per backend: what a worker found dead was in.
        self.windows: dict[str, OpenWindow] = {}
        self.starting: dict[str, OpenWindow] = {}
        # Windows stopped whose files each worker finishes beside its next call, until a settle or the backend's
        # next window: a worker found dead before then may not have written them.
        self.finishing: dict[str, OpenWindow] = {}
        self.found_at: int | None = None

    def send(self, actions: tuple[Action, ...]) -> list[dict]:
        """Apply the actions in every tracked actor; the window records that came back."""
        return self.collect(self.post(actions))

    def post(self, actions: tuple[Action, ...]) -> Posted | None:
        """Send the actions to every tracked actor without waiting: what `collect` waits for (None: Ray is gone)."""
        if not rayapi.connected():
            return None
        import ray

        self._opening(actions)
        records = self._collect(ray.wait(list(self.unanswered), num_returns=len(self.unanswered), timeout=0)[0])
        if any(a.op == START for a in actions):
            # A new window: only workers still busy with earlier actions stay late.
            self.late = set(self.unanswered.values())
        late_actions = tuple(replace(a, late=True) for a in actions)
        waiting: dict[object, TrackedActor] = {}
        for actor in self.tracker.actors():
            is_late = actor in self.late
            try:
                ref = rayapi.call_in_actor(actor.handle, apply_in_actor, late_actions if is_late else actions)
            except Exception as err:
                logger.warning("could not reach worker '%s' rank %s: %s", actor.identity.name, actor.identity.rank, err)
                continue
            (self.unanswered if is_late else waiting)[ref] = actor
        self.answered = 0
        return Posted(actions, waiting, records)

    def collect(self, posted: Posted | None) -> list[dict]:
        """Wait for the actions `post` sent (NRL_PROFILE_TIMEOUT_S at most); the window records that came back."""
        if posted is None:
            return []
        import ray

        actions, waiting, records = posted.actions, posted.waiting, posted.records
        if waiting:
            ready, missed = ray.wait(list(waiting), num_returns=len(waiting), timeout=self.timeout_s)
            self.answered = len(ready)
            records += self._collect(ready, waiting)
            for ref in missed:
                self._fell_behind(waiting[ref], actions)
                self.unanswered[ref] = waiting[ref]
        if any(a.op == STOP for a in actions):
            records += self._collect(ray.wait(list(self.unanswered), num_returns=len(self.unanswered), timeout=0)[0])
        self._opened(actions)
        return records

    def _opening(self, actions: tuple[Action, ...]) -> None:
        """Before the actions go out: the windows they start (a worker found dead now never began them)."""
        self.found_at = max((a.step for a in actions if a.op in (START, STEP)), default=None)
        self.starting = {a.kind: OpenWindow(a.window.label, [], time.time()) for a in actions if a.op == START}

    def _opened(self, actions: tuple[Action, ...]) -> None:
        """Once they were applied: the windows they closed and opened, the steps they marked."""
        for action in actions:
            if action.op == STOP:
                stopped = self.windows.pop(action.kind, None)
                if stopped is not None and backend_class(action.kind).finishes_beside:
                    self.finishing[action.kind] = stopped
            elif action.op == SETTLE:
                self.finishing.pop(action.kind, None)
            elif action.op == START and action.kind in self.starting:
                self.finishing.pop(action.kind, None)
                self.windows[action.kind] = self.starting.pop(action.kind)
            if action.op in (START, STEP) and action.kind in self.windows:
                self.windows[action.kind].steps.append(action.step)
        self.starting = {}

    def release(self, actor: TrackedActor, actions: tuple[Action, ...]) -> list[dict]:
        """The job is about to end this actor (`ray.kill`): its windows close first, then it is no longer tracked."""
        records: list[dict] = []
        if actions and rayapi.connected():
            import ray

            try:
                ref = rayapi.call_in_actor(actor.handle, apply_in_actor, actions)
                # A worker busy since earlier actions (hung, maybe: the reason to end it) is not waited for.
                ready, _ = ray.wait([ref], timeout=0 if actor in self.late else self.timeout_s)
            except Exception as err:
                ready = []
                logger.warning("could not reach worker '%s' rank %s: %s", actor.identity.name, actor.identity.rank, err)
            if ready:
                records = self._collect(ready, {ready[0]: actor})
            else:
                logger.warning(
                    "worker '%s' rank %s did not close its windows before the job ended it (it is busy; "
                    "NRL_PROFILE_TIMEOUT_S=%.0f): its files of the window may be lost",
                    actor.identity.name,
                    actor.identity.rank,
                    self.timeout_s,
                )
        self.tracker.remove(actor)
        self.late.discard(actor)
        for ref in [ref for ref, owner in self.unanswered.items() if owner == actor]:
            del self.unanswered[ref]
        return records

    def drain(self) -> list[dict]:
        """At the end of the job: what late workers still owe, waited for once more."""
        if not self.unanswered or not rayapi.connected():
            return []
        import ray

        ready, missed = ray.wait(list(self.unanswered), num_returns=len(self.unanswered), timeout=self.timeout_s)
        records = self._collect(ready)
        for ref in missed:
            actor = self.unanswered.pop(ref)
            logger.warning(
                "worker '%s' rank %s never answered its window actions; its files may be incomplete",
                actor.identity.name,
                actor.identity.rank,
            )
        return records

    def _fell_behind(self, actor: TrackedActor, actions: tuple[Action, ...]) -> None:
        self.late.add(actor)
        logger.warning(
            "worker '%s' rank %s did not answer %s within %.0f s (NRL_PROFILE_TIMEOUT_S): it is busy; not waited "
            "on again in this window, and its record will say 'late'",
            actor.identity.name,
            actor.identity.rank,
            "/".join(f"{a.kind} {a.op}" for a in actions),
            self.timeout_s,
        )

    def _collect(self, refs: list, pending: dict | None = None) -> list[dict]:
        """The records of answers already in (`ray.wait` said so): one `ray.get` for all, one each if any failed."""
        import ray
        from ray.exceptions import RayActorError

        owners = [(ref, (pending if pending is not None and ref in pending else self.unanswered).pop(ref))
                  for ref in refs]  # fmt: skip
        try:
            return [record for answer in ray.get(refs) for record in answer]
        except Exception:
            pass
        records: list[dict] = []
        for ref, actor in owners:
            try:
                records += ray.get(ref)
            except RayActorError as err:
                records += self._died(actor, err)
            except Exception as err:
                logger.warning(
                    "worker '%s' rank %s failed a window action: %s", actor.identity.name, actor.identity.rank, err
                )
        return records

    def _died(self, actor: TrackedActor, error: BaseException) -> list[dict]:
        """A tracked worker is dead: no longer profiled, and each window it was in gets a record that says so."""
        self.tracker.remove(actor)
        self.late.discard(actor)
        death = death_cause(error)
        records = []
        windows: dict[bool, set[str]] = {False: set(), True: set()}  # during them, and stopped but not known final
        identity = actor.identity
        for kind in actor.kinds:
            for window, stopped in ((self.windows.get(kind) or self.starting.get(kind), False),
                                    (self.finishing.get(kind), True)):  # fmt: skip
                if window is None:
                    continue
                record = died_record(kind, identity.name, identity.rank, window, death, self.found_at, self.node_ip,
                                     stopped)  # fmt: skip
                if self.write is not None:
                    self.write(record)
                records.append(asdict(record))
                windows[stopped].add(window.window)
        during = " during window " + ", ".join(sorted(windows[False])) if windows[False] else ""
        after = (f" after window {', '.join(sorted(windows[True]))} stopped, before its files were known to be final"
                 if windows[True] else "")  # fmt: skip
        logger.warning(
            "worker '%s' rank %s%s is dead%s%s; it is no longer profiled: %s",
            actor.identity.name,
            actor.identity.rank,
            f" (pid {death.pid})" if death.pid is not None else "",
            during,
            after,
            death.cause,
        )
        return records
