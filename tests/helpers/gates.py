"""The gate (nrlprof.runtime.windows.gate) on its own: a stand-in for the controller's profiler that keeps what the
gate asked of it, and the plans the gate tests use."""

from __future__ import annotations

from nrlprof.config.env import plan_from_env
from nrlprof.process.finishing import Finisher
from nrlprof.runtime.windows.dispatch import actor_fanout
from nrlprof.runtime.windows.gate import Gate
from nrlprof.runtime.windows.profiler import Action, Applied
from nrlprof.workers.tracker import Tracker


class ActionLog:
    """Stands in for the controller's profiler: keeps what the gate asked of it, per step."""

    def __init__(self) -> None:
        self.actions: list[tuple] = []
        self.finisher = Finisher()

    def apply(self, actions: tuple[Action, ...]) -> Applied:
        self.actions += [(a.kind, a.op, a.first, a.last) for a in actions]
        return Applied([], [])


def gate_for(**variables: str) -> tuple[Gate, ActionLog]:
    plan = plan_from_env(variables)
    tracker, log = Tracker(), ActionLog()
    return Gate(plan, tracker, log, actor_fanout(tracker, plan.timeout_s)), log  # type: ignore[arg-type]


def per_step(gate: Gate, log: ActionLog, steps) -> dict[int, list[tuple]]:
    seen: dict[int, list[tuple]] = {}
    for step in steps:
        before = len(log.actions)
        gate.step(step)
        seen.setdefault(step, [])
        seen[step] = seen[step] + log.actions[before:]
    return seen


def nsys(steps: str) -> dict[str, str]:
    return {"NRL_NSYS_WORKER_PATTERNS": "*p*", "NRL_NSYS_PROFILE_STEP_RANGE": steps}


def torch(steps: str) -> dict[str, str]:
    return {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*p*", "NRL_TORCH_PROFILE_STEP_RANGE": steps}
