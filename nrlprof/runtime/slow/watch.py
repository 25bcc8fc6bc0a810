"""A job armed for slow steps, at each step boundary in its controller's gate: the step that ended judged (its wall
time against the median, its ranks' calls against their peers'), and what a slow one triggers: a window from this
step on in every matched worker and the controller (`slow`), or the ended step's traces kept (`slow:keep`, whose
workers record every step). One log line per trigger; at most NRL_PROFILE_SLOW_MAX a run. docs/design.md, "Windows
that open themselves"."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from nrlprof.config.plan import TORCH, BackendPlan, Plan
from nrlprof.config.slow import KEEP, WINDOW, SlowSettings
from nrlprof.config.steps import Window
from nrlprof.config.variables import SLOW_FACTOR_VARIABLE, SLOW_MAX_VARIABLE
from nrlprof.log import logger
from nrlprof.manifest import SLOW_STEP, STRAGGLER, Slowest, Trigger
from nrlprof.runtime.slow.calls import WAIT_S, CallClock
from nrlprof.runtime.slow.verdict import StepHistory, peers_medians, slowest, spans, stragglers
from nrlprof.runtime.windows.asked import asked_conflict
from nrlprof.runtime.windows.profiler import ARM, KEEP_STEP, Action
from nrlprof.workers.tracker import Tracker


class Gate(Protocol):
    """What the watch reads of the gate (nrlprof.runtime.windows.gate), and the one thing it asks of it."""

    plan: Plan
    tracker: Tracker
    gated: tuple[BackendPlan, ...]
    open: dict[str, Window]

    def open_triggered(self, kind: str, window: Window, trigger: Trigger) -> None: ...


class SlowWatch:
    def __init__(self, settings: SlowSettings, backends: tuple[BackendPlan, ...], clock: CallClock | None) -> None:
        self.settings = settings
        self.history = StepHistory(settings.factor)
        self.window_kinds = tuple(b.kind for b in backends if b.slow == WINDOW)
        self.keep_kinds = tuple(b.kind for b in backends if b.slow == KEEP)
        self.clock = clock
        self.used = 0
        self.triggers: list[Trigger] = []
        self.spent_said = False
        # The step running and when it began (perf_counter s).
        self.last: tuple[int, float] | None = None
        # The step running had a window in it, or window actions at its boundary: it gets no verdict, nor a place in
        # the median (the gate says so).
        self.unclean = False
        self.straggling: set[tuple[str, int, str]] = set()
        self.recording = bool(self.keep_kinds)
        self.armed_for = -1
        # Seconds, monotonic: a step's wall time is the time between its boundary and the next.
        self.seconds: Callable[[], float] = time.perf_counter

    @property
    def left(self) -> int:
        return self.settings.max_triggers - self.used

    def boundary(self, gate: Gate, step: int) -> list[Action]:
        """At the top of `step`: the verdict on the step that ended, what it opens, and slow:keep's actions."""
        now = self.seconds()
        previous, self.last = self.last, (step, now)
        unclean, self.unclean = self.unclean, False
        calls = self.clock.take_step() if self.clock is not None else []
        trigger = None
        if previous is not None and step == previous[0] + 1 and not unclean:
            trigger = self._judge(previous[0], (now - previous[1]) * 1000, calls)
        actions = self._arm(gate)
        if trigger is not None:
            self._say(trigger, self._open_windows(gate, trigger, step) + self._kept(gate, trigger))
        if self.recording:
            if trigger is not None and not self.left:
                self.recording = False
                logger.info("slow:keep: the run's %d kept step(s) (%s) are spent: the workers record no more steps",
                            self.settings.max_triggers, SLOW_MAX_VARIABLE)  # fmt: skip
            actions += [Action(kind, KEEP_STEP, step=step if self.recording else 0, trigger=trigger)
                        for kind in self.keep_kinds]  # fmt: skip
        return actions

    def ending(self, gate: Gate) -> list[Action]:
        """The job ends: the verdict on its last step (slow:keep keeps it if slow), and no more recording."""
        if not self.recording or self.last is None:
            return []
        step, began = self.last
        trigger = None
        if not self.unclean:
            calls = self.clock.take_step() if self.clock is not None else []
            trigger = self._judge(step, (self.seconds() - began) * 1000, calls)
        if trigger is not None:
            self._say(trigger, self._kept(gate, trigger))
        self.recording = False
        return [Action(kind, KEEP_STEP, step=0, trigger=trigger) for kind in self.keep_kinds]

    def _judge(self, step: int, wall_ms: float, calls: list[list]) -> Trigger | None:
        """The step's verdict: a Trigger where it was slow, or a rank began to straggle, and the run has one left."""
        judging, median = self.history.judging, self.history.median()
        factor = self.history.slow_factor(wall_ms)
        call_spans = spans(calls)
        medians = peers_medians(call_spans)
        now_straggling = stragglers(call_spans, medians, self.settings.factor, WAIT_S * 1000)
        began = [s for s in now_straggling if (s.worker, s.rank, s.method) not in self.straggling]
        self.straggling = {(s.worker, s.rank, s.method) for s in now_straggling}
        self.history.add(wall_ms)
        if not judging or median is None:
            return None
        if factor is not None:
            trigger = Trigger(step, round(wall_ms, 1), round(median, 1), round(factor, 2),
                              slowest(call_spans, medians), SLOW_STEP)  # fmt: skip
        elif began:
            late = began[0]
            trigger = Trigger(step, round(wall_ms, 1), round(median, 1), round(late.ms / late.peers_ms, 2), late,
                              STRAGGLER)  # fmt: skip
        else:
            return None
        if not self.left:
            if not self.spent_said:
                self.spent_said = True
                logger.info("%s: nothing opens, the run's %d (%s) are spent; no more windows or kept steps for slow "
                            "steps", _what(trigger), self.settings.max_triggers, SLOW_MAX_VARIABLE)  # fmt: skip
            return None
        self.used += 1
        self.history.triggered()
        self.triggers.append(trigger)
        return trigger

    def _arm(self, gate: Gate) -> list[Action]:
        """torch's once-per-process start-up, paid in every matched worker (and those found since) before any window
        needs it, at a step boundary and off the windows' steps."""
        kinds = [kind for kind in (*self.window_kinds, *self.keep_kinds) if kind == TORCH]
        if not kinds or self.armed_for == len(gate.tracker):
            return []
        self.armed_for = len(gate.tracker)
        return [Action(kind, ARM) for kind in kinds]

    def _open_windows(self, gate: Gate, trigger: Trigger, step: int) -> list[str]:
        said = []
        window = Window(step, step + self.settings.steps - 1)
        for kind in self.window_kinds:
            conflict = asked_conflict(gate.gated, gate.open, kind, window)
            if conflict is not None:
                said.append(f"no {kind} window opens ({conflict})")
                continue
            gate.open_triggered(kind, window, trigger)
            said.append(f"{kind} window {window.label} opens in {_processes(gate, kind)}")
        return said

    def _kept(self, gate: Gate, trigger: Trigger) -> list[str]:
        if not self.recording:
            return []
        return [f"{kind} trace of step {trigger.step} kept in {_processes(gate, kind)}" for kind in self.keep_kinds]

    def _say(self, trigger: Trigger, done: list[str]) -> None:
        logger.info("%s; %s (%d of %d for this run)", _what(trigger, with_slowest=True),
                    "; ".join(done) or "nothing opens", self.used, self.settings.max_triggers)  # fmt: skip


