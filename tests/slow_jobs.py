"""A Ray job with slow steps planted, for the windows that open themselves (NRL_*_STEP_RANGE=slow, slow:keep): two
policy ranks and a reward worker called every step, each step `base_s` of sleep (robust on a busy machine: a slow step
is several times a normal one) plus a few torch ops; `slow` steps take longer on every rank, `straggle` steps on rank 1
only, `controller_s` is the controller's own time in each step. Importable by Ray's workers (tests/ on their path)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

import ray


@ray.remote(num_cpus=0)
class PolicyWorker:
    def __init__(self) -> None:
        self.kept: list[bytearray] = []

    def train(self, step: int, seconds: float, iterations: int = 0, grow_mb: int = 0) -> int:
        import torch

        if grow_mb:  # memory this rank keeps from this step on
            self.kept.append(bytearray(b"x" * (grow_mb << 20)))
        with torch.profiler.record_function(f"policy.train.{step}"):
            x = torch.ones(64, 64)
            for _ in range(3):
                x = x @ x / 64
        time.sleep(seconds)
        busy(iterations)
        return step


def busy(iterations: int) -> int:
    """CPU work of a fixed size: a busy machine makes it slower (a sleep it would not)."""
    total = 0
    for value in range(iterations):
        total += value * value % 7
    return total


@ray.remote(num_cpus=0)
class RewardWorker:
    def score(self, step: int) -> float:
        time.sleep(0.005)
        return float(step)


@dataclass
class SlowPlan:
    steps: int = 30
    base_s: float = 0.1
    controller_s: float = 0.0
    slow: dict[int, float] = field(default_factory=dict)  # step -> seconds more on every rank
    straggle: dict[int, float] = field(default_factory=dict)  # step -> seconds more on rank 1
    # `step`: nrlprof.step(n) at each step's top; `marker`: none (NRL_STEP_METHOD finds them).
    steps_from: str = "step"
    # The loop runs in a Trainer actor the driver creates (verl's TaskRunner, OpenRLHF's PPOTrainer), not the driver.
    in_actor: bool = False
    # In an armed job (NRL_PROFILE_ON_DEMAND=1): a window of this backend asked for over the policy workers once the
    # job is at step 2, as `nrlprof capture` asks (its answer printed as `ANSWER <json>`); the job waits before step 3
    # until the request is taken, so the window is over steps 3 and 4, before any slow step planted later.
    ask: str = ""
    # Each step's work on every rank is this much CPU (a fixed count of Python operations) beside `base_s` of sleep.
    cpu_iterations: int = 0
    grow: dict[int, int] = field(default_factory=dict)  # step -> MB rank 0 keeps from then on
    # While this file exists, the last step waits (the test reads the job's card meanwhile).
    hold: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SlowPlan:
        data = json.loads(text)
        for key in ("slow", "straggle", "grow"):
            data[key] = {int(step): seconds for step, seconds in data[key].items()}
        return cls(**data)


@ray.remote(num_cpus=0)
class Trainer:
    def fit(self, plan_json: str) -> int:
        plan = SlowPlan.from_json(plan_json)
        plan.in_actor = False
        run_job(plan)
        return plan.steps


def run_job(plan: SlowPlan) -> None:
    import nrlprof

    if plan.in_actor:
        print("TRAINER", ray.get(Trainer.remote().fit.remote(plan.to_json())), flush=True)
        print("DONE", flush=True)
        return

    ranks = [PolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
    reward = RewardWorker.remote()
    asker = None
    if plan.ask:
        from helpers.on_demand import ask_in_background

        asker = ask_in_background(("*policy*",), steps=2, backend=plan.ask)
    for step in range(1, plan.steps + 1):
        if asker is not None and step == 3:
            asker.taken.wait(timeout=120)
        if plan.steps_from == "step":
            nrlprof.step(step)
        time.sleep(plan.controller_s)
        seconds = plan.base_s + plan.slow.get(step, 0.0)
        calls = [rank.train.remote(step, seconds + (plan.straggle.get(step, 0.0) if r == 1 else 0.0),
                                   plan.cpu_iterations, plan.grow.get(step, 0) if r == 0 else 0)
                 for r, rank in enumerate(ranks)]  # fmt: skip
        ray.get([*calls, reward.score.remote(step)])
        print("STEP", step, flush=True)
        while step == plan.steps and plan.hold and os.path.exists(plan.hold):
            time.sleep(0.1)
    if asker is not None:
        asker.join(timeout=120)
    nrlprof.finish()
    print("DONE", flush=True)
