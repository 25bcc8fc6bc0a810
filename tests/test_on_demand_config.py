"""Armed jobs (NRL_PROFILE_ON_DEMAND) with no Ray: the variables, the request's wire form, and the gate opening a
window asked for at the next step, beside the planned ones. The same on a real cluster: test_on_demand.py."""

from __future__ import annotations

import json
import re

import pytest

from nrlprof.backends import backend_class
from nrlprof.config.env import plan_from_env
from nrlprof.config.plan import MEMORY, TORCH, BackendPlan, Plan, Target
from nrlprof.config.requests import CLOSED, OPENED, REFUSED, Request
from nrlprof.config.steps import Window
from nrlprof.config.variables import may_activate
from nrlprof.errors import ConfigError
from nrlprof.manifest import WindowRecord
from nrlprof.process.finishing import Finisher
from nrlprof.rayfix.fix import nsight_command
from nrlprof.rayfix.worker_prefix import worker_prefix
from nrlprof.runtime.windows.asked import AskedWindow
from nrlprof.runtime.windows.dispatch import actor_fanout
from nrlprof.runtime.windows.gate import Gate
from nrlprof.runtime.windows.profiler import Action, Applied
from nrlprof.workers.identity import WorkerIdentity
from nrlprof.workers.tracker import Tracker


def test_an_armed_job_activates_with_no_window_planned():
    assert may_activate({"NRL_PROFILE_ON_DEMAND": "1"})
    assert not may_activate({"NRL_PROFILE_ON_DEMAND": "0"})
    plan = plan_from_env({"NRL_PROFILE_ON_DEMAND": "1"})
    assert plan.on_demand is not None and plan.backends == ()


def test_an_armed_job_takes_output_dirs_and_switches_without_patterns():
    plan = plan_from_env({"NRL_PROFILE_ON_DEMAND": "yes", "NRL_MEMORY_PROFILE_DIR": "/tmp/mem",
                          "NRL_MEMORY_PROFILE_MAX_ENTRIES": "500", "NRL_TORCH_PROFILE_DIR": "/tmp/tr",
                          "NRL_TORCH_PROFILE_RECORD_SHAPES": "1"})  # fmt: skip
    assert plan.on_demand.memory_dir == "/tmp/mem" and ("max_entries", "500") in plan.on_demand.memory_options
    assert plan.torch.directory == "/tmp/tr" and plan.torch.record_shapes
    assert Plan.from_json(plan.to_json()) == plan


def test_a_memory_dir_without_patterns_is_still_refused_in_a_job_not_armed():
    with pytest.raises(ConfigError, match="NRL_MEMORY_PROFILE_WORKER_PATTERNS"):
        plan_from_env({"NRL_MEMORY_PROFILE_DIR": "/tmp/mem"})


def test_a_bad_arming_value_names_the_variable():
    with pytest.raises(ConfigError, match=r"NRL_PROFILE_ON_DEMAND.*maybe"):
        plan_from_env({"NRL_PROFILE_ON_DEMAND": "maybe"})


def test_nsys_on_demand_launches_each_matched_worker_in_an_nsys_session_of_its_own():
    plan = plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "on-demand",
                          "NRL_NSYS_EXTRA_OPTIONS": '{"s": "none"}'})  # fmt: skip
    nsys = plan.backend("nsys")
    assert plan.on_demand is not None and plan.on_demand.nsys and nsys.steps is None
    assert dict(nsys.options) == {"t": "cuda,nvtx", "s": "none", "session-new": "<session>"}
    assert Plan.from_json(plan.to_json()) == plan
    worker = WorkerIdentity("DTensorPolicyWorker", None, 0)
    first, second = (backend_class("nsys").runtime_env_fragment(nsys, worker) for _ in range(2))
    session = first["_nsight"]["session-new"]
    assert re.fullmatch(r"nrlprof-[0-9a-f]{12}", session) and session != second["_nsight"]["session-new"]
    launched = {"_nsight": {"t": "cuda,nvtx", "session-new": session}, "env_vars": {"NRLPROF_NSYS_SESSION": session}}
    assert first == launched, "the collection's options go to `nsys start`"
    assert nsight_command(first["_nsight"], [], "/logs/nsight") == ["nsys", "launch", "-t", "cuda,nvtx",
                                                                     f"--session-new={session}"]  # fmt: skip
    prefix = worker_prefix(first["_nsight"], None, "/venv/bin/python")
    assert f"exec nsys launch -t cuda,nvtx --session-new={session} /venv/bin/python" in prefix and " -o " not in prefix
    with pytest.raises(ConfigError, match="NRL_NSYS_WORKER_PATTERNS"):
        plan_from_env({"NRL_NSYS_PROFILE_STEP_RANGE": "on-demand"})
    with pytest.raises(ConfigError, match="NRL_PROFILE_ON_DEMAND"):
        plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "*p*", "NRL_NSYS_PROFILE_STEP_RANGE": "on-demand",
                       "NRL_PROFILE_ON_DEMAND": "0"})  # fmt: skip
    with pytest.raises(ConfigError, match="capture-range"):
        plan_from_env({"NRL_NSYS_WORKER_PATTERNS": "*p*", "NRL_NSYS_PROFILE_STEP_RANGE": "on-demand",
                       "NRL_NSYS_EXTRA_OPTIONS": '{"capture-range-end": "stop"}'})  # fmt: skip


