"""Benchmark a window's start and stop in a matched worker whose work runs in child processes, against the same
work in a worker without children.

Each case is a fresh interpreter acting as a matched worker (its Session activated as a Ray worker's is; no Ray
cluster, so the figures are nrlprof's own, without Ray's call): either it does the step's work itself (`--work`
matrix products per step), or it has `--children` processes started with `multiprocessing` (spawn), each joined
to its windows as an inference engine's processes are (start-up hook, channel) and doing an equal share of that
work per step. Window actions are applied as the driver's `__ray_call__` applies them
(nrlprof.runtime.windows.dispatch.apply_in_actor), per backend:
- torch: the torch profiler in every process, warmed up the step before as the gate does it; start is the
  window's first step, stop writes every process's trace. The work, and so the trace, divides among the
  children: this is the issue's target (within 1.5x of the worker without children).
- memory: per-step host and CUDA figures, one file per process and window. That work does not divide: each of
  the 1 + children processes takes its own figures and writes its own file, so the ratio is at least the
  processes per core; the cost per child is what to read.
Cases alternate (`--repeat` fresh processes each); printed: medians of start and stop of the worker's call (ms),
their sum, that sum against the worker without children, and the added cost per child.

    python bench/bench_children.py [--children 8] [--work 400] [--windows 15] [--repeat 4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

WARM_UP_WINDOWS = 3


def work(products: int) -> None:
    import torch

    x = torch.ones(32, 32)
    for _ in range(products):
        x = torch.mm(x, x) / 32


def engine(connection) -> None:
    """An engine process: a share of the step's work per request."""
    import torch  # noqa: F401

    connection.send(os.getpid())
    while (products := connection.recv()) is not None:
        work(products)
        connection.send(products)


def case(backend: str, children: int, windows: int, products: int, directory: str) -> dict:
    from nrlprof.config.env import load_plan
    from nrlprof.launch.runtime_env import PLAN_VARIABLE, WORKER_VARIABLE, worker_descriptor
    from nrlprof.runtime.activation import activate_worker
    from nrlprof.runtime.windows.dispatch import apply_in_actor
    from nrlprof.runtime.windows.profiler import PREPARE, START, STEP, STOP, Action
    from nrlprof.workers.identity import WorkerIdentity
    from nrlprof.workers.matching import match_worker

    prefix = {"memory": "NRL_MEMORY_PROFILE", "torch": "NRL_TORCH_PROFILE"}[backend]
    plan = load_plan({
        f"{prefix}_WORKER_PATTERNS": "*generation*",
        f"{prefix}_STEP_RANGE": f"1:{2 * (windows + WARM_UP_WINDOWS) + 1}",
        f"{prefix}_DIR": os.path.join(directory, backend),
        "NRL_PROFILE_LOG_LEVEL": "WARNING",
    })  # fmt: skip
    identity = WorkerIdentity("VllmGenerationWorker", None, 0)
    os.environ[PLAN_VARIABLE] = plan.to_json()
    os.environ[WORKER_VARIABLE] = worker_descriptor(identity, match_worker(plan, identity))
    session = activate_worker(os.environ)
    import torch  # noqa: F401  (the worker has torch, as its children have)

    context = multiprocessing.get_context("spawn")
    pipes = []
    for index in range(children):
        ours, theirs = context.Pipe()
        context.Process(target=engine, args=(theirs,), name=f"EngineCore_{index}", daemon=True).start()
        pipes.append(ours)
    for pipe in pipes:
        pipe.recv()

    def step_work() -> None:
        if not pipes:
            work(products)
            return
        for pipe in pipes:
            pipe.send(products // len(pipes))
        for pipe in pipes:
            pipe.recv()

    deadline = time.monotonic() + 60
    while (len(session.children) if session.children else 0) < children and time.monotonic() < deadline:
        time.sleep(0.05)
    joined = len(session.children) if session.children else 0

    starts, stops = [], []
    for window in range(windows + WARM_UP_WINDOWS):
        first = 2 * window + 1
        kind = "memory" if backend == "memory" else "torch"
        if backend == "torch":
            apply_in_actor(None, (Action(kind, PREPARE, first, first + 1, first - 1),))
        step_work()
        began = time.perf_counter()
        apply_in_actor(None, (Action(kind, START, first, first + 1, first),))
        started = time.perf_counter()
        step_work()
        apply_in_actor(None, (Action(kind, STEP, step=first + 1),))
        step_work()
        stopping = time.perf_counter()
        apply_in_actor(None, (Action(kind, STOP),))
        stopped = time.perf_counter()
        if window >= WARM_UP_WINDOWS:
            starts.append((started - began) * 1000)
            stops.append((stopped - stopping) * 1000)
    for pipe in pipes:
        pipe.send(None)
    return {"joined": joined, "start_ms": statistics.median(starts), "stop_ms": statistics.median(stops)}


def run_case(backend: str, children: int, windows: int, products: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL", "RAY_"))}
    with tempfile.TemporaryDirectory() as directory:
        case = ["--case", backend, str(children), str(windows), str(products), directory]
        command = [sys.executable, os.path.abspath(__file__), *case]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False,
                                cwd=directory)  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"case {backend} with {children} children failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--work", type=int, default=400, help="32x32 matrix products per step, in all")
    parser.add_argument("--windows", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=4, help="fresh processes per case, alternating the cases")
    parser.add_argument("--case", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        backend, children, windows, products, directory = args.case
        print(json.dumps(case(backend, int(children), int(windows), int(products), directory)))
        return
    print(f"window start and stop in a matched worker, {os.cpu_count()} CPUs, {args.work} matrix products per step;")
    print(f"median of {args.windows} windows per process, {args.repeat} processes per case (ms)")
    print("{:<8} {:>9} {:>7} {:>9} {:>9} {:>11} {:>12} {:>10}".format(
        "backend", "children", "joined", "start", "stop", "start+stop", "vs without", "per child"))  # fmt: skip
    for backend in ("torch", "memory"):
        results: dict[int, list[dict]] = {0: [], args.children: []}
        for _ in range(args.repeat):
            for children in results:
                results[children].append(run_case(backend, children, args.windows, args.work))
        totals = {}
        for children, runs in results.items():
            start = statistics.median(r["start_ms"] for r in runs)
            stop = statistics.median(r["stop_ms"] for r in runs)
            totals[children] = start + stop
            joined = min(r["joined"] for r in runs)
            ratio = totals[children] / totals[0]
            per_child = (totals[children] - totals[0]) / children if children else 0.0
            print(f"{backend:<8} {children:>9} {joined:>7} {start:>9.2f} {stop:>9.2f} {totals[children]:>11.2f} "
                  f"{ratio:>11.2f}x {per_child:>10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
