"""A finding: one claim about what holds a job's steps back, with its evidence, and the rules that make them.

Each kind has one documented rule and threshold (`RULES`, the README's table is written from it). `impact_pct`
is the share of the steps' wall time the finding accounts for, except for `memory_growth` (the growth over 100
steps at the rate seen, as a share of the memory at the first step read) and `idle` (the share overlapping the group's
work with what it waits on could save: the lesser of its busy time and its time waiting while other groups work).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

MIN_IMPACT_PCT = 5.0  # below this, a finding is left out unless --all (traceml's "ignore")

# kind -> (rule, threshold), as the README states them
RULES: dict[str, tuple[str, str]] = {
    "rollout_bound": ("rollout holds the largest share of the steps' critical path", "the largest share"),
    "training_bound": ("training holds the largest share of the steps' critical path", "the largest share"),
    "logprob_bound": ("log-prob, reference and value passes hold the largest share of the critical path",
                      "the largest share"),
    "weight_sync_bound": ("weight sync holds the largest share of the steps' critical path", "the largest share"),
    "reward_bound": ("reward computation holds the largest share of the steps' critical path", "the largest share"),
    "controller_bound": ("the step's time on the critical path outside every worker call (the controller's own "
                         "work: data loading, rewards in the driver, Python between calls)", ">= 10% of wall time"),
    "straggler": ("one rank of a group is late in most steps: the rank that waits least in the collectives while "
                  "its peers wait for it, or (no collectives) whose calls end last while the others' ended",
                  "late by >= 5% of the step, in more than half the steps"),
    "long_tail": ("a rollout replica or rank finishes last in most steps while the others wait",
                  "the others wait >= 10% of the rollout phase, in more than half the steps"),
    "slow_steps": ("steps much slower than the median step, with what grew in them", ">= 1.5x the median step"),
    "idle": ("a worker group runs no call while other groups work (overlapping work is not idle; time when no "
             "worker runs is the controller's)", ">= 30% of wall time"),
    "exposed_comm": ("collective time that no compute on the same device overlaps (interval unions), of the rank "
                     "that waits least", ">= 10% of device busy time"),
    "profiler_distortion": ("steps inside profiling windows (with their warm-up and stop) run slower than the "
                            "job's other steps, or nrlprof's own work holds them",
                            "> 20% slower (median), or > 20% of their time"),
    "memory_growth": ("host RSS or CUDA memory grows at every step of a window", ">= 4 MB a step, every step"),
}  # fmt: skip


@dataclass
class Look:
    """Where to look in the timeline: a file, and a step's time range in it."""

    file: str
    step: int | None = None
    from_ms: float | None = None  # after the step's start
    to_ms: float | None = None
    start_ns: int | None = None  # epoch
    end_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file}
        if self.step is not None:
            data["step"] = self.step
        if self.from_ms is not None and self.to_ms is not None:
            data["from_ms"], data["to_ms"] = round(self.from_ms, 1), round(self.to_ms, 1)
        if self.start_ns and self.end_ns:
            data["from_utc"], data["to_utc"] = utc(self.start_ns), utc(self.end_ns)
        return data

    def __str__(self) -> str:
        where = self.file
        if self.step is not None:
            where += f", step {self.step}"
        if self.from_ms is not None and self.to_ms is not None:
            where += f" +{self.from_ms:.1f}..+{self.to_ms:.1f} ms"
        if self.start_ns and self.end_ns:
            where += f" ({utc(self.start_ns)[11:]}-{utc(self.end_ns)[11:]})"
        return where


def utc(epoch_ns: int) -> str:
    seconds, ns = divmod(int(epoch_ns), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ns // 1_000_000:03d}Z"


@dataclass
class Finding:
    kind: str
    impact_pct: float
    summary: str  # one line: what holds the steps back
    advice: str  # one line: what to try
    steps: list[int] = field(default_factory=list)
    worker: str | None = None
    rank: int | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    look: Look | None = None

    @property
    def threshold(self) -> str:
        """The threshold of the kind's rule, as `RULES` states it."""
        return RULES[self.kind][1]

    def to_json(self) -> dict[str, Any]:
        evidence: dict[str, Any] = {"summary": self.summary, "figures": self.figures, "threshold": self.threshold}
        if self.look is not None:
            evidence["look"] = self.look.to_json()
        return {
            "kind": self.kind,
            "impact_pct": round(self.impact_pct, 1),
            "steps": self.steps,
            "worker": self.worker,
            "rank": self.rank,
            "evidence": evidence,
            "advice": self.advice,
        }


def step_list(steps: list[int]) -> str:
    """`3-5, 9` for [3, 4, 5, 9]."""
    from nrlprof.config.steps import StepSelection

    return ", ".join(window.label for window in StepSelection.from_steps(steps).windows) if steps else "-"
