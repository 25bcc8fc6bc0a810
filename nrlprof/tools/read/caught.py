"""The slow steps a job armed for them caught (NRL_*_STEP_RANGE=slow, slow:keep), as its manifests record them: one per
backend and window, with the trigger its records carry (the step, its time, the median, the factor, the slowest
worker rank's call) and the processes and files of the window or kept step."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

AROUND = 5  # steps on either side of a slow step it is compared with, where the step anatomy has them


@dataclass
class Caught:
    backend: str
    window: str
    trigger: dict[str, Any]
    processes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def step(self) -> int:
        return int(self.trigger["step"])

    @property
    def kept(self) -> bool:
        """slow:keep: the traces are of the slow step itself (else of the window opened after it)."""
        return self.window == str(self.step)

    def what(self) -> str:
        """`torch trace of step 23 kept in 3 process(es)`, `torch window 24 opened in 3 process(es)`."""
        done = f"trace of step {self.step} kept" if self.kept else f"window {self.window} opened"
        return f"{self.backend} {done} in {len(self.processes)} process(es)"

    def describe(self, anatomy_steps: dict | None = None) -> str:
        """`step 23: 5.1x the median (512 ms against 100 ms); policy rank 1's `train` 712 ms against 101 ms; ...`."""
        trigger = self.trigger
        text = f"step {self.step}: {trigger['factor']:.1f}x "
        slowest = trigger.get("slowest") or None
        if trigger.get("cause") == "straggler" and slowest:
            text += (f"its peers' median: {_call(slowest)} (the step {trigger['wall_ms']:.0f} ms against a median of "
                     f"{trigger['median_ms']:.0f} ms)")  # fmt: skip
        else:
            text += f"the median ({trigger['wall_ms']:.0f} ms against {trigger['median_ms']:.0f} ms)"
            if slowest:
                text += f"; {_call(slowest)}"
        around = self.around(anatomy_steps)
        if around is not None:
            text += f"; the steps around it {around:.0f} ms (the step anatomy)"
        return f"{text}; {self.what()}"

    def around(self, anatomy_steps: dict | None) -> float | None:
        """The median wall time of the AROUND steps on either side of the slow one, where the anatomy has them."""
        if not anatomy_steps:
            return None
        walls = [anatomy_steps[str(s)]["wall_ms"] for s in range(self.step - AROUND, self.step + AROUND + 1)
                 if s != self.step and str(s) in anatomy_steps]  # fmt: skip
        return statistics.median(walls) if walls else None

    def to_json(self, anatomy_steps: dict | None = None) -> dict[str, Any]:
        around = self.around(anatomy_steps)
        row = {"backend": self.backend, "window": self.window, "kept": self.kept, "trigger": self.trigger,
               "processes": self.processes, "files": self.files}  # fmt: skip
        return {**row, "around_ms": round(around, 1)} if around is not None else row


def _call(slowest: dict[str, Any]) -> str:
    peers = slowest.get("peers_ms")
    against = f" against {peers:.0f} ms" if isinstance(peers, (int, float)) else ""
    who = f"{slowest.get('worker')} rank {slowest.get('rank')}"
    return f"{who}'s `{slowest.get('method')}` {slowest.get('ms', 0):.0f} ms{against}"


def caught(records: Iterable[dict[str, Any]]) -> list[Caught]:
    """One Caught per backend and window whose records carry a trigger, by step."""
    found: dict[tuple[str, str], Caught] = {}
    for record in records:
        trigger = record.get("trigger")
        if not isinstance(trigger, dict) or not isinstance(trigger.get("step"), int):
            continue
        key = (str(record.get("backend", "?")), str(record.get("window", "")))
        entry = found.setdefault(key, Caught(key[0], key[1], trigger))
        rank = record.get("rank")
        entry.processes.append(f"{record.get('worker', '?')}" + ("" if rank is None else f" rank {rank}"))
        entry.files += [f for f in record.get("files") or [] if isinstance(f, str)]
    return sorted(found.values(), key=lambda c: (c.step, c.backend))
