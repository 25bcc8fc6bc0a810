"""Benchmark the steps around a torch window in a driver with steps of realistic length (1-10 s).

Each case runs in a fresh interpreter (the first profiler start of a process is the expensive one) that
imports torch, as real drivers do, and profiles itself as the controller (no Ray). Every step waits as a driver
waits on its workers (`--step-s` seconds, less its own torch work) and then runs the same torch work. The window
is steps 4 and 5 of 7 (`4:6`): the warm-up starts at `step(3)` on a thread of its own, the window at `step(4)`.
Printed per step length, against the same job unprofiled in the same run: the wall time of the step before the
window (the warm-up runs beside it), of the window's first step, and of the step that holds the window's stop,
and how long the `step()` calls that start and stop the window took.

    python bench/bench_warm_up.py [--step-s 1 3] [--repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from controller_torch_case import run_case as run_torch_case

CASE = r"""
import json, os, sys, time
import torch
import nrlprof

STEP_S = float(os.environ["BENCH_STEP_S"])

def work():
    x = torch.ones(256, 256)
    for _ in range(20):
        x = x @ x / 256
    return x

work()
began = time.perf_counter()
for _ in range(5):
    work()
work_s = (time.perf_counter() - began) / 5
walls, calls = {}, {}
for step in range(1, 8):
    began = time.perf_counter()
    nrlprof.step(step)
    calls[step] = (time.perf_counter() - began) * 1000
    time.sleep(max(0.0, STEP_S - work_s))
    work()
    walls[step] = (time.perf_counter() - began) * 1000
nrlprof.finish()
print(json.dumps({"walls": walls, "calls": calls}))
"""

BEFORE, FIRST, STOPPING = "3", "4", "6"


def run_case(step_s: float, directory: str | None) -> dict:
    return run_torch_case(CASE, "4:6" if directory else None, directory or "", BENCH_STEP_S=str(step_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step-s", type=float, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"steps around a torch window 4:6 (ms, median of {args.repeat} fresh processes; plain = unprofiled)")
    header = ("step", "plain step", "step before", "1st in window", "stopping step", "start call", "stop call")
    print("{:>5} {:>11} {:>18} {:>18} {:>18} {:>11} {:>10}".format(*header))
    with tempfile.TemporaryDirectory() as directory:
        for step_s in args.step_s:
            profiled = [run_case(step_s, directory) for _ in range(args.repeat)]
            plain = [run_case(step_s, None) for _ in range(args.repeat)]

            def median(runs: list[dict], part: str, step: str) -> float:
                return statistics.median(r[part][step] for r in runs)

            base = statistics.median(r["walls"][s] for r in plain for s in (BEFORE, FIRST, STOPPING))
            cells = []
            for step in (BEFORE, FIRST, STOPPING):
                wall = median(profiled, "walls", step)
                cells.append(f"{wall:.0f} ({wall / base:.3f}x)")
            start, stop = median(profiled, "calls", FIRST), median(profiled, "calls", STOPPING)
            walls = " ".join(f"{cell:>18}" for cell in cells)
            print(f"{step_s:>4}s {base:>11.0f} {walls} {start:>11.1f} {stop:>10.1f}")


if __name__ == "__main__":
    main()
