"""Benchmark a job armed for slow steps: what `slow` costs a step while nothing is slow, and what `slow:keep` (every
step recorded, the slow ones kept) costs a step against no profiler and against a torch profiler on every step.

    python bench/bench_slow.py                     # both parts
    python bench/bench_slow.py --part armed        # NRL_TORCH_PROFILE_STEP_RANGE=slow on 100 ms steps, against none
    python bench/bench_slow.py --part keep --rounds 2 --steps 30

One local Ray cluster; each case is a job of its own, run by a child interpreter with its NRL_* variables set before
`import nrlprof`, cases alternating round by round. A job's driver calls 2 matched actors each step (`train`, on the
`*policy*` pattern) and waits for them; its first WARM_UP steps are not measured (workers starting, torch's start-up).
Figures per case: the median step wall time as the driver sees it (`nrlprof.step(n)` and the calls), and the driver's
CPU per step (every thread: the call clock's too). NRL_PROFILE_SLOW_FACTOR=100 in the armed cases keeps every verdict
`not slow` (the same work as a verdict that finds nothing), so what is measured is the cost while nothing is slow.

- armed: steps of 100 ms (each actor sleeps 100 ms): nrlprof not configured, against `slow` (the gate's verdict, the
  call hook timing each call, the thread that sees them complete). Target: at most 1% more per step.
- keep: steps of 150 ms with a few torch ops (each actor: 20 matrix products of 64x64, then sleeps to 150 ms): no
  profiler, against `slow:keep` (a torch session per step in each actor and the controller, dropped unread), and
  against one torch window over every step (NRL_TORCH_PROFILE_STEP_RANGE covering the run). Target: `slow:keep` at
  most 1.5x the step with no profiler.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from figures_table import print_table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
RESULT_PREFIX = "RESULT "
WARM_UP = 8
TORCH_OPS = 20

CASES = {
    "armed": {
        "none": {},
        "slow": {
            "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
            "NRL_TORCH_PROFILE_STEP_RANGE": "slow",
            "NRL_PROFILE_SLOW_FACTOR": "100",
        },
    },
    "keep": {
        "none": {},
        "slow:keep": {
            "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
            "NRL_TORCH_PROFILE_STEP_RANGE": "slow:keep",
            "NRL_PROFILE_SLOW_FACTOR": "100",
        },
        "torch every step": {
            "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
            "NRL_TORCH_PROFILE_STEP_RANGE": "1:100000",
        },
    },
}
STEP_S = {"armed": 0.100, "keep": 0.150}


# ---------------------------------------------------------------- one job (a child interpreter)


def child_main(part: str, steps: int) -> int:
    import ray

    import nrlprof

    @ray.remote(num_cpus=0)
    class PolicyWorker:
        def train(self, step: int, seconds: float, torch_ops: int) -> int:
            began = time.perf_counter()
            if torch_ops:
                import torch

                x = torch.ones(64, 64)
                for _ in range(torch_ops):
                    x = x @ x / 64
            time.sleep(max(0.0, seconds - (time.perf_counter() - began)))
            return step

    ray.init(logging_level="ERROR", log_to_driver=False)  # RAY_ADDRESS: the benchmark's cluster
    torch_ops = TORCH_OPS if part == "keep" else 0
    workers = [PolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
    walls, cpu_began = [], 0.0
    for step in range(1, WARM_UP + steps + 1):
        if step == WARM_UP + 1:
            cpu_began = time.process_time()
        began = time.perf_counter()
        nrlprof.step(step)
        ray.get([w.train.remote(step, STEP_S[part], torch_ops) for w in workers])
        if step > WARM_UP:
            walls.append(time.perf_counter() - began)
    cpu_s = time.process_time() - cpu_began
    from nrlprof.process import state

    session = state.session
    gate = session.built_gate() if session is not None else None
    triggers = len(gate.slow.triggers) if gate is not None and gate.slow is not None else 0
    nrlprof.finish()
    ray.shutdown()
    print(RESULT_PREFIX + json.dumps({"walls": walls, "cpu_ms_per_step": cpu_s / steps * 1000, "triggers": triggers}))
    return 0


# ---------------------------------------------------------------- the parent


def run_case(part: str, case: str, steps: int, address: str, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_", "RAY_ADDRESS"))}
    env.update(CASES[part][case], RAY_ADDRESS=address, NRL_TORCH_PROFILE_DIR=str(work / "traces"),
               NRL_STEP_ANATOMY="0", PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))  # fmt: skip
    if not CASES[part][case]:
        env.pop("NRL_TORCH_PROFILE_DIR")
        env.pop("NRL_STEP_ANATOMY")
    command = [sys.executable, __file__, "--child", part, "--steps", str(steps)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=work)
    lines = [line for line in result.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"{part} {case} failed ({result.returncode}):\n{result.stdout}\n{result.stderr[-4000:]}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def run_part(part: str, args: argparse.Namespace, address: str, work: Path) -> list[tuple[str, ...]]:
    walls: dict[str, list[float]] = {case: [] for case in CASES[part]}
    cpu: dict[str, list[float]] = {case: [] for case in CASES[part]}
    triggers = 0
    for _ in range(args.rounds):
        for case in CASES[part]:
            result = run_case(part, case, args.steps, address, work)
            walls[case] += result["walls"]
            cpu[case].append(result["cpu_ms_per_step"])
            triggers += result["triggers"]
    base_ms = statistics.median(walls["none"]) * 1000
    rows = []
    for case in CASES[part]:
        ms = statistics.median(walls[case]) * 1000
        target = {"slow": "<= 1.01x", "slow:keep": "<= 1.5x"}.get(case, "")
        rows.append((f"{part}: {case} ({len(walls[case])} steps of {STEP_S[part] * 1000:.0f} ms)", f"{ms:.2f} ms",
                     f"no nrlprof {base_ms:.2f} ms", f"{ms / base_ms:.4f}x", target))  # fmt: skip
        rows.append((f"  driver CPU per step, median of {args.rounds}", f"{statistics.median(cpu[case]):.2f} ms",
                     f"no nrlprof {statistics.median(cpu['none']):.2f} ms",
                     f"{statistics.median(cpu[case]) - statistics.median(cpu['none']):+.2f} ms", ""))  # fmt: skip
    if triggers:
        rows.append((f"  {triggers} step(s) found slow despite NRL_PROFILE_SLOW_FACTOR=100: figures distorted", "", "",
                     "", ""))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", action="append", choices=list(CASES), help="parts to run (default: both)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every case once, in turn")
    parser.add_argument("--steps", type=int, default=60, help="measured steps per case and round")
    parser.add_argument("--child", choices=list(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_main(args.child, args.steps)
    from local_cluster import local_cluster

    rows = []
    with local_cluster(1, "nrlprof-bench-slow-", dashboard=False) as (_base, work, address):
        for part in args.part or list(CASES):
            rows += run_part(part, args, address, work)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nslow-step benchmark ({os.cpu_count()} CPUs, load average {load})")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
