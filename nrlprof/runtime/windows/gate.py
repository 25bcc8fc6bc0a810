"""The step state machine in the driver: opens and closes windows in workers and the controller.

Rules: a step outside every window costs one bisect.  A step inside a window opens it (closing any
other open window first) or marks the step in the open one.  A step outside while a window is open
closes it.  A repeated step is ignored.  A step that goes back closes the open window; a window
already closed is never opened again, so a file is never written twice.  The step before a window
of a backend that warms up (the torch profiler) prepares it, so its start-up cost lands outside
the window. A backend whose files are finished beside the next step (nrlprof.process.finishing) is settled
wherever the job needs them: its end, a worker it ends, a window asked for that closes.
"""

from __future__ import annotations

import bisect
import os
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from nrlprof import rayapi
from nrlprof.backends import backend_class
from nrlprof.config.plan import NSYS, BackendPlan, Plan
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import STRAGGLER, Status, Trigger, WindowRecord
from nrlprof.runtime.windows.asked import AskedWindow, asked_conflict, with_asked_window
from nrlprof.runtime.windows.fanout import Fanout
from nrlprof.runtime.windows.profiler import ARM, KEEP_STEP, PREPARE, SETTLE, START, STEP, STOP, Action, ProcessProfiler
from nrlprof.workers.tracker import TrackedActor, Tracker

if TYPE_CHECKING:
    from nrlprof.runtime.slow.watch import SlowWatch

# Actions no answer is waited for: they go out in order with the workers' next calls (slow:keep's every step).
UNWAITED = (ARM, KEEP_STEP)


