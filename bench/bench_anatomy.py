"""Benchmark the step anatomy: the driver's cost per step with 64 workers and 1,000 steps, in one run.

    python bench/bench_anatomy.py                       # 64 workers, 1,000 steps per half
    python bench/bench_anatomy.py --workers 16 --steps 200

One local Ray cluster, one set of actors (num_cpus=0), one job: 500 steps without nrlprof, 1,000 steps
with NRL_STEP_ANATOMY=1 (Ray's task events read as the job goes, by the recorder's reader process), 500
more without (so a drift of the machine falls on both sides).  A step: each worker runs a method of
`--call-ms`, the driver waits for all.  Reported: mean and median step time of each half and their
difference (target: under 1% of the step time); the driver process's CPU time per step with and without
(all its threads); the recorder thread's CPU time in the driver; the reader process's CPU time (another
process, at nice 10: not the driver's cost, shown apart); the gate's step with and without the mark; and
whether every step was kept.  The reader's first read also parses the first 500 steps' events once.
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


def run_steps(workers: list, steps: int, call_s: float, step_hook, cpu: list[float] | None = None) -> list[float]:
    """Step wall times (s); the driver process's CPU seconds are appended to `cpu`."""
    import ray

    cpu_began = time.process_time()
    durations = []
    for step in range(1, steps + 1):
        began = time.perf_counter()
        step_hook(step)
        ray.get([w.work.remote(call_s) for w in workers])
        durations.append(time.perf_counter() - began)
    if cpu is not None:
        cpu.append(time.process_time() - cpu_began)
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
    from nrlprof.process import state
    from nrlprof.tools.figures.anatomy import anatomy_summary

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

    cpu_without: list[float] = []
    cpu_with: list[float] = []
    without = run_steps(workers, args.steps // 2, call_s, nrlprof.step, cpu_without)

    os.environ.update(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(work / "anatomy"))
    nrlprof.activate_from_env()
    recorder = state.session.anatomy
    with_anatomy = run_steps(workers, args.steps, call_s, nrlprof.step, cpu_with)
    mark_ns, bare_ns = gate_step_ns(state.session.gate)
    finish_began = time.perf_counter()
    nrlprof.finish()
    finish_s = time.perf_counter() - finish_began
    reads, read_s, reader_cpu_s = recorder.reads, recorder.read_s, recorder.reader_cpu_s
    thread_cpu_s = recorder.thread_cpu_s
    nrlprof.disable()
    del os.environ["NRL_STEP_ANATOMY"], os.environ["NRL_STEP_ANATOMY_DIR"]

    without += run_steps(workers, args.steps - args.steps // 2, call_s, nrlprof.step, cpu_without)
    ray.shutdown()

    model = anatomy_summary(work / "anatomy")
    kept = sum(1 for step in model["steps"].values() if sum(p["calls"] for p in step["phases"]) == args.workers)
    on, off = figures(with_anatomy), figures(without)
    driver_cpu_on_ms = 1000 * sum(cpu_with) / len(with_anatomy)
    driver_cpu_off_ms = 1000 * sum(cpu_without) / len(without)
    result = {
        "workers": args.workers,
        "steps": args.steps,
        "call_ms": args.call_ms,
        "with_anatomy": on,
        "without_nrlprof": off,
        "mean_overhead_pct": 100 * (on["mean_ms"] - off["mean_ms"]) / off["mean_ms"],
        "median_overhead_pct": 100 * (on["median_ms"] - off["median_ms"]) / off["median_ms"],
        "driver_cpu_ms_per_step_with": driver_cpu_on_ms,
        "driver_cpu_ms_per_step_without": driver_cpu_off_ms,
        "driver_cpu_extra_pct_of_step": 100 * (driver_cpu_on_ms - driver_cpu_off_ms) / on["mean_ms"],
        "recorder_thread_cpu_ms_per_step": thread_cpu_s * 1000 / args.steps,
        "recorder_thread_cpu_pct_of_step": 100 * thread_cpu_s / sum(with_anatomy),
        "reader_reads": reads,
        "reader_read_ms_total": read_s * 1000,
        "reader_process_cpu_ms_per_step": reader_cpu_s * 1000 / args.steps,
        "load_average": os.getloadavg(),
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
        f"driver process CPU: {driver_cpu_on_ms:.3f} ms per step with, {driver_cpu_off_ms:.3f} ms without "
        f"({result['driver_cpu_extra_pct_of_step']:+.2f}% of step time)"
    )
    print(
        f"recorder thread CPU in the driver: {result['recorder_thread_cpu_ms_per_step']:.4f} ms per step "
        f"({result['recorder_thread_cpu_pct_of_step']:.3f}% of step time); gate step outside windows "
        f"{mark_ns:.0f} ns with the mark, {bare_ns:.0f} ns without"
    )
    print(
        f"reader process (not the driver; nice 10): {reads} reads, {read_s * 1000:.0f} ms reading, "
        f"{result['reader_process_cpu_ms_per_step']:.3f} ms CPU per step, start-up included"
    )
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.2f}" for x in result["load_average"]))
    print(f"finish (last events): {finish_s:.1f} s; steps kept with every call: {kept} of {len(model['steps'])}")


if __name__ == "__main__":
    main()
