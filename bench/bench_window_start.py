"""Benchmark where the torch profiler's start-up lands: in the step before the window (warmed) or inside it (cold).

Each case runs in a fresh interpreter (the first profiler start of a process is the expensive one), with
the driver's own torch backend (the controller) and no Ray:
- warmed: window 3:5; `step(2)` warms the profiler up, `step(3)` starts the window.
- cold: window 1:3; `step(1)` starts the profiler and the window at once (nothing before step 1).
- asked: window 1:3 as cold, but the profiler started up ahead, as a window asked for has it (the worker's
  `ready_for_asked`, the controller's listener thread), before the window is handed to the gate; that start-up
  is in the "step before" column, though it runs off the step path.
- unprofiled: the same steps with nrlprof inactive.
Printed per case: how long the `step()` calls around the window start took, and the wall time of the
window's first step (the same work each step) against the unprofiled step.

    python bench/bench_window_start.py [--repeat 5]
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

def work():
    x = torch.ones(256, 256)
    for _ in range(20):
        x = x @ x / 256
    return x

step_calls, step_walls = {}, {}
if os.environ.get("BENCH_START_UP_AHEAD"):
    from nrlprof.backends.torch_profiler import start_up_profiler

    began = time.perf_counter()
    start_up_profiler("bench")
    step_calls[0] = (time.perf_counter() - began) * 1000
for step in range(1, 7):
    began = time.perf_counter()
    nrlprof.step(step)
    step_calls[step] = (time.perf_counter() - began) * 1000
    began = time.perf_counter()
    work()
    step_walls[step] = (time.perf_counter() - began) * 1000
nrlprof.finish()
print(json.dumps({"calls": step_calls, "walls": step_walls}))
"""


def run_case(steps: str | None, directory: str, start_up_ahead: bool = False) -> dict:
    return run_torch_case(CASE, steps, directory, **({"BENCH_START_UP_AHEAD": "1"} if start_up_ahead else {}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, ...]]] = {"warmed": [], "cold": [], "asked": [], "unprofiled": []}
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(args.repeat):
            warmed = run_case("3:5", directory)
            calls, walls = warmed["calls"], warmed["walls"]
            rows["warmed"].append((calls["2"], calls["3"], walls["3"], walls["4"]))
            cold = run_case("1:3", directory)
            calls, walls = cold["calls"], cold["walls"]
            rows["cold"].append((0.0, calls["1"], walls["1"], walls["2"]))
            asked = run_case("1:3", directory, start_up_ahead=True)
            calls, walls = asked["calls"], asked["walls"]
            rows["asked"].append((calls["0"], calls["1"], walls["1"], walls["2"]))
            plain = run_case(None, directory)
            calls, walls = plain["calls"], plain["walls"]
            rows["unprofiled"].append((calls["2"], calls["3"], walls["3"], walls["4"]))
    base = statistics.median(r[2] for r in rows["unprofiled"])
    print(f"torch window start, median of {args.repeat} fresh processes (ms; the same work in every step)")
    header = ("case", "step before", "window start", "1st step wall", "2nd step wall", "1st vs unprofiled")
    print("{:<11} {:>12} {:>13} {:>14} {:>14} {:>18}".format(*header))
    for case, values in rows.items():
        before, start, first, second = (statistics.median(v[i] for v in values) for i in range(4))
        print(f"{case:<11} {before:>12.2f} {start:>13.2f} {first:>14.2f} {second:>14.2f} {first / base:>17.2f}x")


if __name__ == "__main__":
    main()
