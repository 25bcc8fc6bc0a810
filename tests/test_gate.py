"""nrlprof.runtime.windows.gate, the step state machine: README's rules seen as the actions it sends the controller (no
worker tracked, so no Ray): windows from runs of steps, warm-up the step before, repeated and backward steps,
finish(), and its log lines. The same windows on a real Ray cluster: test_gating.py."""

from __future__ import annotations

import logging
import subprocess
import sys

from helpers.gates import ActionLog, gate_for, nsys, per_step, torch

from nrlprof.config.env import plan_from_env
from nrlprof.manifest import WindowRecord
from nrlprof.runtime.windows.dispatch import actor_fanout
from nrlprof.runtime.windows.gate import Gate
from nrlprof.runtime.windows.profiler import Action, Applied
from nrlprof.workers.tracker import Tracker


def test_nsys_windows_open_at_their_first_step_and_close_at_the_first_step_after():
    gate, log = gate_for(**nsys("2:4,6"))
    seen = per_step(gate, log, range(1, 9))
    assert seen == {
        1: [],
        2: [("nsys", "start", 2, 3)],
        3: [("nsys", "step", 0, 0)],
        4: [("nsys", "stop", 0, 0)],
        5: [],
        6: [("nsys", "start", 6, 6)],
        7: [("nsys", "stop", 0, 0)],
        8: [],
    }


def test_adjacent_windows_close_one_and_open_the_next_at_the_same_step():
    gate, log = gate_for(**nsys("2,3:5"))  # 2 and 3:5 touch: one window 2-4
    seen = per_step(gate, log, range(1, 7))
    assert [a for step in sorted(seen) for a in seen[step] if a[1] != "step"] == [
        ("nsys", "start", 2, 4),
        ("nsys", "stop", 0, 0),
    ]


def test_torch_warms_up_the_step_before_each_window_but_not_before_step_one():
    gate, log = gate_for(**torch("1:3,5"))
    seen = per_step(gate, log, range(1, 7))
    assert seen == {
        1: [("torch", "start", 1, 2)],
        2: [("torch", "step", 0, 0)],
        3: [("torch", "stop", 0, 0)],
        4: [("torch", "prepare", 5, 5)],
        5: [("torch", "start", 5, 5)],
        6: [("torch", "stop", 0, 0)],
    }


def test_a_repeated_step_is_ignored():
    gate, log = gate_for(**nsys("2:4"))
    seen = per_step(gate, log, [1, 2, 2, 3, 3, 4])
    assert seen == {1: [], 2: [("nsys", "start", 2, 3)], 3: [("nsys", "step", 0, 0)], 4: [("nsys", "stop", 0, 0)]}


def test_a_step_going_back_closes_the_open_window_and_it_never_opens_again():
    gate, log = gate_for(**nsys("2:6"))
    per_step(gate, log, [1, 2, 3])
    assert log.actions == [("nsys", "start", 2, 5), ("nsys", "step", 0, 0)]
    per_step(gate, log, [2, 3, 4, 5, 6, 7])
    assert log.actions[2:] == [("nsys", "stop", 0, 0)], "closed at the step that went back, never reopened"


def test_a_step_going_back_before_a_window_does_not_open_it_twice():
    gate, log = gate_for(**nsys("3"))
    per_step(gate, log, [1, 2, 3, 4, 1, 2, 3, 4])
    assert log.actions == [("nsys", "start", 3, 3), ("nsys", "stop", 0, 0)]


def test_steps_outside_every_window_send_nothing():
    gate, log = gate_for(**nsys("50:52"))
    per_step(gate, log, range(1, 49))
    assert log.actions == []


def test_finish_closes_the_open_window_and_a_prepared_one():
    gate, log = gate_for(**nsys("2:5"), **torch("4"))
    per_step(gate, log, [1, 2, 3])
    assert log.actions == [("nsys", "start", 2, 4), ("nsys", "step", 0, 0), ("torch", "prepare", 4, 4)]
    gate.finish()
    assert sorted(log.actions[3:]) == [("nsys", "stop", 0, 0), ("torch", "stop", 0, 0)]
    gate.finish()
    assert len(log.actions) == 5, "a second finish has nothing left to close"
    per_step(gate, log, [4, 5])
    assert ("nsys", "start", 2, 4) not in log.actions[5:], "a window closed by finish() is not opened again"


def test_an_open_window_is_closed_at_interpreter_exit():
    from pathlib import Path

    program = Path(__file__).parent / "programs" / "exit_with_a_window_open.py"
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "actions at exit: [('nsys', 'start', 2, 4), ('nsys', 'stop', 0, 0)]" in done.stdout


def test_jumping_from_one_window_into_the_next_stops_one_and_starts_the_other():
    gate, log = gate_for(**nsys("2:4,6"))
    seen = per_step(gate, log, [2, 3, 6, 7])
    assert seen == {
        2: [("nsys", "start", 2, 3)],
        3: [("nsys", "step", 0, 0)],
        6: [("nsys", "stop", 0, 0), ("nsys", "start", 6, 6)],
        7: [("nsys", "stop", 0, 0)],
    }