def test_planned_windows_and_arming_combine():
    plan = plan_from_env({"NRL_PROFILE_ON_DEMAND": "1", "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
                          "NRL_TORCH_PROFILE_STEP_RANGE": "3:5"})  # fmt: skip
    assert plan.on_demand is not None and plan.backend(TORCH).steps.windows == (Window(3, 4),)


def test_a_request_round_trips_and_a_bad_one_says_what_is_wrong():
    request = Request("01000000", MEMORY, ("*policy*",), 3, frozenset({0, 1}), node="h (1.2.3.4)")
    assert Request.from_json(request.to_json()) == request
    for bad, said in [
        ("{", "not JSON"),
        ("[]", "not an object"),
        (json.dumps({**json.loads(request.to_json()), "backend": "perf"}), "backend 'perf'"),
        (json.dumps({**json.loads(request.to_json()), "steps": 0}), "steps 0"),
        (json.dumps({**json.loads(request.to_json()), "patterns": []}), "no worker pattern"),
        (json.dumps({**json.loads(request.to_json()), "ranks": ["a"]}), "ranks"),
    ]:
        with pytest.raises(ValueError, match=said):
            Request.from_json(bad)


class ControllerLog:
    """Stands in for the controller's profiler: what the gate asked of it, and the backends it was given."""

    def __init__(self) -> None:
        self.actions: list[tuple] = []
        self.added: list[str] = []
        self.finisher = Finisher()

    def apply(self, actions: tuple[Action, ...]) -> Applied:
        self.actions += [(a.kind, a.op, a.first, a.last) for a in actions]
        return Applied([WindowRecord(a.kind, "controller", None, (), "?", host="h") for a in actions if a.op == "stop"],
                       [])  # fmt: skip

    def add_backend(self, kind: str, backend_plan: BackendPlan) -> None:
        self.added.append(kind)


def gate_for(**variables: str) -> tuple[Gate, ControllerLog]:
    plan = plan_from_env({"NRL_PROFILE_ON_DEMAND": "1", **variables})
    tracker, log = Tracker(), ControllerLog()
    return Gate(plan, tracker, log, actor_fanout(tracker, plan.timeout_s)), log  # type: ignore[arg-type]


def asked(kind: str, steps: int) -> AskedWindow:
    request = Request("job", kind, ("*policy*",), steps)
    return AskedWindow(request, BackendPlan(kind, (Target("*policy*"),), None), [])


def test_a_window_asked_for_opens_at_the_next_step_and_covers_the_steps_asked():
    gate, log = gate_for()
    for step in (1, 2, 3):
        gate.step(step)
    window = asked(TORCH, 3)
    gate.asked_waiting.append(window)
    assert window.state != OPENED
    for step in range(4, 10):
        gate.step(step)
        if step == 4:
            assert window.state == OPENED and (window.window.first, window.window.last) == (4, 6)
    assert log.actions == [("torch", "start", 4, 6), ("torch", "step", 0, 0), ("torch", "step", 0, 0),
                           ("torch", "stop", 0, 0), ("torch", "settle", 0, 0)]  # fmt: skip
    assert window.state == CLOSED and log.added == [TORCH]
    assert gate._relevant(5) and not gate._relevant(8), "the gate is back on its fast path after the window"


def test_a_window_asked_for_that_overlaps_a_planned_one_is_refused_and_the_planned_one_runs():
    gate, log = gate_for(NRL_TORCH_PROFILE_WORKER_PATTERNS="*p*", NRL_TORCH_PROFILE_STEP_RANGE="5:7")
    gate.step(1)
    window = asked(TORCH, 5)
    gate.asked_waiting.append(window)
    for step in range(2, 9):
        gate.step(step)
    assert window.state == REFUSED and "5-6 overlaps steps 2-6" in window.message
    assert ("torch", "start", 5, 6) in log.actions


def test_windows_asked_for_two_backends_run_side_by_side():
    gate, log = gate_for()
    gate.step(1)
    torch_window, memory_window = asked(TORCH, 2), asked(MEMORY, 1)
    gate.asked_waiting += [torch_window, memory_window]
    for step in range(2, 6):
        gate.step(step)
    assert torch_window.window.label == "2-3" and memory_window.window.label == "2"
    assert torch_window.state == memory_window.state == CLOSED
    assert [a for a in log.actions if a[1] == "start"] == [("torch", "start", 2, 3), ("memory", "start", 2, 2)]


def test_a_window_asked_for_that_never_opened_is_refused_when_the_job_ends():
    gate, _log = gate_for()
    gate.step(1)
    window = asked(TORCH, 2)
    gate.asked_waiting.append(window)
    gate.finish()
    assert window.state == REFUSED and "ended" in window.message


def test_the_job_ending_in_a_window_asked_for_closes_it():
    gate, log = gate_for()
    gate.step(1)
    window = asked(MEMORY, 10)
    gate.asked_waiting.append(window)
    gate.step(2)
    gate.finish()
    assert window.state == CLOSED and log.actions[-1] == ("memory", "stop", 0, 0)
