"""Benchmark what the step anatomy's reader costs while a job runs: CPU per second of the job, against its calls.

    python bench/bench_anatomy_reader.py                      # 8 workers, 1 s steps, 30 s of job
    python bench/bench_anatomy_reader.py --step-s 0.3 --seconds 18

One local Ray cluster, `--workers` actors (num_cpus=0) each running one call of 0.8 of a step, one job with
NRL_STEP_ANATOMY=1: the reader process reads Ray's task events beside it. Printed: the reader process's CPU (its
own figure, `reader.jsonl`: start-up and its reads; it only waits until the GCS fills a quarter), its reads, the
driver's recorder thread's CPU (its checks of the GCS's count), each as a share of one core over the job's wall
time (target: at most 1% of a core for 8 workers with 1 s steps), the driver's CPU in `finish` (where it reads a
small job's calls itself); the driver's CPU per step against the same job without nrlprof in the same run, before;
and whether every call was recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def run_job(workers: list, steps: int, step_s: float, step_hook) -> tuple[float, float]:
    """(wall seconds, driver process CPU seconds) of `steps` steps of one call per worker."""
    import ray

    began, cpu_began = time.perf_counter(), time.process_time()
    for step in range(1, steps + 1):
        started = time.perf_counter()
        step_hook(step)
        ray.get([w.work.remote(0.8 * step_s) for w in workers])
        time.sleep(max(0.0, step_s - (time.perf_counter() - started)))
    return time.perf_counter() - began, time.process_time() - cpu_began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--step-s", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=30.0, help="the job's length with the anatomy on")
    args = parser.parse_args()
    for name in [n for n in os.environ if n.startswith(("NRL_", "NRLPROF_"))]:
        del os.environ[name]
    work = Path(tempfile.mkdtemp(prefix="bench_anatomy_reader_"))
    import ray

    import nrlprof
    from nrlprof.anatomy.files import READER_FILE, TASKS_FILE, read_lines
    from nrlprof.process import state

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")

    @ray.remote(num_cpus=0)
    class BenchWorker:
        def work(self, seconds: float) -> int:
            time.sleep(seconds)
            return 1

    workers = [BenchWorker.remote() for _ in range(args.workers)]
    ray.get([w.__ray_ready__.remote() for w in workers])
    steps = max(1, round(args.seconds / args.step_s))
    run_job(workers, 3, 0.05, lambda _: None)  # warm-up: the first calls pay imports

    _, baseline_cpu = run_job(workers, steps, args.step_s, lambda _: None)

    os.environ.update(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(work / "anatomy"))
    nrlprof.activate_from_env()
    recorder = state.session.anatomy
    wall, driver_cpu = run_job(workers, steps, args.step_s, nrlprof.step)
    finish_began, finish_cpu_began = time.perf_counter(), time.process_time()
    nrlprof.finish()
    finish_s, finish_cpu = time.perf_counter() - finish_began, time.process_time() - finish_cpu_began
    run = recorder.run_dir
    figures = read_lines(run / READER_FILE)
    reader = figures[0] if figures else {}
    calls = sum(1 for t in read_lines(run / TASKS_FILE) if t.get("method") == "work")
    thread_cpu = recorder.thread_cpu_s
    nrlprof.disable()
    ray.shutdown()

    reader_cpu = float(reader.get("process_cpu_s", 0.0))
    startup_cpu = float(reader.get("startup_cpu_s", 0.0))
    final_cpu = float(reader.get("final_cpu_s", 0.0))
    running_cpu = reader_cpu - startup_cpu - final_cpu
    result = {
        "workers": args.workers,
        "step_s": args.step_s,
        "steps": steps,
        "job_s": round(wall, 2),
        "reader_process_cpu_s": round(reader_cpu, 3),
        "reader_startup_cpu_s": round(startup_cpu, 3),
        "reader_final_cpu_s": round(final_cpu, 3),
        "reader_running_cpu_s": round(running_cpu, 3),
        "reader_reads": reader.get("reads"),
        "reader_pct_of_a_core": round(100 * reader_cpu / wall, 2),
        "reader_running_pct_of_a_core": round(100 * running_cpu / wall, 2),
        "recorder_thread_cpu_s": round(thread_cpu, 3),
        "recorder_thread_pct_of_a_core": round(100 * thread_cpu / wall, 2),
        "driver_cpu_ms_per_step": round(1000 * driver_cpu / steps, 2),
        "driver_cpu_ms_per_step_without_nrlprof": round(1000 * baseline_cpu / steps, 2),
        "finish_s": round(finish_s, 2),
        "finish_cpu_s": round(finish_cpu, 3),  # the driver's, at the job's end: the last reads, when it reads them
        "calls_recorded": calls,
        "calls_made": (3 + 2 * steps) * args.workers,  # the warm-up's, the job's without nrlprof and with
        "load_average": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
