"""One Session per process: what nrlprof holds in a driver or controller (gate, hooks, controller backends) or
in a matched worker (its backends). nrlprof.runtime.activation builds it and makes it current."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from nrlprof import rayapi
from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import BackendPlan, Plan, Target
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.process import lifecycle, state
from nrlprof.process.kind import CHILD, CONTROLLER, DRIVER, WORKER
from nrlprof.process.lifecycle import LIFECYCLE
from nrlprof.process.state import OpenWindows
from nrlprof.runtime.steps.adoption import Adoption
from nrlprof.runtime.steps.sources import StepSources
from nrlprof.runtime.windows.dispatch import actor_fanout
from nrlprof.runtime.windows.fanout import Fanout, Posting
from nrlprof.runtime.windows.gate import Gate
from nrlprof.runtime.windows.profiler import Action, ProcessProfiler
from nrlprof.workers.identity import RankCounter, WorkerIdentity
from nrlprof.workers.tracker import Tracker

if TYPE_CHECKING:
    from nrlprof.anatomy.recorder import Recorder
    from nrlprof.runtime.children.protocol import Enable
    from nrlprof.runtime.slow.calls import CallClock


class ChannelEnd(Protocol):
    """One end of the channel between a matched worker and the processes it starts."""

    def close(self) -> None: ...

    def close_inherited(self) -> None: ...


class ChildrenEnd(ChannelEnd, Protocol):
    """A worker's end (nrlprof.runtime.children.channel.ChildChannel)."""

    acting: AbstractContextManager
    worker_name: str
    fanout: Fanout
    bound: bool

    def bind(self, worker_name: str, rank: int, node_ip: str, write: Callable[[WindowRecord], None] | None) -> None: ...

    def __len__(self) -> int: ...

    def release(self, pid: int) -> Posting | None: ...

    def enable(self, backend: Enable) -> None: ...


class EngineProfilers(Protocol):
    """Engines' own profiler switches (nrlprof.runtime.children.engine_switches.EngineSwitches)."""

    def apply(self, instance: object, actions: tuple[Action, ...]) -> tuple[list[WindowRecord], tuple[Action, ...]]: ...


class Stoppable(Protocol):
    def stop(self) -> None: ...