class Gate:
    def __init__(
        self,
        plan: Plan,
        tracker: Tracker,
        controller: ProcessProfiler,
        channel: Fanout,
        before_actions: Callable[[], None] | None = None,
    ) -> None:
        self.plan = plan
        self.tracker = tracker
        # Called before window actions go out: workers found since the last ones join (adoption).
        self.before_actions = before_actions
        self.controller = controller
        self.channel = channel
        self.gated = tuple(b for b in plan.backends if b.steps is not None)
        self.warms_up = {b.kind for b in self.gated if backend_class(b.kind).warms_up}
        # Backends stopped since their files were last settled (those finished beside the next step).
        self.unsettled: set[str] = set()
        self._starts, self._ends = _relevant_intervals(self.gated, self.warms_up)
        self.open: dict[str, Window] = {}
        self.prepared: dict[str, Window] = {}
        self.done: dict[str, set[Window]] = {b.kind: set() for b in self.gated}
        self.last_step: int | None = None
        self._checked_unmatched: set[str] = set()
        # False in a controller that steps only the workers it created for another (slime's RolloutManager and its
        # engines): the job's controller tells which patterns select no worker, once.
        self.tells_unmatched = True
        self.ray_gone_said = False
        # The step anatomy's list when it records, else None: (step, wall-clock ns) at each step, and
        # (step, start ns, end ns, what) for the time the gate spent on window actions.
        self.marks: list[tuple] | None = None
        # Windows asked for while the job runs: appended by the listener's thread, taken at the next step.
        self.asked_waiting: list[AskedWindow] = []
        self.asked: dict[tuple[str, Window], AskedWindow] = {}
        self._closing: list[AskedWindow] = []
        # Tracked actors as they were before a window asked for joined them (None: not tracked before).
        self._before_asked: dict[int, tuple[TrackedActor, TrackedActor | None]] = {}
        # A job armed for slow steps (nrlprof.runtime.slow.watch), and the windows its slow steps opened.
        self.slow: SlowWatch | None = None
        self.triggered: dict[tuple[str, Window], Trigger] = {}

    def _relevant(self, step: int) -> bool:
        index = bisect.bisect_right(self._starts, step) - 1
        return index >= 0 and step <= self._ends[index]

    def watch(self, slow: SlowWatch) -> None:
        """Arm for slow steps: each step boundary asks `slow` first (`step` stays as it is in a job not armed)."""
        self.slow = slow
        self.step = self._judged_step

    def step(self, step: int) -> None:
        if step == self.last_step:
            return
        if self.marks is not None:
            self.marks.append((step, time.time_ns()))
        if not self.open and not self.prepared and not self.asked_waiting and not self._relevant(step):
            self.last_step = step
            return
        self._boundary(step, ())

    def _judged_step(self, step: int) -> None:
        if step == self.last_step:
            return
        if self.marks is not None:
            self.marks.append((step, time.time_ns()))
        slow = self.slow.boundary(self, step)
        if not slow and not self.open and not self.prepared and not self.asked_waiting and not self._relevant(step):
            self.last_step = step
            return
        self._boundary(step, slow)

    def _boundary(self, step: int, slow: list[Action] | tuple[()]) -> None:
        if self.asked_waiting:
            self._take_asked(step)
        going_back = self.last_step is not None and step < self.last_step
        self.last_step = step
        actions: list[Action] = list(slow)
        for backend in self.gated:
            actions.extend(self._transitions(backend, step, going_back))
        if actions:
            self._run(tuple(actions), step)
        if self.slow is not None and (self.open or self.prepared or any(a.op not in UNWAITED for a in actions)):
            self.slow.unclean = True  # a profiled step, or one that holds window actions: no verdict, not in the median

    def _transitions(self, backend: BackendPlan, step: int, going_back: bool) -> list[Action]:
        kind = backend.kind
        current = self.open.get(kind)
        target = backend.steps.window_of(step)
        if target is not None and target in self.done[kind]:
            target = None
        actions = []
        if current is not None and (target != current or going_back):
            actions.append(Action(kind, STOP))
            self._stopped(kind)
            if (kind, current) in self.asked:  # what `nrlprof capture --wait` waits for is the files
                self._closing.append(self.asked.pop((kind, current)))
                actions.append(Action(kind, SETTLE))
            self.done[kind].add(current)
            del self.open[kind]
            current = None
            if target in self.done[kind]:  # a step back into the window just closed: it stays closed
                target = None
        if target is None:
            return actions + self._prepare_next(backend, step)
        if current is None:
            self.open[kind] = target
            self.prepared.pop(kind, None)
            asked = self.asked.get((kind, target))
            trigger = self.triggered.get((kind, target))
            actions.append(
                Action(
                    kind,
                    START,
                    target.first,
                    target.last,
                    step,
                    asked=asked.request.id if asked else "",
                    trigger=trigger,
                )
            )
        else:
            actions.append(Action(kind, STEP, step=step))
        return actions

    def _stopped(self, kind: str) -> None:
        if backend_class(kind).finishes_beside:
            self.unsettled.add(kind)

    def _prepare_next(self, backend: BackendPlan, step: int) -> list[Action]:
        """The step before a window of a backend that warms up: start that warm-up now."""
        kind = backend.kind
        if kind not in self.warms_up:
            return []
        upcoming = backend.steps.window_of(step + 1)
        if upcoming is None or upcoming in self.done[kind] or self.prepared.get(kind) == upcoming:
            return []
        self.prepared[kind] = upcoming
        return [Action(kind, PREPARE, upcoming.first, upcoming.last, step)]

    def open_triggered(self, kind: str, window: Window, trigger: Trigger) -> None:
        """A window a slow step opened (nrlprof.runtime.slow.watch): it starts at this step, as planned ones do."""
        backend = self.plan.backend(kind)
        if backend is None:
            return
        self.gated = with_asked_window(self.gated, backend, window)
        self._starts, self._ends = _relevant_intervals(self.gated, self.warms_up)
        self.done.setdefault(kind, set())
        self.triggered[(kind, window)] = trigger

    def finish(self) -> None:
        """Close every open window and wait for the files, also those of workers that fell behind."""
        actions = self.slow.ending(self) if self.slow is not None else []
        for asked in self.asked_waiting:
            asked.refuse("the job ended before its next step")
        self.asked_waiting.clear()
        for kind, window in list(self.open.items()):
            actions.append(Action(kind, STOP))
            self._stopped(kind)
            self.done[kind].add(window)
            if (kind, window) in self.asked:
                self._closing.append(self.asked.pop((kind, window)))
        actions += [Action(kind, STOP) for kind in self.prepared if kind not in self.open]
        actions += [Action(kind, SETTLE) for kind in sorted(self.unsettled)]
        self.unsettled.clear()
        self.open.clear()
        self.prepared.clear()
        if actions:
            self._run(tuple(actions), None)
        records = self.channel.drain()
        if records:
            self._log_stopped(records, None)

    def _run(self, actions: tuple[Action, ...], step: int | None) -> None:
        began, began_ns = time.perf_counter(), time.time_ns()
        if self.before_actions is not None:
            self.before_actions()
        # The workers' actions go out first: their stops (profiler stop, export) run beside the controller's own,
        # whose export waits for their answers.
        waits = any(a.op not in UNWAITED for a in actions)
        with self.controller.finisher.holding():
            posted = self.channel.post(actions) if len(self.tracker) and rayapi.connected() else None
            if len(self.tracker) and posted is None:
                self._say_ray_is_gone(actions)
            records = list(self.controller.apply(actions).records)
            if posted is not None:  # unwaited: their answers are taken in with the next actions'
                records += self.channel.collect(posted) if waits else posted.records
        answered = self.channel.answered if posted is not None else 0
        elapsed_ms = (time.perf_counter() - began) * 1000
        if self.marks is not None:
            self.marks.append((step, began_ns, time.time_ns(), action_text(actions)))
        self._log_started(actions, step, answered, elapsed_ms)
        self._log_stopped(records, step)
        self._tell_unmatched(actions)
        self._tell_asked(actions, step, answered, records)

    def _take_asked(self, step: int) -> None:
        """The windows asked for since the last step open now, unless one of the same backend overlaps them."""
        while self.asked_waiting:
            asked = self.asked_waiting.pop(0)
            kind = asked.kind
            window = Window(step, step + asked.request.steps - 1)
            conflict = asked_conflict(self.gated, self.open, kind, window)
            if conflict is not None:
                asked.refuse(conflict)
                logger.info("request %s refused at step %d: %s", asked.request.id, step, conflict)
                continue
            self.gated = with_asked_window(self.gated, asked.backend_plan, window)
            self._starts, self._ends = _relevant_intervals(self.gated, self.warms_up)
            self.done.setdefault(kind, set())
            self._checked_unmatched.add(kind)
            if kind != NSYS:  # the controller is captured by nsys only when launched under it (planned windows)
                self.controller.add_backend(kind, asked.backend_plan)
            for actor in asked.actors:
                self._join_asked(actor, kind)
            asked.window = window
            self.asked[(kind, window)] = asked

    def _join_asked(self, actor: TrackedActor, kind: str) -> None:
        """A worker joins a window asked for: tracked for it (or for it too) until it closes."""
        tracked = self.tracker.find(actor.handle)
        if tracked is not None and kind in tracked.kinds:
            return
        joined = TrackedActor(actor.handle, tracked.identity if tracked else actor.identity,
                              (*(tracked.kinds if tracked else ()), kind))  # fmt: skip
        if tracked is not None:
            self.tracker.remove(tracked)
        self.tracker.add(joined)
        self._before_asked[id(joined)] = (joined, tracked)

    def _leave_asked(self, asked: AskedWindow) -> None:
        for key, (joined, before) in list(self._before_asked.items()):
            if asked.kind not in joined.kinds or joined.kinds[-1] != asked.kind:
                continue
            del self._before_asked[key]
            if joined in self.tracker.actors():  # not found dead in the window
                self.tracker.remove(joined)
                if before is not None:
                    self.tracker.add(before)

    def _tell_asked(
        self, actions: tuple[Action, ...], step: int | None, answered: int, records: list[WindowRecord]
    ) -> None:
        """Windows asked for that opened or closed now: what their command waits for."""
        for action in actions:
            if action.op == START and (asked := self.asked.get((action.kind, action.window))) is not None:
                asked.opened(answered)
        for (kind, window), asked in self.asked.items():  # a worker found dead at a step of the window, say
            asked.records_before_close += _records_of(records, kind, window.label)
        closing, self._closing = self._closing, []
        for asked in closing:
            label = asked.window.label if asked.window else ""
            asked.closed(asked.records_before_close + _records_of(records, asked.kind, label))
            self._leave_asked(asked)

    def _tell_unmatched(self, actions: tuple[Action, ...]) -> None:
        """Once per backend, at its first window: each of its patterns that selects no worker of the job."""
        if not self.tells_unmatched:
            return
        for action in actions:
            if action.op != START or action.kind in self._checked_unmatched:
                continue
            self._checked_unmatched.add(action.kind)
            backend = self.plan.backend(action.kind)
            if backend is not None:
                from nrlprof.runtime.windows.unmatched import tell_unmatched_patterns

                tracked = (actor.identity for actor in self.tracker.actors() if action.kind in actor.kinds)
                tell_unmatched_patterns(backend, tracked)

    def release(self, handle: object) -> None:
        """The job is about to end this tracked actor (`ray.kill`): its open windows close first."""
        actor = self.tracker.find(handle)
        if actor is None:
            return
        kinds = [kind for kind in (*self.open, *self.prepared) if kind in actor.kinds]
        stops = [Action(kind, STOP) for kind in dict.fromkeys(kinds)]
        settles = [Action(kind, SETTLE) for kind in sorted({*self.unsettled, *self.open}) if kind in actor.kinds]
        released = self.channel.release(self.channel.transport.peer_of(actor), (*stops, *settles))
        records = released.records if released is not None else []
        if records:
            logger.info(
                "worker '%s' rank %s: its window closed before the job ended it (ray.kill); files on %s",
                actor.identity.name,
                actor.identity.rank,
                _places(records),
            )

    def _say_ray_is_gone(self, actions: tuple[Action, ...]) -> None:
        if self.ray_gone_said or not any(a.op == STOP for a in actions):
            return
        self.ray_gone_said = True
        logger.warning(
            "Ray was shut down before nrlprof could close the window in %d worker(s): their files of the window are "
            "lost (call ray.shutdown through the `ray` module, which nrlprof's hook sees, or nrlprof.finish() first)",
            len(self.tracker),
        )

    def _log_started(self, actions: tuple[Action, ...], step: int | None, answered: int, elapsed_ms: float) -> None:
        for action in actions:
            if action.op == START:
                asked = self.asked.get((action.kind, action.window))
                # The controller takes no part in an nsys window asked for (it was not launched under nsys for it), nor
                # in a backend that leaves it out (SkyRL's torch profiler profiles its policy workers only).
                backend = next((b for b in self.gated if b.kind == action.kind), None)
                in_controller = (asked is None or action.kind != NSYS) and (backend is None or backend.controller)
                controller = f" and the controller ({socket.gethostname()} pid {os.getpid()})" if in_controller else ""
                why = "" if asked is None else f" (asked for: request {asked.request.id})"
                if action.trigger is not None:
                    why = f" (slow step {action.trigger.step}: {action.trigger.factor:.1f}x)"
                logger.info(
                    "step %d: %s window %s%s started in %d worker(s)%s in %.0f ms",
                    step,
                    action.kind,
                    action.window.label,
                    why,
                    answered,
                    controller,
                    elapsed_ms,
                )

    def _log_stopped(self, records: list[WindowRecord], step: int | None) -> None:
        by_kind: dict[str, list[WindowRecord]] = {}
        for record in records:
            kept = record.trigger is not None and record.window == str(record.trigger.step)  # said at its verdict
            if record.event == "window" and not kept:
                by_kind.setdefault(record.backend, []).append(record)
        for kind, kind_records in by_kind.items():
            not_ok = Counter(r.status.value for r in kind_records if r.status != Status.OK)
            logger.info(
                "%s window stopped in %d process(es)%s%s; files on %s",
                kind,
                len(kind_records),
                f" ({', '.join(f'{n} {status}' for status, n in sorted(not_ok.items()))})" if not_ok else "",
                "" if step is None else f" at step {step}",
                _places(kind_records),
            )


