"""The backends of one process (a worker or the controller), driven by window actions."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from nrlprof import layout
from nrlprof.backends import backend_class
from nrlprof.backends.base import Backend, ProcessRole
from nrlprof.config.plan import BackendPlan, Target
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord, append_record, record_dict
from nrlprof.process.finishing import FINISHER, Finisher
from nrlprof.process.state import OpenWindows

PREPARE, START, STEP, STOP = "prepare", "start", "step", "stop"
# Wait for the files of the windows stopped so far to be finished (nrlprof.process.finishing).
SETTLE = "settle"
# Marks a record a child process returns for its worker to complete and write (nsys: the worker's report).
UNWRITTEN = "unwritten"


@dataclass(frozen=True)
class Action:
    """One thing to do for one backend: warm up for a window, start it at a step, mark a step, stop, or wait for
    the files of the windows stopped so far (settle).

    `late`: the driver stopped waiting for this worker earlier in the window (it was busy).
    """

    kind: str
    op: str
    first: int = 0
    last: int = 0
    step: int = 0
    late: bool = False
    # A window asked for while the job runs: its request id, which its records carry.
    asked: str = ""

    @property
    def window(self) -> Window:
        return Window(self.first, self.last)


class ProcessProfiler:
    def __init__(self, role: ProcessRole, targets: Mapping[str, Target | None], windows: OpenWindows) -> None:
        self.role = role
        self.windows = windows
        # The process's one finisher: the backends' files are finished on it, and the records after them.
        self.finisher: Finisher = FINISHER
        self.backends: dict[str, Backend] = {}
        for kind, target in targets.items():
            backend_plan = role.plan.backend(kind)
            if backend_plan is not None:
                self.backends[kind] = backend_class(kind)(backend_plan, role, target)
        # When the one who sent the actions being applied stops waiting for them (CLOCK_MONOTONIC), if anyone does.
        self.deadline: float | None = None
        # Discrete captures are process-wide: the first of overlapping calls starts one, the last ends it.
        self._calls_lock = threading.Lock()
        self._calls_running = 0
        self._capturing: list[Backend] = []

    def add_backend(self, kind: str, backend_plan: BackendPlan, target: Target | None = None) -> None:
        """A backend this process did not have, for a window asked for while the job runs; one it has is kept."""
        if kind not in self.backends:
            self.backends[kind] = backend_class(kind)(backend_plan, self.role, target)

    def begin_call(self, label: str, method: str | None) -> bool:
        """A call that discrete mode captures begins (any thread or task); False if it is not captured."""
        with self._calls_lock:
            if self._calls_running:
                self._calls_running += 1
                return True
            started = []
            for backend in self.backends.values():
                if backend.window is not None and backend.wants_call(method):
                    try:
                        backend.begin_call(label)
                        started.append(backend)
                    except Exception as err:
                        logger.error("discrete %s capture of %s failed to start: %s", backend.kind, label, err)
            if not started:
                return False
            self._calls_running, self._capturing = 1, started
            return True

    def end_call(self) -> None:
        with self._calls_lock:
            self._calls_running -= 1
            if self._calls_running:
                return
            capturing, self._capturing = self._capturing, []
            for backend in capturing:
                try:
                    backend.end_call()
                except Exception as err:
                    logger.error("discrete %s capture failed to stop: %s", backend.kind, err)

    def apply(self, actions: tuple[Action, ...]) -> list[dict]:
        """Run the actions meant for this process's backends; the records of windows closed."""
        records = []
        for action in actions:
            if action.op == SETTLE:
                self.finisher.settle()
                continue
            backend = self.backends.get(action.kind)
            if backend is None:
                continue
            try:
                record = self._apply_one(backend, action)
            except Exception as err:  # a profiler failure must never reach the training loop
                logger.error("%s %s for %s failed: %s", action.kind, action.op, self.role.worker_name, err)
                record = backend.record([], "error", f"{action.op}: {err}") if backend.window else None
                self._discard(backend)
            if record is None:
                continue
            self._late_if_past_deadline(record)
            if backend.writes_own_record:
                records.append(record_dict(record))
                self._write_when_finished(backend, record)
            else:
                records.append({**record_dict(record), UNWRITTEN: True})
        return records

    def _late_if_past_deadline(self, record: WindowRecord) -> None:
        if self.deadline is not None and record.status == "ok" and time.monotonic() > self.deadline:
            record.status = "late"
            late = "this window's stop ended after its worker stopped waiting (NRL_PROFILE_TIMEOUT_S)"
            record.message = f"{late}; {record.message}" if record.message else late

    def _apply_one(self, backend: Backend, action: Action) -> WindowRecord | None:
        backend.late = backend.late or action.late
        if action.op == PREPARE:
            if backend.window is None:
                backend.prepare_window(action.window)
        elif action.op == START:
            if backend.window is not None:
                self._write_when_finished(backend, self._stop(backend))
            began = time.perf_counter()
            backend.start_window(action.window, action.step)
            backend.start_ms = (time.perf_counter() - began) * 1000
            backend.late = action.late
            backend.asked = action.asked
            self.windows.opened(backend.kind, action.step, self if backend.discrete else None)
        elif action.op == STEP and backend.window is not None:
            backend.mark_step(action.step)
            self.windows.step_marked(action.step)
        elif action.op == STOP:
            if backend.window is not None:
                return self._stop(backend)
            backend.discard_prepared()
        return None

    def _stop(self, backend: Backend) -> WindowRecord:
        began = time.perf_counter()
        try:
            record = backend.stop_window()
        finally:
            self.windows.closed(backend.kind)
        record.stop_ms = (time.perf_counter() - began) * 1000
        record.start_ms = backend.start_ms
        return record

    def _write_when_finished(self, backend: Backend, record: WindowRecord) -> None:
        """The record in the manifest, at once, or after the window's files where they are finished beside the step."""
        completion = backend.completion()
        if completion is None:
            self.write_manifest(record)
            return
        final = replace(record, steps=list(record.steps), files=list(record.files))
        self.finisher.run(lambda: self.write_manifest(completion(final)))

    def _discard(self, backend: Backend) -> None:
        if backend.window is not None:
            backend.window = None
            self.windows.closed(backend.kind)
        backend.discard_prepared()

    def close_all(self) -> list[dict]:
        actions = tuple(Action(kind, STOP) for kind, b in self.backends.items() if b.window is not None)
        records = self.apply(actions)
        for backend in self.backends.values():
            self._discard(backend)  # a warm-up still running for a window that will not come
        self.finisher.settle()
        return records

    def write_manifest(self, record: WindowRecord) -> None:
        try:
            append_record(layout.manifest_dir(self.role.session_dir, self.role.plan.torch.directory), record)
        except OSError as err:
            logger.error("could not write the manifest for %s: %s", self.role.worker_name, err)
