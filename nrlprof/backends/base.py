"""The interface every backend implements: a runtime_env fragment, and windows in a process."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from nrlprof import wire
from nrlprof.config.plan import BackendPlan, Plan, Target
from nrlprof.config.steps import Window
from nrlprof.manifest import Status, Trigger, WindowRecord
from nrlprof.workers.identity import WorkerIdentity, discrete_method_names


@dataclass(frozen=True)
class ProcessRole:
    """Where a backend instance runs: a worker (with identity) or the controller.

    `parent`: in a process a matched worker started (`<worker>.<child>`), that worker.
    """

    identity: WorkerIdentity | None
    plan: Plan
    session_dir: str | None
    node_ip: str = ""
    parent: WorkerIdentity | None = None

    @property
    def is_controller(self) -> bool:
        return self.identity is None

    @property
    def worker_name(self) -> str:
        return "controller" if self.identity is None else self.identity.name

    @property
    def rank(self) -> int | None:
        return None if self.identity is None else self.identity.rank


class Backend:
    """One profiler in one process. Subclasses override what they need."""

    kind = ""
    # True where starting the profiler is slow enough to be done the step before the window.
    warms_up = False
    # False where the record is completed and written by the worker this process belongs to (nsys in its children).
    writes_own_record = True
    # True where the files of a window are finished beside the next step (`completion`), to be settled.
    finishes_beside = False

    def __init__(self, backend_plan: BackendPlan, role: ProcessRole, target: Target | None = None) -> None:
        self.backend_plan = backend_plan
        self.role = role
        self.discrete = bool(target and target.discrete)
        roles = role.identity.roles if role.identity is not None else ()
        self.discrete_methods = discrete_method_names(target.methods, roles) if target else frozenset()
        self.window: Window | None = None
        self.steps_seen: list[int] = []
        self.started_at = 0.0
        self.start_ms = 0.0
        self.late = False
        # The request id of the window asked for that is open (nrlprof.runtime.windows.asked), else empty.
        self.asked = ""
        # Why the open window opened by itself (a slow step), or why a slow:keep step is kept; None otherwise.
        self.trigger: Trigger | None = None
        # The open window is a slow:keep recording of one step (`begin_kept`).
        self.keeping = False

    @staticmethod
    def runtime_env_fragment(backend_plan: BackendPlan, identity: WorkerIdentity) -> dict:
        """Keys merged into a matched actor's runtime_env at creation."""
        return {}

    def ready_for_asked(self) -> None:
        """A window asked for opens at the next step (raises when this process cannot take it)."""

    def prepare_window(self, window: Window) -> None:
        """Warm up for `window`, which starts at the next step (backends with `warms_up`)."""

    def discard_prepared(self) -> None:
        """A prepared window that never started: drop what `prepare_window` built."""

    def start_window(self, window: Window, step: int) -> None:
        raise NotImplementedError

    def mark_step(self, step: int) -> None:
        """A new step begins inside the open window."""

    def stop_window(self) -> WindowRecord:
        raise NotImplementedError

    def begin_kept(self, step: int) -> bool:
        """slow:keep: record `step` (a window of that one step) unless this backend keeps no steps; True if it does."""
        return False

    def end_kept(self, trigger: Trigger | None) -> WindowRecord | None:
        """slow:keep: the step recorded ends: its files and record where `trigger` says it was slow, else nothing
        kept."""
        return None

    def completion(self) -> Callable[[WindowRecord], WindowRecord] | None:
        """Right after `stop_window`: what completes its record once the window's files are finished beside the next
        step (run after them on nrlprof.process.finishing's thread); None where the record is complete."""
        return None

    def complete_child_record(self, record: WindowRecord) -> WindowRecord:
        """In a worker: the record of one of its child processes that the child left to it (`writes_own_record`)."""
        return record

    def wants_call(self, method: str | None) -> bool:
        """In discrete mode: every annotated call (method None), and the listed actor methods."""
        return self.discrete and (method is None or method in self.discrete_methods)

    def begin_call(self, label: str) -> None:
        """Discrete mode: one capture around one call."""

    def end_call(self) -> None:
        """Discrete mode: the capture around the call ends."""

    def about(self, window: Window) -> dict:
        """A window's file's `nrlprof` block: who wrote it, where, and why the window opened by itself (`trigger`)."""
        block = {
            "worker": self.role.worker_name,
            "rank": self.role.rank,
            "window": window.label,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "backend": self.kind,
        }
        if self.trigger is not None:
            block["trigger"] = wire.to_builtins(self.trigger)
        return block

    def record(self, files: list[str], status: Status = Status.OK, message: str = "") -> WindowRecord:
        window = self.window
        if self.late and status == Status.OK:
            status = Status.LATE
            late = "window actions reached this worker late (it was busy): the trace may miss work"
            message = f"{late}; {message}" if message else late
        return WindowRecord(
            backend=self.kind,
            worker=self.role.worker_name,
            rank=self.role.rank,
            steps=tuple(self.steps_seen),
            window=window.label if window else "",
            files=files,
            status=status,
            message=message,
            node_ip=self.role.node_ip,
            started_at=self.started_at,
            asked=self.asked,
            trigger=self.trigger,
        )
