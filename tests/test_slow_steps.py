"""Windows that open themselves when a step is slow (NRL_*_STEP_RANGE=slow, slow:keep), with no Ray: the settings and
their refusals, the verdict on a step and its spacing (nrlprof.runtime.slow.verdict), and the gate of an armed job
driven with step times given (the actions it sends the controller, its log lines, the budget). On real Ray jobs:
test_slow_steps_jobs.py."""

from __future__ import annotations

import math

import pytest
from helpers.gates import ActionLog, per_step

from nrlprof.config.env import plan_from_env
from nrlprof.config.slow import HISTORY, MIN_HISTORY, QUIET_STEPS
from nrlprof.errors import ConfigError
from nrlprof.manifest import STRAGGLER, Slowest, Trigger, WindowRecord
from nrlprof.runtime.slow import verdict
from nrlprof.runtime.slow.verdict import StepHistory
from nrlprof.runtime.slow.watch import SlowWatch
from nrlprof.runtime.windows.dispatch import actor_fanout
from nrlprof.runtime.windows.gate import Gate
from nrlprof.workers.tracker import Tracker

TORCH = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*"}
MEMORY = {"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*"}
NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*"}


def torch_slow(mode: str = "slow", **more: str) -> dict[str, str]:
    return {**TORCH, "NRL_TORCH_PROFILE_STEP_RANGE": mode, **more}


# --- settings -----------------------------------------------------------------------------------------------------


def test_slow_arms_torch_memory_and_nsys_with_no_window_planned():
    plan = plan_from_env({**torch_slow(), **MEMORY, "NRL_MEMORY_PROFILE_STEP_RANGE": "slow:keep", **NSYS,
                          "NRL_NSYS_PROFILE_STEP_RANGE": "SLOW", "NRL_PROFILE_SLOW_STEPS": "2",
                          "NRL_PROFILE_SLOW_FACTOR": "2.5", "NRL_PROFILE_SLOW_MAX": "4"})  # fmt: skip
    modes = {b.kind: b.slow for b in plan.backends}
    assert modes == {"torch": "window", "memory": "keep", "nsys": "window"}
    assert all(b.steps is not None and b.steps.windows == () for b in plan.backends)
    assert (plan.slow.factor, plan.slow.steps, plan.slow.max_triggers) == (2.5, 2, 4)
    nsys = plan.backend("nsys")
    assert dict(nsys.options)["session-new"] and not nsys.controller, "launched in a session of its own, as on-demand"
    assert plan.armed and plan.on_demand is None
    assert type(plan).from_json(plan.to_json()) == plan, "the plan reaches the workers as it is"


def test_the_defaults_are_one_step_a_factor_of_one_and_a_half_and_three_a_run():
    settings = plan_from_env(torch_slow()).slow
    assert (settings.factor, settings.steps, settings.max_triggers) == (1.5, 1, 3)
    assert plan_from_env({**TORCH, "NRL_TORCH_PROFILE_STEP_RANGE": "3:5"}).slow is None


