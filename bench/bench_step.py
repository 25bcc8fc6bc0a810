"""Benchmark `nrlprof.step`: its cost outside a window, a window start/stop in 8 workers, and a whole job.

    python bench/bench_step.py                          # every part
    python bench/bench_step.py --part fast --part job   # some parts
    python bench/bench_step.py --windows 3 --rounds 4   # quicker
    python bench/bench_step.py --part armed             # an armed job's step against the same job not armed
    python bench/bench_step.py --part armed --address HOST:PORT   # the same, joining a running cluster

Each part runs in its own interpreter, with the NRL_* variables it needs set before `import nrlprof`:

- fast: `nrlprof.step(n)` outside every window (windows at step 1e9, no Ray cluster; step anatomy off: its
  per-step cost is in bench_anatomy.py), a new step each call, against an
  empty function call, with timeit; target < 1 us per call. Also after `nrlprof.disable()`.
- window: a local Ray cluster with 8 matched actors (num_cpus=0) and the torch backend; the wall time of
  `nrlprof.step(n)` when it opens a window (the first one separately: it pays torch profiler start-up)
  and when it closes one (the traces are written then), against one `__ray_call__` round trip to the 8
  actors, the least any dispatch can cost.
- armed: an armed job (NRL_PROFILE_ON_DEMAND=1, nothing asked) against the same job not armed, each in its own
  interpreter on a local Ray cluster with 2 actors created and the first step taken (the armed one's listener polls
  Ray's KV store on its thread meanwhile); `nrlprof.step(n)` with timeit, alternating rounds; target: < 1 us more.
- job: the demo job (nrlprof.demo.job) on one cluster, twice: workers created while nrlprof is active
  (matched, but the windows at step 1e9 are never reached) with `nrlprof.step` as the step hook, and workers
  created before nrlprof was activated with a no-op hook. Rounds alternate; target: within 1%.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from figures_table import print_table

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "RESULT "
FAR_RANGE = "1000000000:1000000002"


# ---------------------------------------------------------------- parts (each in a child interpreter)


def _noop(_step: int) -> None:
    pass


def best_ns(function: Callable[[int], None], number: int, repeat: int = 7) -> float:
    """The fastest of `repeat` timeit runs, in ns per call of `function(n)` with a new step n each call."""
    steps = itertools.count(1)
    timings = timeit.repeat("f(next(steps))", globals={"f": function, "steps": steps}, number=number, repeat=repeat)
    return min(timings) / number * 1e9


def part_fast(args: argparse.Namespace, work: Path) -> dict:
    os.environ.update(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE=FAR_RANGE,
        NRL_TORCH_PROFILE_DIR=str(work / "traces"),
        NRL_STEP_ANATOMY="0",
    )
    import nrlprof

    if not nrlprof.is_active():
        raise SystemExit("the variables did not activate nrlprof")
    empty_ns = best_ns(_noop, args.iterations)
    active_ns = best_ns(nrlprof.step, args.iterations)
    nrlprof.disable()
    inactive_ns = best_ns(nrlprof.step, args.iterations)
    return {"empty_ns": empty_ns, "active_ns": active_ns, "inactive_ns": inactive_ns, "iterations": args.iterations}


def _ping(_actor: object) -> None:
    pass


def part_window(args: argparse.Namespace, work: Path) -> dict:
    window_steps = [1000 + 2 * i for i in range(args.windows)]
    os.environ.update(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="bench_worker",
        NRL_TORCH_PROFILE_STEP_RANGE=",".join(map(str, window_steps)),
        NRL_TORCH_PROFILE_DIR=str(work / "traces"),
    )
    import ray

    import nrlprof

    @ray.remote(num_cpus=0)
    class BenchWorker:
        def work(self, step: int) -> int:
            import torch

            return int((torch.ones(64, 64) @ torch.ones(64, 64)).sum()) + step

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        workers = [BenchWorker.remote() for _ in range(args.workers)]
        ray.get([w.work.remote(0) for w in workers])
        round_trip = []
        for _ in range(20):
            began = time.perf_counter()
            ray.get([w.__ray_call__.remote(_ping) for w in workers])
            round_trip.append(time.perf_counter() - began)
        starts, stops = [], []
        for step in range(window_steps[0] - 1, window_steps[-1] + 2):
            began = time.perf_counter()
            nrlprof.step(step)
            elapsed = time.perf_counter() - began
            if step in window_steps:
                starts.append(elapsed)
            elif step - 1 in window_steps:
                stops.append(elapsed)
            ray.get([w.work.remote(step) for w in workers])
        nrlprof.finish()
    finally:
        ray.shutdown()
    traces = sorted(str(p.relative_to(work)) for p in (work / "traces").rglob("*.pt.trace.json"))
    return {
        "workers": args.workers,
        "round_trip_ms": statistics.median(round_trip) * 1000,
        "first_start_ms": starts[0] * 1000,
        "start_ms": [s * 1000 for s in starts[1:]],
        "stop_ms": [s * 1000 for s in stops],
        "traces": len(traces),
    }


def part_job(args: argparse.Namespace, work: Path) -> dict:
    from nrlprof.rayfix.plugins_env import install_agent_hook

    install_agent_hook(os.environ)  # what activation does; here nrlprof activates after ray.init
    import ray

    import nrlprof
    from nrlprof.demo.job import create_workers, run_steps

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        plain = create_workers()
        os.environ.update(
            NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*,*generation*,*tensor_parallel*",
            NRL_TORCH_PROFILE_STEP_RANGE=FAR_RANGE,
            NRL_TORCH_PROFILE_DIR=str(work / "traces"),
            NRL_PROFILE_LOG_LEVEL="ERROR",
        )
        if not nrlprof.activate_from_env():
            raise SystemExit("the variables did not activate nrlprof")
        profiled = create_workers()
        run_steps(plain, 2, _noop)
        run_steps(profiled, 2, nrlprof.step)
        without, with_nrlprof = [], []
        for round_index in range(args.rounds):
            order = [(plain, _noop, without), (profiled, nrlprof.step, with_nrlprof)]
            for workers, hook, sink in order if round_index % 2 == 0 else reversed(order):
                sink.extend(r.seconds for r in run_steps(workers, args.steps, hook))
    finally:
        ray.shutdown()
    return {"rounds": args.rounds, "steps": args.steps, "without_s": without, "with_s": with_nrlprof}


def _armed_or_not(args: argparse.Namespace, work: Path, armed: bool) -> dict:
    os.environ.update(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE=FAR_RANGE,
        NRL_TORCH_PROFILE_DIR=str(work / "traces"),
        NRL_STEP_ANATOMY="0",
        NRL_PROFILE_LOG_LEVEL="WARNING",
    )
    if armed:
        os.environ["NRL_PROFILE_ON_DEMAND"] = "1"
    import ray

    import nrlprof

    @ray.remote(num_cpus=0)
    class BenchWorker:
        def work(self, step: int) -> int:
            return step

    if args.address == "local":
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    else:
        ray.init(address=args.address, logging_level="WARNING", log_to_driver=False)
    try:
        workers = [BenchWorker.remote() for _ in range(2)]
        ray.get([w.work.remote(0) for w in workers])
        nrlprof.step(1)
        time.sleep(1.0)  # the listener has written the job's card and polls
        from nrlprof.process import state

        listening = getattr(state.session, "listener", None) is not None
        step_ns = best_ns(lambda n: nrlprof.step(n + 1), args.iterations)
        empty_ns = best_ns(_noop, args.iterations)
    finally:
        ray.shutdown()
    return {"step_ns": step_ns, "empty_ns": empty_ns, "listening": listening}


def part_armed(args: argparse.Namespace, work: Path) -> dict:
    return _armed_or_not(args, work, True)


def part_unarmed(args: argparse.Namespace, work: Path) -> dict:
    return _armed_or_not(args, work, False)


PARTS = {"fast": part_fast, "window": part_window, "armed": part_armed, "unarmed": part_unarmed, "job": part_job}


def child_main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-step-") as work:
        result = PARTS[args.child](args, Path(work))
    print(RESULT_PREFIX + json.dumps(result))
    return 0


# ---------------------------------------------------------------- the parent: run parts, print the table


def run_part(part: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", part]
    for name in ("iterations", "workers", "windows", "rounds", "steps", "address"):
        command += [f"--{name}", str(getattr(args, name))]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    began = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in result.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"part {part} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    print(f"part {part}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def rows_fast(r: dict) -> list[tuple[str, str, str, str, str]]:
    overhead = r["active_ns"] - r["empty_ns"]
    return [
        (
            "step() outside a window, nrlprof active",
            f"{r['active_ns']:.0f} ns",
            f"empty call {r['empty_ns']:.0f} ns",
            f"{overhead:+.0f} ns ({r['active_ns'] / r['empty_ns']:.1f}x)",
            "< 1 us",
        ),
        (
            "step() with nrlprof inactive (disable())",
            f"{r['inactive_ns']:.0f} ns",
            f"empty call {r['empty_ns']:.0f} ns",
            f"{r['inactive_ns'] - r['empty_ns']:+.0f} ns",
            "< 1 us",
        ),
    ]


def rows_window(r: dict) -> list[tuple[str, str, str, str, str]]:
    floor = f"round trip to {r['workers']}: {r['round_trip_ms']:.1f} ms"
    start, stop = _median(r["start_ms"]), _median(r["stop_ms"])
    return [
        (
            f"window start, {r['workers']} workers + controller, first",
            f"{r['first_start_ms']:.0f} ms",
            floor,
            f"{r['first_start_ms'] / r['round_trip_ms']:.0f}x",
            "",
        ),
        (
            f"window start, later (median of {len(r['start_ms'])})",
            f"{start:.0f} ms",
            floor,
            f"{start / r['round_trip_ms']:.0f}x",
            "",
        ),
        (
            f"window stop + trace export (median of {len(r['stop_ms'])})",
            f"{stop:.0f} ms",
            floor,
            f"{stop / r['round_trip_ms']:.0f}x",
            "",
        ),
    ]


def rows_armed(args: argparse.Namespace) -> list[tuple[str, str, str, str, str]]:
    armed, unarmed = [], []
    for _ in range(args.armed_rounds):
        armed.append(run_part("armed", args))
        unarmed.append(run_part("unarmed", args))
    if not all(r["listening"] for r in armed) or any(r["listening"] for r in unarmed):
        raise SystemExit("the armed job was not listening, or the job not armed was")
    armed_ns = statistics.median(r["step_ns"] for r in armed)
    unarmed_ns = statistics.median(r["step_ns"] for r in unarmed)
    return [
        (
            f"step() outside a window, armed, listener polling (median of {len(armed)} interpreters)",
            f"{armed_ns:.0f} ns",
            f"not armed {unarmed_ns:.0f} ns",
            f"{armed_ns - unarmed_ns:+.0f} ns",
            "< +1 us",
        )
    ]


def rows_job(r: dict) -> list[tuple[str, str, str, str, str]]:
    with_s, without_s = r["with_s"], r["without_s"]
    with_ms, without_ms = _median(with_s) * 1000, _median(without_s) * 1000
    ratio = statistics.fmean(with_s) / statistics.fmean(without_s)
    return [
        (
            f"demo job step, active outside window (median of {len(with_s)})",
            f"{with_ms:.1f} ms",
            f"without nrlprof {without_ms:.1f} ms",
            f"{with_ms / without_ms:.3f}x",
            "within 1%",
        ),
        (
            "  ratio of means, 95% interval",
            f"{ratio:.3f}x",
            f"+-{1.96 * ratio * _relative_error(with_s, without_s):.3f} (cv {_cv(without_s):.0%})",
            "",
            "",
        ),
    ]


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def _relative_error(a: list[float], b: list[float]) -> float:
    """Standard error of mean(a) / mean(b), relative: how fine a difference the run can resolve."""
    return (_cv(a) ** 2 / len(a) + _cv(b) ** 2 / len(b)) ** 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", action="append", choices=[p for p in PARTS if p != "unarmed"],
                        help="parts to run (default: all)")  # fmt: skip
    parser.add_argument("--iterations", type=int, default=1_000_000, help="timeit calls per repeat (fast)")
    parser.add_argument("--workers", type=int, default=8, help="matched actors (window)")
    parser.add_argument("--windows", type=int, default=6, help="windows opened and closed (window)")
    parser.add_argument("--rounds", type=int, default=16, help="alternating rounds of the job each way (job)")
    parser.add_argument("--steps", type=int, default=20, help="steps per round (job)")
    parser.add_argument("--address", default="local", help="a running cluster to join (armed), else one of its own")
    parser.add_argument("--armed-rounds", type=int, default=3, help="interpreters each way, alternating (armed)")
    parser.add_argument("--child", choices=list(PARTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_main(args)
    rows = []
    renderers = {"fast": rows_fast, "window": rows_window, "job": rows_job}
    for part in args.part or [p for p in PARTS if p != "unarmed"]:
        rows += rows_armed(args) if part == "armed" else renderers[part](run_part(part, args))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nnrlprof.step benchmark ({os.cpu_count()} CPUs, load average {load})")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