class RecordingController(ActionLog):
    """Answers a stop with the window records a process would send back."""

    def __init__(self, files: list[str], statuses: tuple[str, ...] = ("ok",)) -> None:
        super().__init__()
        self.files = files
        self.statuses = statuses

    def apply(self, actions: tuple[Action, ...]) -> Applied:
        super().apply(actions)
        if not any(a.op == "stop" for a in actions):
            return Applied([], [])
        return Applied([WindowRecord("nsys", "w", 0, (2, 3), "2-3", self.files, status, host="node7")
                        for status in self.statuses], [])  # fmt: skip


def log_lines_of(files: list[str], nrlprof_log: list[str], statuses: tuple[str, ...] = ("ok",)) -> list[str]:
    plan = plan_from_env(nsys("2:4"))
    tracker, controller = Tracker(), RecordingController(files, statuses)
    gate = Gate(plan, tracker, controller, actor_fanout(tracker, plan.timeout_s))  # type: ignore[arg-type]
    logger = logging.getLogger("nrlprof")
    level = logger.level
    logger.setLevel(logging.INFO)  # as activation sets it by default
    try:
        for step in (1, 2, 3, 4):
            gate.step(step)
    finally:
        logger.setLevel(level)
    return [m for m in nrlprof_log if "window" in m]


def test_log_lines_say_when_a_window_starts_and_where_its_files_went(nrlprof_log):
    import os
    import re
    import socket

    started, stopped = log_lines_of(["/r/logs/nsight/a.nsys-rep", "/r/logs/nsight/b.nsys-rep"], nrlprof_log)
    pattern = rf"step 2: nsys window 2-3 started in 0 worker\(s\) and the controller \({socket.gethostname()} pid "
    assert re.fullmatch(pattern + rf"{os.getpid()}\) in \d+ ms", started), started
    assert stopped == "nsys window stopped in 1 process(es) at step 4; files on node7:/r/logs/nsight"


def test_log_line_of_a_window_without_files_points_at_the_manifest(nrlprof_log):
    _, stopped = log_lines_of([], nrlprof_log)
    assert stopped == "nsys window stopped in 1 process(es) at step 4; files on no file (see the manifest)"


def test_log_line_counts_the_processes_that_were_late(nrlprof_log):
    _, stopped = log_lines_of(["/r/a.nsys-rep"], nrlprof_log, ("ok", "late", "late"))
    assert stopped == "nsys window stopped in 3 process(es) (2 late) at step 4; files on node7:/r"


def test_log_line_counts_every_status_but_ok(nrlprof_log):
    _, stopped = log_lines_of(["/r/a.nsys-rep"], nrlprof_log, ("late", "ok", "error", "died", "late"))
    assert stopped == "nsys window stopped in 5 process(es) (1 died, 1 error, 2 late) at step 4; files on node7:/r"


def test_the_steps_that_cost_more_than_a_bisect_are_the_window_steps_and_warm_ups():
    gate, _ = gate_for(**nsys("3:5,9"), **torch("1,6:8,12"))
    # nsys: 3, 4, 9; torch: 1, 6, 7, 12 and the warm-up step before each torch window that does not start at 1
    assert [s for s in range(0, 15) if gate._relevant(s)] == [1, 3, 4, 5, 6, 7, 9, 11, 12]
    nsys_only, _ = gate_for(**nsys("1,4:6,7"))
    assert [s for s in range(0, 10) if nsys_only._relevant(s)] == [1, 4, 5, 7]


def test_finish_after_a_window_closed_on_its_own_only_waits_for_its_files_once():
    gate, log = gate_for(**torch("2:4"))
    per_step(gate, log, [1, 2, 3, 4])
    assert log.actions == [
        ("torch", "prepare", 2, 3),
        ("torch", "start", 2, 3),
        ("torch", "step", 0, 0),
        ("torch", "stop", 0, 0),
    ]
    gate.finish()
    assert log.actions[4:] == [("torch", "settle", 0, 0)], "the trace finished beside the next step is waited for"
    gate.finish()
    assert len(log.actions) == 5


def test_finish_after_an_nsys_window_closed_on_its_own_sends_nothing():
    gate, log = gate_for(**nsys("2:4"))
    per_step(gate, log, [1, 2, 3, 4])
    gate.finish()
    assert log.actions == [("nsys", "start", 2, 3), ("nsys", "step", 0, 0), ("nsys", "stop", 0, 0)]


def test_the_step_anatomy_marks_every_step_when_it_records():
    gate, log = gate_for(**nsys("50"))
    gate.marks = []
    per_step(gate, log, [1, 2, 2, 3])
    assert [step for step, _ in gate.marks] == [1, 2, 3], "a repeated step is not marked again"
    assert all(isinstance(ns, int) and ns > 0 for _, ns in gate.marks)
