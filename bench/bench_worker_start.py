"""Benchmark what a Ray worker spends on CPU before its first call, with and without nrlprof configured.

    python bench/bench_worker_start.py                 # 6 actors a case
    python bench/bench_worker_start.py --actors 12

Each case is a driver of its own that starts its own local Ray cluster (2 CPUs, no dashboard), creates actors no
pattern matches (what most workers of a profiled job are, and each a possible controller) and asks each for the CPU
its process has used (user + system, across the exec from Ray's `setup_worker.py` to its worker):
- plain: no NRL_* variable;
- nrlprof: NRL_* variables set, so every worker takes the driver's plan (nrlprof hands it down the environment the
  raylet inherits);
- runtime_env: the same, plus a job runtime_env with one env_var: what each worker of a job with a runtime_env pays
  (Ray starts it through `setup_worker.py`), as every worker did when nrlprof sent the plan in the runtime_env, and
  as a driver that joins a `ray start` cluster still does.
Printed: the median CPU of a worker per case, and its ratio to the plain one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRIVER = """
import json, os, sys
import ray

@ray.remote(num_cpus=0)
class Worker:
    def cpu_s(self):
        used = os.times()
        return used.user + used.system

runtime_env = {"env_vars": {"NRLPROF_BENCH_CASE": "runtime_env"}} if sys.argv[1] == "runtime_env" else None
ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", runtime_env=runtime_env)
workers = [Worker.remote() for _ in range(int(sys.argv[2]))]
print("CPU " + json.dumps(ray.get([w.cpu_s.remote() for w in workers], timeout=600)))
ray.shutdown()
"""

NRL_VARIABLES = {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_TORCH_PROFILE_STEP_RANGE": "2"}


def run_case(case: str, actors: int, scratch: Path) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_", "RAY_ADDRESS"))}
    if case != "plain":
        env |= NRL_VARIABLES | {"NRL_TORCH_PROFILE_DIR": str(scratch / case), "NRL_STEP_ANATOMY": "0"}
    done = subprocess.run([sys.executable, "-c", DRIVER, case, str(actors)], env=env, capture_output=True, text=True,
                          timeout=900, cwd=scratch)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("CPU ")]
    if not lines:
        raise SystemExit(f"case {case} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("CPU "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=6)
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-start-") as scratch:
        medians = {}
        for case in ("plain", "nrlprof", "runtime_env"):
            medians[case] = statistics.median(run_case(case, args.actors, Path(scratch)))
    print(f"a worker's CPU before its first call ({args.actors} actors a case, median; {os.cpu_count()} cores)")
    for case, seconds in medians.items():
        print(f"  {case:12s} {seconds:6.2f} s   {seconds / medians['plain']:4.2f}x plain")


if __name__ == "__main__":
    main()
