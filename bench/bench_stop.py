"""Benchmark a torch window's stop across N workers against a stop written by hand in each actor, in one run.

    python bench/bench_stop.py                      # 8 and 32 workers
    python bench/bench_stop.py --workers 8 --windows 5
    python bench/bench_stop.py --wait-ms 20          # steps that also wait, as a GPU step does

One local Ray instance (2 CPUs, no dashboard). For each N, two groups of N actors doing the same torch work per step
(a few matrix products under `record_function`): by hand, each actor starts `torch.profiler.profile` (CPU) itself
and, at the stop, calls `stop()` and `export_chrome_trace()`, the driver waiting on all N; and nrlprof, the actors
matched by `NRL_TORCH_PROFILE_WORKER_PATTERNS` and windows of the same length set by `NRL_TORCH_PROFILE_STEP_RANGE`,
the stop being the `nrlprof.step()` call that closes the window (the controller's own trace included, as in a real
job). Windows alternate between the two groups; printed: the median stop of each (ms) and their ratio (target 1.1x).
nrlprof's stop is also split into the worker's own part in the step (the profiler's stop: from the records), the
controller's own trace (its profiler stop in the step; the by-hand stop has no such trace) and the rest (Ray calls).
What nrlprof does beside the next step (torch's export, the trace's check, the records: `finish_ms` of the records)
is paid for in the work that follows the stop, whose call returns once the files are final: that work's time is
printed for both groups, and a plain step's for reference. The export lets the GIL go, so it costs that work a core,
not its Python: with all-CPU steps on 2 cores (the default) the cost moves into that work; with steps that also wait
(`--wait-ms`, as a GPU step waits on its kernels) it runs inside the wait.

Ray runs its workers 15 niceness levels below the driver: on one machine of 2 cores, the driver's own work at the stop
(the controller's trace) then takes the cores from the workers' stops instead of sharing them, which a job whose
driver has a node or a core of its own never sees. `RAY_worker_niceness=0 python bench/bench_stop.py` measures them at
one niceness; the header says which.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray

WORKER_NAME = "bench_stop_worker"
WORKER_NICENESS = "RAY_worker_niceness"  # Ray's setting, read by the raylet
# Seconds each step's work waits, the GIL free, after its torch work (--wait-ms): set in the driver, read by the
# actors through the environment.
WAIT_VARIABLE = "NRLPROF_BENCH_STOP_WAIT_MS"
WAIT_S = float(os.environ.get(WAIT_VARIABLE, "0")) / 1000


def torch_work(step: int) -> int:
    import torch

    with torch.profiler.record_function(f"work.{step}"):
        x = torch.ones(64, 64)
        for _ in range(20):
            x = (x @ x).clamp_(max=1.0)
    if WAIT_S:  # what a GPU step spends waiting on its kernels, the GIL free
        time.sleep(WAIT_S)
    return step


@ray.remote(num_cpus=0)
class BenchStopWorker:
    def work(self, step: int) -> int:
        return torch_work(step)


@ray.remote(num_cpus=0)
class HandWorker:
    """Profiles itself, as a worker with its own profiling code does."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.profiler = None

    def start(self) -> None:
        import torch

        self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        self.profiler.start()

    def work(self, step: int) -> int:
        return torch_work(step)

    def stop(self, label: str) -> float:
        began = time.perf_counter()
        self.profiler.stop()
        self.profiler.export_chrome_trace(os.path.join(self.directory, f"hand.{label}.{os.getpid()}.json"))
        self.profiler = None
        return time.perf_counter() - began


def by_hand(workers: list, steps: int, label: str) -> tuple[float, float, float, float]:
    """(the driver's wait for every actor's stop, the slowest actor's own stop, the driver's CPU, the work after the
    stop), seconds."""
    ray.get([w.start.remote() for w in workers])
    for step in range(steps):
        ray.get([w.work.remote(step) for w in workers])
    began, cpu = time.perf_counter(), time.process_time()
    own = ray.get([w.stop.remote(label) for w in workers])
    stopped, cpu = time.perf_counter(), time.process_time() - cpu
    ray.get([w.work.remote(steps) for w in workers])
    return stopped - began, max(own), cpu, time.perf_counter() - stopped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, action="append", help="N (default: 8 and 32)")
    parser.add_argument("--windows", type=int, default=5, help="windows per group")
    parser.add_argument("--steps", type=int, default=3, help="steps per window")
    parser.add_argument("--wait-ms", type=float, default=0.0,
                        help="each step's work also waits this long with the GIL free, as a GPU step waits on its "
                             "kernels (default 0: all CPU)")  # fmt: skip
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child interpreter: one N
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_count(args.one, args.windows, args.steps)))
        return 0
    os.environ[WAIT_VARIABLE] = str(args.wait_ms)
    rows = []
    for count in args.workers or [8, 32]:
        command = [sys.executable, __file__, "--one", str(count), "--windows", str(args.windows)]
        result = subprocess.run([*command, "--steps", str(args.steps)], capture_output=True, text=True, check=True)
        rows.append(json.loads(result.stdout.strip().splitlines()[-1]))
    niceness = os.environ.get(WORKER_NICENESS, "15 (Ray's default)")
    waits = f"; each step's work waits {args.wait_ms:g} ms, the GIL free" if args.wait_ms else ""
    print(f"torch window stop across N workers ({args.windows} windows of {args.steps} steps each; 2 cores; "
          f"workers' niceness {niceness}{waits})")  # fmt: skip
    print(f"{'workers':>8} {'by hand':>10} {'nrlprof':>10} {'ratio':>7}  {'in the actor: hand / nrlprof':>30}"
          f"  {'driver CPU: hand / nrlprof':>28}  {'controller trace':>16}  target")  # fmt: skip
    for row in rows:
        print(
            f"{row['workers']:>8} {row['hand_ms']:>8.1f}ms {row['nrlprof_ms']:>8.1f}ms {row['ratio']:>6.2f}x"
            f"  {row['hand_own_ms']:>14.1f} / {row['nrlprof_own_ms']:<13.1f}"
            f"  {row['hand_driver_cpu_ms']:>12.1f} / {row['nrlprof_driver_cpu_ms']:<13.1f}"
            f"  {row['controller_own_ms']:>14.1f}ms  1.1x"
        )
    print("the work after the stop (ms; nrlprof's returns once the files are final) and what was done beside it")
    print(f"{'workers':>8} {'plain step':>11} {'by hand':>10} {'nrlprof':>10} {'ratio':>7}  "
          f"{'finish beside: workers / controller (slowest, ms)':>50}")  # fmt: skip
    for row in rows:
        print(
            f"{row['workers']:>8} {row['plain_work_ms']:>9.1f}ms {row['hand_after_ms']:>8.1f}ms"
            f" {row['nrlprof_after_ms']:>8.1f}ms {row['nrlprof_after_ms'] / row['hand_after_ms']:>6.2f}x"
            f"  {row['nrlprof_finish_ms']:>27.1f} / {row['controller_finish_ms']:<10.1f}"
        )
    return 0


