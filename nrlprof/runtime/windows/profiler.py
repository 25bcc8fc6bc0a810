"""The backends of one process (a worker or the controller), driven by window actions."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from nrlprof import layout
from nrlprof.backends import backend_class
from nrlprof.backends.base import Backend, ProcessRole
from nrlprof.config.plan import BackendPlan, Target
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import Status, Trigger, WindowRecord, append_record
from nrlprof.process.finishing import FINISHER, Finisher
from nrlprof.process.state import OpenWindows

PREPARE, START, STEP, STOP = "prepare", "start", "step", "stop"
# Wait for the files of the windows stopped so far to be finished (nrlprof.process.finishing); the records of the
# windows the same actions stopped are then answered completed, as the manifest holds them.
SETTLE = "settle"
# Armed for slow steps (nrlprof.config.slow): ARM gets ready for a window that opens with no warm-up (torch's
# once-per-process start-up); KEEP_STEP (`slow:keep`) ends the step's recording (its trace kept where `trigger` says the
# step was slow, else dropped) and begins the next one's (`step`; 0: none).
ARM, KEEP_STEP = "arm", "keep"


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
    # A window opened for a slow step, or (KEEP_STEP) the verdict on the step that ends: why; its records carry it.
    trigger: Trigger | None = None

    @property
    def window(self) -> Window:
        return Window(self.first, self.last)


@dataclass
class Finishing:
    """A window's record once its files are finished beside the next step (None until then)."""

    record: WindowRecord | None = None


@dataclass(frozen=True)
class Applied:
    """What a process's backends give back for a batch of actions: its own records, and those its worker completes
    and writes (nsys in a worker's child: the report is the worker's)."""

    records: list[WindowRecord]
    unwritten: list[WindowRecord]


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

    def apply(self, actions: tuple[Action, ...]) -> Applied:
        """Run the actions meant for this process's backends: the records of windows closed (completed where the
        actions settle them), and those its worker completes and writes (`writes_own_record`)."""
        records: list[WindowRecord] = []
        unwritten: list[WindowRecord] = []
        finishing: list[tuple[int, Finishing]] = []
        for action in actions:
            if action.op == SETTLE:
                self.finisher.settle()
                for index, done in finishing:
                    records[index] = done.record or records[index]
                finishing.clear()
                continue
            backend = self.backends.get(action.kind)
            if backend is None:
                continue
            record = self._applied(backend, action)
            if record is not None:
                record = self._late_if_past_deadline(record)
                if not backend.writes_own_record:
                    unwritten.append(record)
                else:
                    done = self._write_when_finished(backend, record)
                    if done is not None:
                        finishing.append((len(records), done))
                    records.append(record)
            if action.op == KEEP_STEP and action.step:  # after the record above took the ended step's files
                self._begin_kept(backend, action.step)
        return Applied(records, unwritten)

    def _applied(self, backend: Backend, action: Action) -> WindowRecord | None:
        try:
            return self._apply_one(backend, action)
        except Exception as err:  # a profiler failure must never reach the training loop
            logger.error("%s %s for %s failed: %s", action.kind, action.op, self.role.worker_name, err)
            record = backend.record([], Status.ERROR, f"{action.op}: {err}") if backend.window else None
            self._discard(backend)
            return record

    def _begin_kept(self, backend: Backend, step: int) -> None:
        try:
            if backend.begin_kept(step):
                self.windows.opened(backend.kind, step)
        except Exception as err:
            logger.error("%s: recording step %d for slow:keep failed: %s", self.role.worker_name, step, err)
            self._discard(backend)

    def open_kinds(self) -> tuple[str, ...]:
        return tuple(kind for kind, backend in self.backends.items() if backend.window is not None)

    def _late_if_past_deadline(self, record: WindowRecord) -> WindowRecord:
        if self.deadline is None or record.status != Status.OK or time.monotonic() <= self.deadline:
            return record
        late = "this window's stop ended after its worker stopped waiting (NRL_PROFILE_TIMEOUT_S)"
        return record.replaced(status=Status.LATE, message=f"{late}; {record.message}" if record.message else late)

    def _apply_one(self, backend: Backend, action: Action) -> WindowRecord | None:
        backend.late = backend.late or action.late
        if action.op == KEEP_STEP:
            return self._end_kept(backend, action.trigger)
        if action.op == ARM:
            if backend.window is None:
                backend.ready_for_asked()
            return None
        if action.op == PREPARE:
            if backend.window is None:
                backend.prepare_window(action.window)
        elif action.op == START:
            if backend.window is not None:
                self._write_when_finished(backend, self._stop(backend))
            began = time.perf_counter()
            backend.trigger = action.trigger
            backend.start_window(action.window, action.step)
            backend.start_ms = (time.perf_counter() - began) * 1000
            backend.late = action.late
            backend.asked = action.asked
            self.windows.opened(backend.kind, action.step, self if backend.discrete else None)
        elif action.op == STEP and backend.window is not None:
            backend.mark_step(action.step)
            self.windows.step_marked(action.step)
        elif action.op == STOP:
            if backend.keeping:  # a slow:keep recording with no verdict (the job's end): nothing kept
                return self._end_kept(backend, None)
            if backend.window is not None:
                return self._stop(backend)
            backend.discard_prepared()
        return None

    def _end_kept(self, backend: Backend, trigger: Trigger | None) -> WindowRecord | None:
        """slow:keep: the step's recording ends; its record where it was slow (`trigger`), its files kept."""
        if backend.window is None:
            return None
        began = time.perf_counter()
        try:
            record = backend.end_kept(trigger)
        finally:
            self.windows.closed(backend.kind)
        return None if record is None else record.replaced(stop_ms=(time.perf_counter() - began) * 1000)

    def _stop(self, backend: Backend) -> WindowRecord:
        began = time.perf_counter()
        try:
            record = backend.stop_window()
        finally:
            self.windows.closed(backend.kind)
        return record.replaced(stop_ms=(time.perf_counter() - began) * 1000, start_ms=backend.start_ms)

    def _write_when_finished(self, backend: Backend, record: WindowRecord) -> Finishing | None:
        """The record in the manifest, at once, or after the window's files where they are finished beside the step
        (then what holds the completed record once they are)."""
        completion = backend.completion()
        if completion is None:
            self.write_manifest(record)
            return None
        done = Finishing()

        def complete_and_write() -> None:
            done.record = completion(record)
            self.write_manifest(done.record)

        self.finisher.run(complete_and_write)
        return done

    def _discard(self, backend: Backend) -> None:
        if backend.window is not None:
            backend.window = None
            self.windows.closed(backend.kind)
        backend.discard_prepared()

    def close_all(self) -> None:
        self.apply(tuple(Action(kind, STOP) for kind, b in self.backends.items() if b.window is not None))
        for backend in self.backends.values():
            self._discard(backend)  # a warm-up still running for a window that will not come
        self.finisher.settle()

    def write_manifest(self, record: WindowRecord) -> None:
        try:
            append_record(layout.manifest_dir(self.role.session_dir, self.role.plan.torch.directory), record)
        except OSError as err:
            logger.error("could not write the manifest for %s: %s", self.role.worker_name, err)
