"""The controller's part: the step sources, the gate, adoption, the listener for windows asked for, the step anatomy
of a driver or a Ray worker that may become the controller; its own backends as any process's (nrlprof.runtime.
profiled). Built by nrlprof.runtime.activation, which hands in everything it calls back."""

from __future__ import annotations

import contextlib
import os
import socket
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nrlprof.config.plan import BackendPlan, Plan, Target
from nrlprof.log import logger
from nrlprof.process import lifecycle
from nrlprof.process.kind import CONTROLLER, WORKER
from nrlprof.process.lifecycle import LIFECYCLE
from nrlprof.runtime.profiled import ProfiledProcess
from nrlprof.runtime.steps.adoption import Adoption
from nrlprof.runtime.steps.sources import StepSources
from nrlprof.runtime.windows.gate import Gate
from nrlprof.workers.identity import WorkerIdentity

if TYPE_CHECKING:
    from nrlprof.anatomy.recorder import Recorder
    from nrlprof.runtime.slow.calls import CallClock


class Stoppable(Protocol):
    def stop(self) -> None: ...


# A framework's own profiling settings: a verl/RLinf-style mapping, or a Plan an adapter built from them.
FrameworkConfig = Mapping[str, Any] | Plan


class Controller(ProfiledProcess):
    """`kind` is `driver` or `controller` (a Ray worker no pattern matched: the controller once it steps, as verl's
    TaskRunner). `listen` (an armed job's) starts listening for windows asked for at the first step and returns what
    stops that; `reconfigure` takes a framework's own profiling settings, when an adapter asks."""

    def __init__(
        self,
        plan: Plan,
        targets: Mapping[str, Target | None],
        kind: str,
        anatomy: Recorder | None,
        listen: Callable[[Controller], Stoppable] | None,
        reconfigure: Callable[[FrameworkConfig], object],
    ) -> None:
        super().__init__(plan, None, targets, kind)
        # Class names of actors to launch as the controller (verl's TaskRunner under controller_nsight_options).
        self._controller_classes: set[str] = set()
        self.adoption = Adoption(self)
        # Weak references to the unmatched actors a driver created: one may become a controller.
        self._created: list[weakref.ref] = []
        self.listener: Stoppable | None = None
        self._reconfigure = reconfigure
        self.reconfigure(plan, targets, anatomy, listen)

    def reconfigure(
        self,
        plan: Plan,
        targets: Mapping[str, Target | None],
        anatomy: Recorder | None,
        listen: Callable[[Controller], Stoppable] | None,
    ) -> None:
        """Take the plan (a new one once `finish` closed this process's windows, files kept; tracked actors stay)."""
        self._configure(plan, targets)
        self.anatomy = anatomy
        self.listen = listen
        self._gate: Gate | None = None
        self.sources = StepSources(self._drive, plan.step_method is not None)
        # Armed for slow steps, once this process steps: what times the calls it submits (the call hook's).
        self.call_clock: CallClock | None = None
        # `nrlprof.step`: through the step sources until it is called once, then the gate's own step.
        self.step = self._first_explicit_step

    def launch_as_controller(self, class_name: str) -> None:
        """Actors of this class are launched as the job's controller (verl's TaskRunner)."""
        self._controller_classes.add(class_name)

    def launches_as_controller(self, class_name: str) -> bool:
        return class_name in self._controller_classes

    def remember_created(self, handle: Any) -> None:
        """An unmatched actor this driver created may become a controller; held weakly, never kept alive."""
        with contextlib.suppress(TypeError):
            self._created.append(weakref.ref(handle))

    def created_actors(self) -> list[Any]:
        """The unmatched actors this driver created that the job still holds."""
        return [handle for handle in (ref() for ref in self._created) if handle is not None]

    def forget_created(self) -> None:
        self._created.clear()

    def ask_reconfiguration(self, config: FrameworkConfig) -> None:
        """A framework adapter found the framework's own profiling settings: nrlprof takes them, as `nrlprof.configure`
        does (NRL_* variables override them)."""
        self._reconfigure(config)

    def profile_as(self, identity: WorkerIdentity, kind: str, backend_plan: BackendPlan, target: Target) -> None:
        """A Ray worker of an armed job no pattern matched becomes a worker, unless it is the job's controller."""
        if self.kind != WORKER:
            if self.stepped:
                raise RuntimeError("this actor is the job's controller: it takes part in every window already")
            self.kind, self.identity, self.step = WORKER, identity, _ignore_step
            if self._process is not None and self._process.role.identity is None:
                self._process = None  # built for the controller it never became
        super().profile_as(identity, kind, backend_plan, target)

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self._gate = Gate(self.plan, self.tracker, self.process, self.channel, self.adoption.take_answers)
            if self.anatomy is not None:
                self._gate.marks = self.anatomy.marks
            if self.plan.slow is not None:
                from nrlprof.runtime.slow.watch import watch_for

                watch, self.call_clock = watch_for(self.plan, self._call_identity)
                self._gate.watch(watch)
            LIFECYCLE.add(lifecycle.GATE, self._gate.finish)
        return self._gate

    def _call_identity(self, handle: Any) -> tuple[str, int] | None:
        """The name and rank of an actor this controller calls, for the slow steps' verdicts; None if not known."""
        identity = self.identity_of(handle)
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
        if self.listen is not None and self.listener is None:
            try:
                self.listener = self.listen(self)
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
        super().finish()
        self.listener = None


def _ignore_step(step: int) -> None:
    """Workers follow the controller's steps; their own `nrlprof.step` calls change nothing."""


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
