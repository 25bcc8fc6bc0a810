"""The backends of one process (a worker or the controller), driven by window actions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from nrlprof.backends import backend_class
from nrlprof.backends.base import Backend, ProcessRole
from nrlprof.config.plan import Target
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import MANIFEST_DIR_NAME, WindowRecord, append_record
from nrlprof.runtime import window_state

START, STEP, STOP = "start", "step", "stop"


@dataclass(frozen=True)
class Action:
    """One thing to do for one backend: start a window at a step, mark a step, or stop."""

    kind: str
    op: str
    first: int = 0
    last: int = 0
    step: int = 0

    @property
    def window(self) -> Window:
        return Window(self.first, self.last)


def manifest_directory(role: ProcessRole) -> Path:
    if role.session_dir:
        return Path(role.session_dir) / "logs" / MANIFEST_DIR_NAME
    return Path(role.plan.torch.directory) / f".{MANIFEST_DIR_NAME}"


class ProcessProfiler:
    def __init__(self, role: ProcessRole, targets: Mapping[str, Target | None]) -> None:
        self.role = role
        self.backends: dict[str, Backend] = {}
        for kind, target in targets.items():
            backend_plan = role.plan.backend(kind)
            if backend_plan is not None:
                self.backends[kind] = backend_class(kind)(backend_plan, role, target)
        self.call_depth = 0

    def begin_call(self, label: str, method: str | None) -> list[Backend] | None:
        """A discrete capture around one annotated call or listed method; calls inside it stay in it (None)."""
        if self.call_depth:
            self.call_depth += 1
            return None
        started = []
        for backend in self.backends.values():
            if backend.window is not None and backend.wants_call(method):
                try:
                    backend.begin_call(label)
                    started.append(backend)
                except Exception as err:
                    logger.error("discrete %s capture of %s failed to start: %s", backend.kind, label, err)
        self.call_depth = 1 if started else 0
        return started

    def end_call(self, started: list[Backend] | None) -> None:
        if started is None:
            self.call_depth -= 1
            return
        if started:
            self.call_depth = 0
        for backend in started:
            try:
                backend.end_call()
            except Exception as err:
                logger.error("discrete %s capture failed to stop: %s", backend.kind, err)

    @property
    def window_open(self) -> bool:
        return any(b.window is not None for b in self.backends.values())

    def apply(self, actions: tuple[Action, ...]) -> list[dict]:
        """Run the actions meant for this process's backends; the records of windows closed."""
        records = []
        for action in actions:
            backend = self.backends.get(action.kind)
            if backend is None:
                continue
            try:
                record = self._apply_one(backend, action)
            except Exception as err:  # a profiler failure must never reach the training loop
                logger.error("%s %s for %s failed: %s", action.kind, action.op, self.role.worker_name, err)
                record = backend.record([], "error", f"{action.op}: {err}")
                backend.window = None
            if record is not None:
                self._write_manifest(record)
                records.append(asdict(record))
        return records

    def _apply_one(self, backend: Backend, action: Action) -> WindowRecord | None:
        if action.op == START:
            if backend.window is not None:
                self._write_manifest(self._stop(backend))
            backend.start_window(action.window, action.step)
            window_state.window_opened(backend.kind, action.step, self if backend.discrete else None)
        elif action.op == STEP and backend.window is not None:
            backend.mark_step(action.step)
            window_state.step_marked(action.step)
        elif action.op == STOP and backend.window is not None:
            return self._stop(backend)
        return None

    @staticmethod
    def _stop(backend: Backend) -> WindowRecord:
        try:
            return backend.stop_window()
        finally:
            window_state.window_closed(backend.kind)

    def close_all(self) -> list[dict]:
        actions = tuple(Action(kind, STOP) for kind, b in self.backends.items() if b.window is not None)
        return self.apply(actions)

    def _write_manifest(self, record: WindowRecord) -> None:
        try:
            append_record(manifest_directory(self.role), record)
        except OSError as err:
            logger.error("could not write the manifest for %s: %s", self.role.worker_name, err)
