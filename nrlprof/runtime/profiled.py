"""The profiled process's part: a process's plan, identity, backends, open windows, the actors it created and tracks,
its children's channel; a controller has one too (nrlprof.runtime.controller). Built by nrlprof.runtime.activation."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nrlprof import rayapi
from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import BackendPlan, Plan, Target
from nrlprof.manifest import WindowRecord
from nrlprof.process import lifecycle
from nrlprof.process.kind import CHILD, WORKER
from nrlprof.process.lifecycle import LIFECYCLE
from nrlprof.process.state import OpenWindows
from nrlprof.runtime.windows.dispatch import actor_fanout
from nrlprof.runtime.windows.fanout import Fanout
from nrlprof.runtime.windows.profiler import ProcessProfiler
from nrlprof.workers.identity import RankCounter, WorkerIdentity
from nrlprof.workers.tracker import Tracker

if TYPE_CHECKING:
    from nrlprof.runtime.children.channel import ChildChannel
    from nrlprof.runtime.children.engine_switches import EngineSwitches


class ChannelEnd(Protocol):
    """A child's end of its worker's channel (nrlprof.runtime.children.join.ParentLink)."""

    def close(self) -> None: ...

    def close_inherited(self) -> None: ...


class ProfiledProcess:
    """`kind` is `worker` (a matched worker, or a Ray worker a window asked for selected) or `child` (a process a
    matched worker started, which joins its windows: `identity` is the worker's; nrlprof.runtime.children.join)."""

    stepped = False  # its windows come from its controller, never from its own steps

    def __init__(
        self,
        plan: Plan,
        identity: WorkerIdentity | None,
        targets: Mapping[str, Target | None],
        kind: str,
        gated_by_parent: bool = False,
    ) -> None:
        self.kind = kind
        self.identity = identity
        self.tracker = Tracker()
        self.ranks = RankCounter()
        # Every actor this process created (and a controller adopted), by actor id: who it is; in an armed job (or a
        # child) also held weakly: a window asked for while the job runs reaches those its patterns select.
        self.known_actors: dict[str, WorkerIdentity] = {}
        self._held: dict[str, weakref.ref] = {}
        # A worker created by a profiled worker: its parent gates it (no controller adopts it).
        self.gated_by_parent = gated_by_parent
        # A worker's channel to the processes it starts, a child's end of it, engines' own profiler switches: the
        # activation opens them once Ray has connected the process.
        self.children: ChildChannel | None = None
        self.parent_link: ChannelEnd | None = None
        self.engines: EngineSwitches | None = None
        self._configure(plan, targets)

    def _configure(self, plan: Plan, targets: Mapping[str, Target | None]) -> None:
        self.plan = plan
        self.targets = dict(targets)
        self.windows = OpenWindows()
        self._process: ProcessProfiler | None = None
        self._channel: Fanout | None = None

    def know_actor(self, handle: Any, identity: WorkerIdentity, held: bool) -> None:
        """An actor this process created or adopted is `identity`; `held`, it is also held weakly (`held_actors`)."""
        actor_id = rayapi.actor_id(handle)
        if actor_id is not None:
            self.known_actors[actor_id] = identity
            if held:
                self._held[actor_id] = weakref.ref(handle)

    def held_actors(self) -> list[tuple[str, Any, WorkerIdentity]]:
        """(actor id, handle, identity) of each actor held that the job still holds; the others are let go."""
        found = []
        for actor_id, reference in list(self._held.items()):
            handle = reference()
            if handle is None:
                del self._held[actor_id]
            else:
                found.append((actor_id, handle, self.known_actors[actor_id]))
        return found

    def identity_of(self, handle: Any) -> WorkerIdentity | None:
        """Who an actor this process created, adopted or tracks is; None if it does not know."""
        identity = self.known_actors.get(rayapi.actor_id(handle) or "")
        tracked = self.tracker.find(handle) if identity is None else None
        return tracked.identity if tracked is not None else identity

    @property
    def follows_windows(self) -> bool:
        """A matched worker or its child: windows come from the controller, never from its own steps."""
        return self.kind in (WORKER, CHILD)

    def step(self, step: int) -> None:
        """Workers follow the controller's steps; their own `nrlprof.step` calls change nothing."""

    @property
    def process(self) -> ProcessProfiler:
        """This process's backends; built on first use, once Ray knows the session directory."""
        if self._process is None:
            session_dir, node_ip = rayapi.session_dir_and_node_ip()
            role = ProcessRole(self.identity, self.plan, session_dir, node_ip)
            self._process = ProcessProfiler(role, self.targets, self.windows)
        return self._process

    @property
    def has_process(self) -> bool:
        return self._process is not None

    def profile_as(self, identity: WorkerIdentity, kind: str, backend_plan: BackendPlan, target: Target) -> None:
        """A window asked for selects this process as the worker `identity`: its `kind` backend joins it."""
        self.targets.setdefault(kind, target)
        self.process.add_backend(kind, backend_plan, target)

    def follow_worker(self, plan: Plan, identity: WorkerIdentity) -> None:
        """A child whose worker no window selected until one asked for did: it takes that worker's plan and identity."""
        self.plan, self.identity = plan, identity

    def use_process(self, process: ProcessProfiler) -> None:
        """A child's backends, built with its worker's Ray session (it has none of its own)."""
        self._process = process

    @property
    def channel(self) -> Fanout:
        """The tracked actors this process created, reached with window actions."""
        if self._channel is None:
            node_ip = rayapi.session_dir_and_node_ip()[1]
            self._channel = actor_fanout(self.tracker, self.plan.timeout_s, self._write_record, node_ip)
        return self._channel

    def _write_record(self, record: WindowRecord) -> None:
        self.process.write_manifest(record)

    def finish(self) -> None:
        """Close the windows (their files written), in the lifecycle's order; the controller actors a driver created
        close theirs when it exits."""
        if not self.stepped and self._process is not None:
            self._process.close_all()
        LIFECYCLE.close(skip=(lifecycle.CONTROLLER_ACTORS,))