def _what(trigger: Trigger, with_slowest: bool = False) -> str:
    """`slow step 23: 512 ms, 5.1x the median of 100 ms (NRL_PROFILE_SLOW_FACTOR)`; a straggler's call."""
    if trigger.cause == STRAGGLER and trigger.slowest is not None:
        late = trigger.slowest
        return (f"straggler at step {trigger.step}: {_call(late)}, {trigger.factor:.1f}x its peers' "
                f"({SLOW_FACTOR_VARIABLE}); the step took {trigger.wall_ms:.0f} ms, the median "
                f"{trigger.median_ms:.0f} ms")  # fmt: skip
    text = (f"slow step {trigger.step}: {trigger.wall_ms:.0f} ms, {trigger.factor:.1f}x the median of "
            f"{trigger.median_ms:.0f} ms ({SLOW_FACTOR_VARIABLE})")  # fmt: skip
    if with_slowest:
        text += f"; slowest: {_call(trigger.slowest)}" if trigger.slowest is not None else "; no worker call timed"
    return text


def _call(call: Slowest) -> str:
    """`dtensor_policy_worker rank 1's train 712 ms against 101 ms`."""
    peers = f" against {call.peers_ms:.0f} ms" if call.peers_ms is not None else ""
    return f"{call.worker} rank {call.rank}'s {call.method} {call.ms:.0f} ms{peers}"


def _processes(gate: Gate, kind: str) -> str:
    workers = sum(1 for actor in gate.tracker.actors() if kind in actor.kinds)
    backend = gate.plan.backend(kind)
    controller = " and the controller" if backend is not None and backend.controller else ""
    return f"{workers} worker(s){controller}"


def watch_for(plan: Any, identify: Any) -> tuple[SlowWatch, CallClock | None]:
    """The watch of a controller armed for slow steps, and the clock its call hook times calls with."""
    try:
        clock = CallClock(identify)
    except ImportError:  # no Ray: steps only
        clock = None
    return SlowWatch(plan.slow, plan.backends, clock), clock
