"""The step state machine in the driver: opens and closes windows in workers and the controller.

Rules: steps outside every window cost one set lookup.  A step inside a window opens it
(closing any other open window first) or marks the step in the open one.  A step
outside while a window is open closes it.  A repeated step is ignored.  A step that
goes back closes the open window; a window already closed is never opened again, so
a file is never written twice.
"""

from __future__ import annotations

import atexit
import os
import socket
import time
from collections.abc import Callable

from nrlprof.config.plan import BackendPlan, Plan
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.runtime.process import START, STEP, STOP, Action, ProcessProfiler
from nrlprof.workers.tracker import Tracker

Dispatch = Callable[[Tracker, tuple[Action, ...], float], list[dict]]


class Gate:
    def __init__(self, plan: Plan, tracker: Tracker, controller: ProcessProfiler, dispatch: Dispatch) -> None:
        self.plan = plan
        self.tracker = tracker
        self.controller = controller
        self.dispatch = dispatch
        self.gated = tuple(b for b in plan.backends if b.steps is not None)
        self.relevant_steps = frozenset(s for b in self.gated for s in b.steps.steps)
        self.open: dict[str, Window] = {}
        self.done: dict[str, set[Window]] = {b.kind: set() for b in self.gated}
        self.last_step: int | None = None
        self._exit_hook_registered = False

    def step(self, step: int) -> None:
        if step not in self.relevant_steps and not self.open:
            self.last_step = step
            return
        if step == self.last_step:
            return
        going_back = self.last_step is not None and step < self.last_step
        self.last_step = step
        actions: list[Action] = []
        for backend in self.gated:
            actions.extend(self._transitions(backend, step, going_back))
        if actions:
            self._run(tuple(actions), step)

    def _transitions(self, backend: BackendPlan, step: int, going_back: bool) -> list[Action]:
        kind = backend.kind
        current = self.open.get(kind)
        target = backend.steps.window_of(step)
        if target is not None and target in self.done[kind]:
            target = None
        actions = []
        if current is not None and (target != current or going_back):
            actions.append(Action(kind, STOP))
            self.done[kind].add(current)
            del self.open[kind]
            current = None
        if target is None:
            return actions
        if current is None:
            self.open[kind] = target
            actions.append(Action(kind, START, target.first, target.last, step))
        else:
            actions.append(Action(kind, STEP, step=step))
        return actions

    def finish(self) -> None:
        """Close every open window and wait for the files."""
        actions = []
        for kind, window in list(self.open.items()):
            actions.append(Action(kind, STOP))
            self.done[kind].add(window)
        self.open.clear()
        if actions:
            self._run(tuple(actions), None)

    def _run(self, actions: tuple[Action, ...], step: int | None) -> None:
        if not self._exit_hook_registered:
            # Registered now, after ray.init: atexit runs it before Ray's own shutdown hook.
            atexit.register(self.finish)
            self._exit_hook_registered = True
        began = time.perf_counter()
        records = self.controller.apply(actions)
        workers = self.tracker.actors()
        if workers:
            records += self.dispatch(self.tracker, actions, self.plan.timeout_s)
        elapsed_ms = (time.perf_counter() - began) * 1000
        self._log(actions, step, len(workers), records, elapsed_ms)

    def _log(self, actions, step, worker_count: int, records: list[dict], elapsed_ms: float) -> None:
        for action in actions:
            if action.op == START:
                logger.info(
                    "step %d: %s window %s started in %d worker(s) and the controller (%s pid %d) in %.0f ms",
                    step,
                    action.kind,
                    action.window.label,
                    worker_count,
                    socket.gethostname(),
                    os.getpid(),
                    elapsed_ms,
                )
        stopped = [r for r in records if r.get("event") == "window"]
        by_kind: dict[str, list[dict]] = {}
        for record in stopped:
            by_kind.setdefault(record["backend"], []).append(record)
        for kind, kind_records in by_kind.items():
            logger.info(
                "%s window stopped in %d process(es)%s; files on %s",
                kind,
                len(kind_records),
                "" if step is None else f" at step {step}",
                _places(kind_records),
            )


def _places(records: list[dict]) -> str:
    """`host:common directory` of the files each host wrote."""
    directories: dict[str, list[str]] = {}
    for record in records:
        for path in record.get("files") or ():
            directories.setdefault(record["host"], []).append(os.path.dirname(path))
    if not directories:
        return "no file (see the manifest)"
    return "; ".join(f"{host}:{os.path.commonpath(dirs)}" for host, dirs in sorted(directories.items()))