def action_text(actions: tuple[Action, ...]) -> str:
    """`stop nsys, prepare torch 3-4, start memory 5-6 (asked for: request <id>)`: what the gate did, for the step
    anatomy (its text, JSON and timeline track show it as it is)."""
    return ", ".join(_action_words(a) for a in actions)


def _action_words(action: Action) -> str:
    trigger = action.trigger
    why = ""
    if trigger is not None:  # the step anatomy marks the slow step by these words (tools.figures.anatomy)
        cause = "straggler at step" if trigger.cause == STRAGGLER else "slow step"
        why = f" ({cause} {trigger.step}: {trigger.factor:.1f}x{': kept' if action.op == KEEP_STEP else ''})"
    if action.op not in (PREPARE, START):
        return f"{action.op} {action.kind}{why}"
    asked = f" (asked for: request {action.asked})" if action.asked else ""
    return f"{action.op} {action.kind} {action.window.label}{asked}{why}"


def _records_of(records: list[WindowRecord], kind: str, label: str) -> list[WindowRecord]:
    return [r for r in records if r.backend == kind and r.window == label]


def _relevant_intervals(gated: tuple[BackendPlan, ...], warms_up: set[str]) -> tuple[list[int], list[int]]:
    """Merged [first, last] step intervals in which the gate has something to do (warm-ups included)."""
    intervals = sorted(
        (w.first - 1 if b.kind in warms_up and w.first > 1 else w.first, w.last) for b in gated for w in b.steps.windows
    )
    starts: list[int] = []
    ends: list[int] = []
    for first, last in intervals:
        if ends and first <= ends[-1] + 1:
            ends[-1] = max(ends[-1], last)
        else:
            starts.append(first)
            ends.append(last)
    return starts, ends


def _places(records: list[WindowRecord]) -> str:
    """`host:common directory` of the files each host wrote."""
    directories: dict[str, list[str]] = {}
    for record in records:
        for path in record.files:
            directories.setdefault(record.host, []).append(os.path.dirname(path))
    if not directories:
        return "no file (see the manifest)"
    return "; ".join(f"{host}:{os.path.commonpath(dirs)}" for host, dirs in sorted(directories.items()))