def run_count(count: int, windows: int, steps: int) -> dict:
    """Both groups of N actors on one Ray instance, their windows alternating."""
    directory = Path(tempfile.mkdtemp(prefix="nrlprof-bench-stop-"))
    starts = [1000 + (steps + 2) * index for index in range(windows)]
    os.environ.update(
        NRL_TORCH_PROFILE_WORKER_PATTERNS=WORKER_NAME,
        NRL_TORCH_PROFILE_STEP_RANGE=",".join(f"{s}:{s + steps}" for s in starts),
        NRL_TORCH_PROFILE_DIR=str(directory / "traces"),
        NRL_STEP_ANATOMY="0",
    )
    import nrlprof  # after the variables: it activates at import
    from nrlprof.layout import CONTROLLER

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        matched = [BenchStopWorker.remote() for _ in range(count)]
        hand = [HandWorker.remote(str(directory)) for _ in range(count)]
        ray.get([w.work.remote(0) for w in matched] + [w.work.remote(0) for w in hand])
        by_hand(hand, 1, "warm")  # the profiler's once-per-process start-up, off the figures
        hand_stops, hand_own, hand_cpu, hand_after, stops, stop_cpu, after, plain = [], [], [], [], [], [], [], []
        for first in starts:
            for step in range(first - 2, first + steps + 1):
                began, cpu = time.perf_counter(), time.process_time()
                nrlprof.step(step)
                stepped = time.perf_counter()
                if step == first + steps:
                    stops.append(stepped - began)
                    stop_cpu.append(time.process_time() - cpu)
                ray.get([w.work.remote(step) for w in matched])
                if step == first + steps:
                    after.append(time.perf_counter() - stepped)
                elif step == first - 2:
                    plain.append(time.perf_counter() - stepped)
            waited, own, cpu, work_after = by_hand(hand, steps, str(first))
            hand_stops.append(waited)
            hand_own.append(own)
            hand_cpu.append(cpu)
            hand_after.append(work_after)
        nrlprof.finish()
        session_dir = Path(ray._private.worker.global_worker.node.get_session_dir_path())
        own_stops = _own_stops_ms(session_dir, WORKER_NAME)
        controller_stops = _own_stops_ms(session_dir, CONTROLLER)
        own_finishes = _own_stops_ms(session_dir, WORKER_NAME, "finish_ms")
        controller_finishes = _own_stops_ms(session_dir, CONTROLLER, "finish_ms")
    finally:
        ray.shutdown()
        shutil.rmtree(directory, ignore_errors=True)
    hand_ms = statistics.median(hand_stops) * 1000
    nrlprof_ms = statistics.median(stops) * 1000
    return {
        "workers": count,
        "hand_ms": hand_ms,
        "nrlprof_ms": nrlprof_ms,
        "ratio": nrlprof_ms / hand_ms,
        "hand_own_ms": statistics.median(hand_own) * 1000,
        "nrlprof_own_ms": statistics.median(own_stops) if own_stops else float("nan"),
        "controller_own_ms": statistics.median(controller_stops) if controller_stops else float("nan"),
        "hand_driver_cpu_ms": statistics.median(hand_cpu) * 1000,
        "nrlprof_driver_cpu_ms": statistics.median(stop_cpu) * 1000,
        "plain_work_ms": statistics.median(plain) * 1000,
        "hand_after_ms": statistics.median(hand_after) * 1000,
        "nrlprof_after_ms": statistics.median(after) * 1000,
        "nrlprof_finish_ms": statistics.median(own_finishes) if own_finishes else float("nan"),
        "controller_finish_ms": statistics.median(controller_finishes) if controller_finishes else float("nan"),
    }


def _own_stops_ms(session_dir: Path, worker: str, figure: str = "stop_ms") -> list[float]:
    """Per window, the slowest stop of `worker`'s processes inside its own process (`stop_ms` of their manifest
    records, or another of their figures: `finish_ms`): the matched actors, or the controller (the driver,
    `layout.CONTROLLER`)."""
    slowest: dict[str, float] = {}
    for manifest in (session_dir / "logs" / "nrlprof").glob("manifest-*.jsonl"):
        for line in manifest.read_text().splitlines():
            record = json.loads(line)
            if record.get("worker") == worker and record.get("event") == "window":
                slowest[record["window"]] = max(slowest.get(record["window"], 0.0), record.get(figure, 0.0))
    return list(slowest.values())


if __name__ == "__main__":
    sys.exit(main())