class Session:
    """What nrlprof holds in one process: plan, identity, tracked children, open windows, backends, gate.

    `kind` is `driver`, `controller` (a Ray worker that is no matched worker: it becomes the controller
    when it steps, as verl's TaskRunner does), `worker` (a matched worker) or `child` (a process a matched
    worker started, which joins that worker's windows: `identity` is the worker's; nrlprof.runtime.children.join).
    """

    def __init__(
        self,
        plan: Plan,
        identity: WorkerIdentity | None,
        targets: Mapping[str, Target | None],
        tracker: Tracker | None = None,
        ranks: RankCounter | None = None,
        kind: str | None = None,
    ) -> None:
        self.kind = kind or (DRIVER if identity is None else WORKER)
        self.identity = identity
        self.tracker = tracker or Tracker()
        self.ranks = ranks or RankCounter()
        self.anatomy: Recorder | None = None
        # Class names of actors to launch as the controller (verl's TaskRunner under controller_nsight_options).
        self.controller_classes: set[str] = set()
        self.known_actors: dict[str, WorkerIdentity] = {}
        self.adoption = Adoption(self)
        # Weak references to the unmatched actors a driver created: one may become a controller.
        self.created_actors: list = []
        # Set by the activation: a framework's own profiling config (a mapping) read as `nrlprof.configure` reads it;
        # the adapters that find such a config call it.
        self.read_framework_config: Callable[[Any], Any] | None = None
        # A worker created by a profiled worker: its parent gates it (no controller adopts it).
        self.gated_by_parent = False
        # A worker's channel to the processes it starts (a matched worker's; any Ray worker's in an armed job, which
        # a Session for windows asked for takes over); a child's end of its worker's channel
        # (nrlprof.runtime.children.join.ParentLink); engines' own profiler switches. Their modules import this one.
        self.children: ChildrenEnd | None = None
        self.parent_link: ChannelEnd | None = None
        self.engines: EngineProfilers | None = None
        # Every actor this process created, and in an armed job every one it called that another created (adoption),
        # held weakly (actor id -> weak reference): a window asked for while the job runs reaches those its patterns
        # select.
        self.created_handles: dict[str, Callable[[], Any]] = {}
        # Set by the activation in an armed job: called when this process becomes the controller, it starts listening
        # for windows asked for (nrlprof.runtime.on_demand.listener) and returns what stops that.
        self.on_controller: Callable[[Session], Stoppable | None] | None = None
        self.listener: Stoppable | None = None
        self._configure(plan, targets)

    def _configure(self, plan: Plan, targets: Mapping[str, Target | None]) -> None:
        self.plan = plan
        self.targets = dict(targets)
        self.windows = OpenWindows()
        self._process: ProcessProfiler | None = None
        self._gate: Gate | None = None
        self._channel: Fanout | None = None
        self.sources = StepSources(self._drive, plan.step_method is not None)
        # Armed for slow steps, once this process steps: what times the calls it submits (the call hook's).
        self.call_clock: CallClock | None = None
        # `nrlprof.step`: through the step sources until it is called once, then the gate's own step.
        self.step = _ignore_step if self.follows_windows else self._first_explicit_step

    @property
    def follows_windows(self) -> bool:
        """A matched worker or its child: windows come from the controller, never from its own steps."""
        return self.kind in (WORKER, CHILD)

    @property
    def process(self) -> ProcessProfiler:
        """This process's backends; built on first use, once Ray knows the session directory."""
        if self._process is None:
            session_dir, node_ip = _ray_session()
            role = ProcessRole(self.identity, self.plan, session_dir, node_ip)
            self._process = ProcessProfiler(role, self.targets, self.windows)
        return self._process

    @property
    def has_process(self) -> bool:
        return self._process is not None

    def profile_as(self, identity: WorkerIdentity, kind: str, backend_plan: BackendPlan, target: Target) -> None:
        """A window asked for selects this process as the worker `identity`: its `kind` backend joins this Session
        (a Ray worker of an armed job no pattern matched becomes a worker, unless it is the job's controller)."""
        if self.kind not in (WORKER, CHILD):
            if self.stepped:
                raise RuntimeError("this actor is the job's controller: it takes part in every window already")
            self.kind, self.identity, self.step = WORKER, identity, _ignore_step
            if self._process is not None and self._process.role.identity is None:
                self._process = None  # built for the controller it never became
        self.targets.setdefault(kind, target)
        self.process.add_backend(kind, backend_plan, target)

    def use_process(self, process: ProcessProfiler) -> None:
        """A child's backends, built with its worker's Ray session (it has none of its own)."""
        self._process = process

    @property
    def channel(self) -> Fanout:
        """The tracked actors this process created, reached with window actions."""
        if self._channel is None:
            self._channel = actor_fanout(self.tracker, self.plan.timeout_s, self._write_record, _ray_session()[1])
        return self._channel

    def _write_record(self, record: WindowRecord) -> None:
        self.process.write_manifest(record)

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self._gate = Gate(self.plan, self.tracker, self.process, self.channel, self.adoption.take_answers)
            if self.anatomy is not None:
                self._gate.marks = self.anatomy.marks
            if self.plan.slow is not None:
                from nrlprof.runtime.slow.watch import watch_for

                self._gate.slow, self.call_clock = watch_for(self.plan, self._call_identity)
            LIFECYCLE.add(lifecycle.GATE, self._gate.finish)
        return self._gate

    def _call_identity(self, handle: Any) -> tuple[str, int] | None:
        """The name and rank of an actor this controller calls, for the slow steps' verdicts; None if not known."""
        identity = self.known_actors.get(rayapi.actor_id(handle) or "")
        if identity is None:
            tracked = self.tracker.find(handle)
            identity = tracked.identity if tracked is not None else None
        return None if identity is None else (identity.name, identity.rank)

    def built_gate(self) -> Gate | None:
        """The gate once a step built it (another thread reads it here, never building it)."""
        return self._gate

    def _first_explicit_step(self, step: int) -> None:
        self.sources.explicit(step)
        self.step = self.gate.step

    def framework_step(self, step: int, source: str) -> None:
        """A step found by a framework adapter (verl's trainer, NeMo RL's loop, ...)."""
        if not self.follows_windows:
            self.sources.from_framework(step, source)

    def marker_step(self, step: int, source: str) -> None:
        if not self.follows_windows:
            self.sources.from_marker(step, source)

    @property
    def stepped(self) -> bool:
        return self._gate is not None

    def _drive(self, step: int) -> None:
        if self._gate is None:
            # Built at the first step, after `ray.init()`: the controller's files go under Ray's session.
            self._became_controller(step)
        self.gate.step(step)

    def _became_controller(self, step: int) -> None:
        if self.anatomy is not None and not self.anatomy.started:
            self.anatomy.start()
        if self.on_controller is not None and self.listener is None:
            try:
                self.listener = self.on_controller(self)
            except Exception as err:  # the job runs on, without windows asked for
                logger.error("this armed job cannot take windows asked for while it runs: %s", err)
        if self.kind == CONTROLLER:
            logger.info(
                "step %d: this %s is the controller on %s pid %d: it opens and closes the windows of "
                "the %d worker(s) it created",
                step,
                _actor_description(),
                socket.gethostname(),
                os.getpid(),
                len(self.tracker),
            )

    def finish(self) -> None:
        """Close the windows (their files written), in the lifecycle's order; the controller actors a driver created
        close theirs when it exits."""
        if self._gate is None and self._process is not None:
            self._process.close_all()
        LIFECYCLE.close(skip=(lifecycle.CONTROLLER_ACTORS,))
        self.listener = None

    def reconfigure(self, plan: Plan, targets: Mapping[str, Target | None]) -> None:
        """Take the new plan, once `finish` closed this session's windows (files kept); tracked actors stay tracked."""
        self.anatomy = None
        self._configure(plan, targets)


def _ignore_step(step: int) -> None:
    """Workers follow the controller's steps; their own `nrlprof.step` calls change nothing."""


def current() -> Session | None:
    return state.session


def _ray_session() -> tuple[str | None, str]:
    return rayapi.session_dir_and_node_ip()


def _actor_description() -> str:
    """`actor (<name or id>)`, or `Ray task (<name>)` where a task runs the loop (SkyRL's skyrl_entrypoint)."""
    try:
        import ray

        context = ray.get_runtime_context()
        actor = context.get_actor_name() or context.get_actor_id()
        if actor is None:
            return f"Ray task ({context.get_task_name() or context.get_task_id()})"
        return f"actor ({actor})"
    except Exception:
        return "actor (?)"


def in_ray_worker_process() -> bool:
    return rayapi.in_worker_process()
