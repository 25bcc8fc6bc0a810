"""Benchmark the step anatomy: the driver's cost per step with 64 workers and 1,000 steps, in one run.

    python bench/bench_anatomy.py                       # 64 workers, 1,000 steps per half
    python bench/bench_anatomy.py --workers 16 --steps 200

One local Ray cluster, one set of actors (num_cpus=0), one job: 500 steps without nrlprof, 1,000 steps
with NRL_STEP_ANATOMY=1 (the recorder reads Ray's task events on its thread as the job goes), 500 more
without (so a drift of the machine falls on both sides).  A step: each worker runs a method of `--call-ms`, the driver
waits for all.  Reported: mean and median step time of each half and their difference (target: under 1%
of the step time), the recorder's own time on the driver (wall and thread CPU time of its reads of the
task events; the gate's step with and without the mark), and
whether every step was kept.  The recorder's first read also parses the first 500 steps' events once.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import tempfile
import time
import timeit
from pathlib import Path


def run_steps(workers: list, steps: int, call_s: float, step_hook) -> list[float]:
    import ray

    durations = []
    for step in range(1, steps + 1):
        began = time.perf_counter()
        step_hook(step)
        ray.get([w.work.remote(call_s) for w in workers])
        durations.append(time.perf_counter() - began)
    return durations


def gate_step_ns(gate, number: int = 200_000) -> tuple[float, float]:
    """The gate's step outside every window, in ns: with the anatomy's mark, and without."""
    probe = copy.copy(gate)  # the recorder keeps writing the real gate's marks
    probe.marks = []
    with_mark = min(timeit.repeat("step(5)", globals={"step": probe.step}, number=number, repeat=5)) / number
    probe.marks = None
    bare = min(timeit.repeat("step(5)", globals={"step": probe.step}, number=number, repeat=5)) / number
    return with_mark * 1e9, bare * 1e9


def figures(durations: list[float]) -> dict:
    return {
        "mean_ms": statistics.fmean(durations) * 1000,
        "median_ms": statistics.median(durations) * 1000,
        "steps": len(durations),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1000, help="steps with, and steps without")
    parser.add_argument("--call-ms", type=float, default=20.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_anatomy_"))
    for name in [n for n in os.environ if n.startswith(("NRL_", "NRLPROF_"))]:
        del os.environ[name]
    import ray

    import nrlprof
    from nrlprof.anatomy import anatomy_summary
    from nrlprof.runtime import state

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")

    @ray.remote(num_cpus=0)
    class BenchWorker:
        def work(self, seconds: float) -> int:
            time.sleep(seconds)
            return 1

    workers = [BenchWorker.remote() for _ in range(args.workers)]
    ray.get([w.__ray_ready__.remote() for w in workers])
    call_s = args.call_ms / 1000
    run_steps(workers, 20, call_s, lambda _: None)  # warm-up: first calls pay imports

    without = run_steps(workers, args.steps // 2, call_s, nrlprof.step)

    os.environ.update(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(work / "anatomy"))
    nrlprof.activate_from_env()
    recorder = state.session.anatomy
    with_anatomy = run_steps(workers, args.steps, call_s, nrlprof.step)
    reads, read_s, read_cpu_s = recorder.reads, recorder.read_s, recorder.read_cpu_s
    mark_ns, bare_ns = gate_step_ns(state.session.gate)
    finish_began = time.perf_counter()
    nrlprof.finish()
    finish_s = time.perf_counter() - finish_began
    nrlprof.disable()
    del os.environ["NRL_STEP_ANATOMY"], os.environ["NRL_STEP_ANATOMY_DIR"]

    without += run_steps(workers, args.steps - args.steps // 2, call_s, nrlprof.step)
    ray.shutdown()

    model = anatomy_summary(work / "anatomy")
    kept = sum(1 for step in model["steps"].values() if sum(p["calls"] for p in step["phases"]) == args.workers)
    on, off = figures(with_anatomy), figures(without)
    result = {
        "workers": args.workers,
        "steps": args.steps,
        "call_ms": args.call_ms,
        "with_anatomy": on,
        "without_nrlprof": off,
        "mean_overhead_pct": 100 * (on["mean_ms"] - off["mean_ms"]) / off["mean_ms"],
        "median_overhead_pct": 100 * (on["median_ms"] - off["median_ms"]) / off["median_ms"],
        "recorder_reads": reads,
        "recorder_read_ms_total": read_s * 1000,
        "recorder_read_ms_per_step": read_s * 1000 / args.steps,
        "recorder_read_pct_of_step": 100 * read_s / sum(with_anatomy),
        "recorder_cpu_ms_per_step": read_cpu_s * 1000 / args.steps,
        "recorder_cpu_pct_of_step": 100 * read_cpu_s / sum(with_anatomy),
        "gate_step_ns_with_mark": mark_ns,
        "gate_step_ns_without": bare_ns,
        "finish_s": finish_s,
        "steps_with_every_call": kept,
        "steps_recorded": len(model["steps"]),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.workers} workers, {args.steps} steps per half, calls of {args.call_ms} ms")
    print(f"with step anatomy : mean {on['mean_ms']:.2f} ms, median {on['median_ms']:.2f} ms per step")
    print(f"without nrlprof   : mean {off['mean_ms']:.2f} ms, median {off['median_ms']:.2f} ms per step")
    print(
        f"difference        : mean {result['mean_overhead_pct']:+.2f}%, median {result['median_overhead_pct']:+.2f}%"
        " (target < 1%)"
    )
    print(
        f"recorder on the driver: {reads} reads, {read_s * 1000:.0f} ms in all, "
        f"{result['recorder_read_ms_per_step']:.3f} ms per step "
        f"({result['recorder_read_pct_of_step']:.2f}% of step time)"
    )
    print(
        f"recorder thread CPU on the driver: {result['recorder_cpu_ms_per_step']:.3f} ms per step "
        f"({result['recorder_cpu_pct_of_step']:.2f}% of step time); gate step outside windows "
        f"{mark_ns:.0f} ns with the mark, {bare_ns:.0f} ns without"
    )
    print(f"finish (last events): {finish_s:.1f} s; steps kept with every call: {kept} of {len(model['steps'])}")


if __name__ == "__main__":
    main()
