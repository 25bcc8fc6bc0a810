"""What arming nsys for windows asked for costs a worker (NRL_NSYS_PROFILE_STEP_RANGE=on-demand), on a GPU.

A worker armed for nsys runs in an nsys session of its own from its start (`nsys launch --session-new`, as nrlprof
launches it) and collects nothing until a window is asked for; readying it for a window starts a collection in its
session (`nsys start ... --capture-range=cudaProfilerApi --capture-range-end=stop`), and the window's
cudaProfilerStart/Stop bound it. Three launches of the same CUDA step loop, each in a fresh interpreter, no Ray:
- plain: the loop as it is;
- armed: launched as nrlprof launches it, no window;
- two windows: launched so, each window's `nsys start` the step before it, then nrlprof's cudaProfilerStart/Stop.
Printed: the time from launch to the first CUDA work (what nsys adds to a worker's start), a step outside any
window against a plain step, the start and stop calls of each window (the stop blocks while nsys writes the
report), the time from the loop's end to the process's exit (nsys's own wait at exit), and the report files.

    python bench/bench_nsys_armed.py [--steps 40] [--nsys PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nrlprof.backends import backend_class
from nrlprof.config.env import nsys_on_demand_from_env
from nrlprof.config.plan import NSYS
from nrlprof.rayfix.fix import nsight_command
from nrlprof.workers.identity import WorkerIdentity

LOOP = r"""
import json, os, subprocess, sys, time
import torch
from nrlprof.backends import cuda_profiler_api

launched, steps, windows = float(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
start_command = json.loads(sys.argv[4])
cuda = torch.cuda.is_available()  # without a GPU: a smoke run under the test suite's nsys stand-in
x = torch.randn(4096, 4096, device="cuda") if cuda else torch.randn(256, 256)
sync = torch.cuda.synchronize if cuda else (lambda: None)
sync()
first_cuda = time.time() - launched
starts = {first: last for first, last in windows}
ends = set(starts.values())
step_s, calls = {}, []


def timed(what, step, call):
    began = time.perf_counter()
    error = call()
    calls.append((what, step, time.perf_counter() - began, error))


for step in range(1, steps + 1):
    began = time.perf_counter()
    if step + 1 in starts:  # the worker is readied for a window asked for before its first step
        k = sorted(starts).index(step + 1) + 1
        argv = [arg.replace("<k>", str(k)) for arg in start_command]
        timed("nsys start", step, lambda: subprocess.run(argv, capture_output=True, text=True).stderr.strip() or None)
    if step in starts:
        timed("cudaProfilerStart", step, cuda_profiler_api.start)
    for _ in range(8):
        y = x @ x
    sync()
    if step in ends:
        timed("cudaProfilerStop", step, cuda_profiler_api.stop)
    step_s[step] = time.perf_counter() - began
result = {"first_cuda_s": first_cuda, "step_s": step_s, "calls": calls, "loop_end": time.time()}
print("RESULT " + json.dumps(result), flush=True)
"""


def armed_commands(nsys: str, output: Path) -> tuple[list[str], list[str]]:
    """`nsys launch ...` as nrlprof launches a worker armed for nsys on demand, and the `nsys start` of a window."""
    backend = nsys_on_demand_from_env({"NRL_NSYS_WORKER_PATTERNS": "*", "NRL_NSYS_PROFILE_STEP_RANGE": "on-demand"})
    fragment = backend_class(NSYS).runtime_env_fragment(backend, WorkerIdentity("Worker", None, 0))
    launch = nsight_command(fragment["_nsight"], [], str(output))
    session = fragment["_nsight"]["session-new"]
    start = [nsys, "start", f"--session={session}", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
             "-o", str(output / "worker_on-demand.<k>")]  # fmt: skip
    return [nsys, *launch[1:]], start


def launch(prefix: list[str], steps: int, windows: list[tuple[int, int]], start: list[str] | None = None) -> dict:
    launched = time.time()
    done = subprocess.run(
        [*prefix, sys.executable, "-c", LOOP, str(launched), str(steps), json.dumps(windows), json.dumps(start or [])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    exited = time.time()
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the step loop failed (rc {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result = json.loads(line[len("RESULT ") :])
    result["exit_wait_s"] = exited - result["loop_end"]
    result["total_s"] = exited - launched
    return result


def outside_windows(result: dict, windows: list[tuple[int, int]]) -> list[float]:
    """Steps outside every window and the step after each window, the first three (CUDA warm-up) left out."""
    inside = {s for first, last in windows for s in range(first, last + 2)}
    return [t for s, t in result["step_s"].items() if int(s) > 3 and int(s) not in inside]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--nsys", default=shutil.which("nsys"))
    args = parser.parse_args()
    if not args.nsys:
        raise SystemExit("nsys is not on PATH: give --nsys PATH")
    windows = [(10, 12), (25, 26)]
    with tempfile.TemporaryDirectory(prefix="nrlprof-nsys-armed-") as tmp:
        output = Path(tmp)
        plain = launch([], args.steps, [])
        armed = launch(armed_commands(args.nsys, output)[0], args.steps, [])
        armed_files = sorted(p.name for p in output.glob("*.nsys-rep"))
        session_launch, start = armed_commands(args.nsys, output)
        captured = launch(session_launch, args.steps, windows, start)
        files = sorted((p.name, p.stat().st_size) for p in output.glob("*.nsys-rep"))
    plain_step = statistics.median(outside_windows(plain, []))
    version = subprocess.run([args.nsys, "--version"], capture_output=True, text=True).stdout.strip()
    shown_launch, shown_start = armed_commands("nsys", Path("<dir>"))
    print(f"nsys: {args.nsys} ({version})\nlaunch: {shlex.join(shown_launch)}\nper window: {shlex.join(shown_start)}")
    print(f"{'launch':<14}{'to first CUDA':>15}{'step (median)':>15}{'vs plain':>10}{'exit wait':>11}{'total':>9}")
    for name, result, case_windows in (("plain", plain, []), ("armed", armed, []), ("two windows", captured, windows)):
        step = statistics.median(outside_windows(result, case_windows))
        print(
            f"{name:<14}{result['first_cuda_s']:>14.2f}s{step * 1000:>13.2f}ms{step / plain_step:>9.2f}x"
            f"{result['exit_wait_s']:>10.2f}s{result['total_s']:>8.1f}s"
        )
    print(f"nsys's wait at a worker's start (armed - plain, to first CUDA): "
          f"{armed['first_cuda_s'] - plain['first_cuda_s']:.2f} s")  # fmt: skip
    for what, step, seconds, error in captured["calls"]:
        print(f"window call: {what} at step {step}: {seconds * 1000:.1f} ms" + (f" ({error})" if error else ""))
    print(f"armed, no window: files {armed_files or 'none'}")
    print("two windows: " + ", ".join(f"{name} ({size / 1e6:.1f} MB)" for name, size in files))
    if os.environ.get("NRLPROF_BENCH_JSON"):
        Path(os.environ["NRLPROF_BENCH_JSON"]).write_text(
            json.dumps({"plain": plain, "armed": armed, "windows": captured, "files": files})
        )


if __name__ == "__main__":
    main()