@pytest.mark.parametrize(
    ("variables", "named", "said"),
    [
        (torch_slow(NRL_PROFILE_SLOW_FACTOR="1"), "NRL_PROFILE_SLOW_FACTOR='1'", "1 or less"),
        (torch_slow(NRL_PROFILE_SLOW_FACTOR="0.5"), "NRL_PROFILE_SLOW_FACTOR='0.5'", "a number > 1"),
        (torch_slow(NRL_PROFILE_SLOW_FACTOR="fast"), "NRL_PROFILE_SLOW_FACTOR='fast'", "not a number"),
        (torch_slow(NRL_PROFILE_SLOW_FACTOR="nan"), "NRL_PROFILE_SLOW_FACTOR='nan'", "a number > 1"),
        (torch_slow(NRL_PROFILE_SLOW_MAX="0"), "NRL_PROFILE_SLOW_MAX='0'", "below 1"),
        (torch_slow(NRL_PROFILE_SLOW_MAX="-2"), "NRL_PROFILE_SLOW_MAX='-2'", "below 1"),
        (torch_slow(NRL_PROFILE_SLOW_STEPS="two"), "NRL_PROFILE_SLOW_STEPS='two'", "a whole number of steps"),
        ({**NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": "slow:keep"}, "NRL_NSYS_PROFILE_STEP_RANGE='slow:keep'", "torch and"),
        (
            {"NRL_ROCPROF_WORKER_PATTERNS": "*", "NRL_ROCPROF_PROFILE_STEP_RANGE": "slow:keep"},
            "NRL_ROCPROF_PROFILE_STEP_RANGE='slow:keep'",
            "whole lifetime",
        ),
        (
            {"NRL_ROCPROF_WORKER_PATTERNS": "*", "NRL_ROCPROF_PROFILE_STEP_RANGE": "slow"},
            "NRL_ROCPROF_PROFILE_STEP_RANGE='slow'",
            "whole lifetime",
        ),
        (
            {**TORCH, "NRL_TORCH_PROFILE_STEP_RANGE": "3:5", "NRL_PROFILE_SLOW_FACTOR": "2"},
            "NRL_PROFILE_SLOW_FACTOR='2'",
            "armed for slow steps",
        ),
        (
            torch_slow("slow:keep", NRL_TORCH_PROFILE_DISCRETE="1"),
            "NRL_TORCH_PROFILE_STEP_RANGE='slow:keep'",
            "records whole steps",
        ),
        ({"NRL_TORCH_PROFILE_STEP_RANGE": "slow"}, "NRL_TORCH_PROFILE_WORKER_PATTERNS=''", "patterns"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable_and_the_form(variables, named, said):
    with pytest.raises(ConfigError) as raised:
        plan_from_env(variables)
    assert named in str(raised.value) and said in str(raised.value), str(raised.value)


# --- the verdict ----------------------------------------------------------------------------------------------------


def test_no_verdict_before_five_steps_then_a_step_of_the_factor_is_slow():
    history = StepHistory(1.5)
    for _ in range(MIN_HISTORY - 1):
        assert history.slow_factor(1000.0) is None
        history.add(100.0)
    assert history.slow_factor(1000.0) is None, "four steps: no verdict"
    history.add(100.0)
    assert history.slow_factor(149.0) is None
    assert history.slow_factor(150.0) == pytest.approx(1.5)


def test_the_median_is_of_the_last_twenty_steps():
    history = StepHistory(1.5)
    for wall in [1000.0] * 5 + [100.0] * HISTORY:
        history.add(wall)
    assert history.median() == 100.0


def verdicts(walls: list[float], factor: float = 1.5) -> list[int]:
    """The indexes of the steps that trigger, with the spacing the watch applies."""
    history, triggered = StepHistory(factor), []
    for index, wall in enumerate(walls):
        slow = history.slow_factor(wall)
        history.add(wall)
        if slow is not None:
            history.triggered()
            triggered.append(index)
    return triggered


def test_a_one_off_slow_step_triggers_and_another_one_later_triggers_again():
    walls = [100.0] * 10 + [500.0] + [100.0] * 15 + [500.0] + [100.0] * 5
    assert verdicts(walls) == [10, 26]


def test_a_run_of_slow_steps_triggers_once():
    for run in (2, 5, 10, 11, 12, 15, 40):
        walls = [100.0] * 10 + [400.0] * run + [100.0] * 40
        assert verdicts(walls) == [10], run


def test_a_machine_that_stays_busy_triggers_once_however_noisy():
    import random

    noise = random.Random(55)
    busy = [noise.uniform(250.0, 350.0) for _ in range(200)]
    walls = [noise.uniform(95.0, 105.0) for _ in range(10)] + busy
    assert verdicts(walls) == [10]


def test_after_a_trigger_the_next_verdict_waits_until_most_of_the_median_came_after_it():
    assert QUIET_STEPS * 2 >= HISTORY, "the steps after a trigger (and the slow one) are most of the median"
    walls = [100.0] * 10 + [500.0] + [100.0] * (QUIET_STEPS - 1) + [500.0] + [100.0] + [500.0]
    assert verdicts(walls) == [10, 10 + QUIET_STEPS + 2]


def test_the_slowest_call_and_the_stragglers_against_their_peers_median():
    calls = [("policy", rank, "train", 0.0, 0.100 + rank / 1000) for rank in (0, 2, 3)]
    calls += [("policy", 1, "train", 0.0, 0.712), ("reward", 0, "score", 0.0, 0.9), ("policy", 0, "train", 0.2, None)]
    call_spans = verdict.spans(calls)
    medians = verdict.peers_medians(call_spans)
    assert verdict.slowest(call_spans, medians) == Slowest("reward", 0, "score", 900.0, None), "a worker with no peer"
    (late,) = verdict.stragglers(call_spans, medians, 1.5)
    assert (late.worker, late.rank, late.method, late.ms, late.peers_ms) == ("policy", 1, "train", 712.0, 102.0)


def test_peers_medians_leave_each_rank_out_of_its_own():
    values = [10.0, 20.0, 30.0, 40.0, 1000.0]
    call_spans = verdict.spans(("g", rank, "m", 0.0, value / 1000) for rank, value in enumerate(values))
    medians = {span.rank: median for span, median in verdict.peers_medians(call_spans).items()}
    import statistics

    for rank in range(len(values)):
        others = values[:rank] + values[rank + 1 :]
        assert math.isclose(medians[rank], statistics.median(others)), (rank, medians)


# --- the gate of an armed job ---------------------------------------------------------------------------------------


@pytest.fixture
def said(nrlprof_log):
    """The nrlprof logger's INFO lines (the gate's own tests run with no activation to set its level)."""
    import logging

    logger = logging.getLogger("nrlprof")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield nrlprof_log
    logger.setLevel(level)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def armed_gate(**variables: str) -> tuple[Gate, ActionLog, Clock]:
    plan = plan_from_env(variables)
    tracker, log = Tracker(), ActionLog()
    gate = Gate(plan, tracker, log, actor_fanout(tracker, plan.timeout_s))  # type: ignore[arg-type]
    gate.watch(SlowWatch(plan.slow, plan.backends, None))
    clock = gate.slow.seconds = Clock()
    return gate, log, clock


def run_steps(gate: Gate, log: ActionLog, clock: Clock, walls: dict[int, float], last: int) -> dict[int, list]:
    """Steps 1..last, step n taking walls.get(n, 100) ms: what the gate sent the controller at each step."""
    seen = {}
    for step in range(1, last + 1):
        seen.update(per_step(gate, log, [step]))
        clock.now += walls.get(step, 100.0) / 1000
    return seen


def test_a_slow_step_opens_a_window_at_the_next_step_in_the_workers_and_the_controller(said):
    gate, log, clock = armed_gate(**torch_slow(NRL_PROFILE_SLOW_STEPS="2"))
    seen = run_steps(gate, log, clock, {8: 512.0}, 14)
    assert seen[1] == [("torch", "arm", 0, 0)], "torch's start-up, paid once before any window needs it"
    windows = {step: actions for step, actions in seen.items() if actions and step > 1}
    assert windows == {9: [("torch", "start", 9, 10)], 10: [("torch", "step", 0, 0)], 11: [("torch", "stop", 0, 0)]}
    (line,) = [m for m in said if m.startswith("slow step")]
    assert line == ("slow step 8: 512 ms, 5.1x the median of 100 ms (NRL_PROFILE_SLOW_FACTOR); no worker call timed; "
                    "torch window 9-10 opens in 0 worker(s) and the controller (1 of 3 for this run)")  # fmt: skip
    assert [(kind, window.label, trigger.step) for (kind, window), trigger in gate.triggered.items()] == [
        ("torch", "9-10", 8)
    ]
    assert any("torch window 9-10 (slow step 8: 5.1x) started" in m for m in said)


def test_the_window_carries_its_trigger_to_the_controllers_start():
    gate, log, clock = armed_gate(**torch_slow())
    starts = []
    log.apply = lambda actions: (starts.extend(a for a in actions if a.op == "start"), ActionLog.apply(log, actions))[1]
    run_steps(gate, log, clock, {7: 300.0}, 10)
    (start,) = starts
    assert start.trigger == Trigger(7, 300.0, 100.0, 3.0, None, "slow step")


def test_the_steps_of_a_window_and_its_stop_never_enter_the_median():
    gate, log, clock = armed_gate(**torch_slow(NRL_PROFILE_SLOW_STEPS="3"))
    # The window's steps (9-11) and the step of its stop (12) are slow: they trigger nothing, and change no median.
    run_steps(gate, log, clock, {8: 500.0, 9: 900.0, 10: 900.0, 11: 900.0, 12: 900.0}, 24)
    assert [t.step for t in gate.slow.triggers] == [8]
    assert max(gate.slow.history.walls) == 500.0, "only the slow step itself, of the steps from 8 on"


def test_the_budget_holds_and_one_line_says_it_is_spent(said):
    gate, log, clock = armed_gate(**torch_slow(NRL_PROFILE_SLOW_MAX="2"))
    slow_steps = {step: 600.0 for step in range(8, 200, 15)}
    seen = run_steps(gate, log, clock, slow_steps, 200)
    assert sum(1 for actions in seen.values() for a in actions if a[1] == "start") == 2
    assert [t.step for t in gate.slow.triggers] == [8, 23]
    spent = [m for m in said if "are spent" in m]
    assert spent == [
        "slow step 38: 600 ms, 6.0x the median of 100 ms (NRL_PROFILE_SLOW_FACTOR): nothing opens, the run's 2 "
        "(NRL_PROFILE_SLOW_MAX) are spent; no more windows or kept steps for slow steps"
    ]


def test_slow_keep_records_every_step_and_keeps_the_slow_one(said):
    gate, log, clock = armed_gate(**torch_slow("slow:keep"))
    keeps = []
    log.apply = lambda actions: (keeps.extend((a.step, a.trigger) for a in actions if a.op == "keep"),
                                 ActionLog.apply(log, actions))[1]  # fmt: skip
    run_steps(gate, log, clock, {9: 700.0}, 12)
    assert [step for step, _ in keeps] == list(range(1, 13)), "each step recorded from its top"
    kept = {step: trigger for step, trigger in keeps if trigger is not None}
    assert list(kept) == [10] and kept[10].step == 9, "the verdict on step 9 comes with step 10's action"
    assert any(m.startswith("slow step 9: 700 ms, 7.0x") and "torch trace of step 9 kept in 0 worker(s) and the "
               "controller" in m for m in said)  # fmt: skip
    gate.finish()
    assert keeps[-1] == (0, None), "the job's end: no more recording, the last step (not slow) dropped"


def test_slow_keep_stops_recording_once_its_budget_is_spent(said):
    gate, log, clock = armed_gate(**torch_slow("slow:keep", NRL_PROFILE_SLOW_MAX="1"))
    keeps = []
    log.apply = lambda actions: (keeps.extend(a.step for a in actions if a.op == "keep"),
                                 ActionLog.apply(log, actions))[1]  # fmt: skip
    run_steps(gate, log, clock, {9: 700.0}, 20)
    assert keeps == [*range(1, 10), 0], "step 9 kept; nothing recorded after"
    assert any("kept step(s) (NRL_PROFILE_SLOW_MAX) are spent: the workers record no more steps" in m
               for m in said)  # fmt: skip


def test_a_straggler_triggers_when_it_begins_to_straggle_not_at_every_step():
    gate, log, clock = armed_gate(**torch_slow())
    calls = {}

    class Calls:
        def take_step(self):
            step = gate.last_step
            ranks = [("policy", rank, "train", 0.0, 0.1) for rank in (0, 1, 2)]
            if step in calls:
                ranks[1] = ("policy", 1, "train", 0.0, calls[step])
            return [list(call) for call in ranks]

    gate.slow.clock = Calls()
    calls.update({step: 0.4 for step in range(8, 20)})  # rank 1 straggles from step 8 on, the steps unchanged
    run_steps(gate, log, clock, {}, 30)
    (trigger,) = gate.slow.triggers
    assert trigger.cause == STRAGGLER and trigger.step == 8
    assert trigger.slowest == Slowest("policy", 1, "train", 400.0, 100.0) and trigger.factor == 4.0


def test_a_kept_steps_records_are_not_said_again_as_a_window_that_stopped(said):
    gate, _, _ = armed_gate(**torch_slow("slow:keep"))
    kept = WindowRecord("torch", "controller", None, (9,), "9", ("/t/a.json",), trigger=Trigger(9, 1, 1, 1.5))
    gate._log_stopped([kept], 10)
    assert not [m for m in said if "window stopped" in m]


def test_a_short_call_seen_late_is_never_taken_for_a_straggler():
    # Both calls took 10 ms; rank 1's end was seen 20 ms late (it ended before it joined the clock's wait).
    call_spans = verdict.spans([("policy", 0, "train", 0.0, 0.010), ("policy", 1, "train", 0.0, 0.030)])
    medians = verdict.peers_medians(call_spans)
    assert verdict.stragglers(call_spans, medians, 1.5) != [], "taken at face value it would straggle"
    assert verdict.stragglers(call_spans, medians, 1.5, seen_late_ms=20.0) == []


def test_plan_says_what_counts_as_slow_what_opens_the_spacing_the_budget_and_the_cost():
    from nrlprof.tools.plan.describe import describe

    plan = plan_from_env({**torch_slow("slow:keep"), **NSYS, "NRL_NSYS_PROFILE_STEP_RANGE": "slow",
                          "NRL_PROFILE_SLOW_MAX": "2"})  # fmt: skip
    views = {view.kind: view for view in describe(plan)}
    keep, nsys = views["torch"], views["nsys"]
    assert keep.windows == ["slow:keep: every step recorded, the slow steps' traces kept"]
    (note,) = [n for n in keep.notes if n.startswith("slow:keep")]
    for said in (
        "1.5x the median of up to 20 steps",
        "no verdict before 5",
        "1.5x its peers' median",
        "at most 2",
        "no verdict until 10 more steps",
        "NRL_PROFILE_MAX_HOST_MB",
        "150 ms step",
        "and the controller",
    ):
        assert said in note, said
    assert any(f["path"].endswith("steps<n>.<pid>.pt.trace.json") for f in keep.files)
    (note,) = [n for n in nsys.notes if n.startswith("slow:")]
    assert "a window of 1 step(s) opens at the next step in every matched worker," in note and "100 ms step" in note
    assert "_slow_<pid>.<k>" in nsys.files[0]["path"]
