"""Benchmark the memory backend's per-step figures on CPU, in one run.

    python bench/bench_memory.py                       # both parts
    python bench/bench_memory.py --steps 400 --rounds 3

Each part runs in its own interpreter, with the NRL_* variables it needs set before `import nrlprof`:

- figures: a MemoryBackend in this process (the controller's role), one window; per call, the time of
  `mark_step` (which closes the previous step: host RSS and its peak read from /proc, then the peak reset),
  of `_close_step` alone and of the peak reset alone. Without CUDA in the process, as on a CPU machine.
- loop: a controller-only job (no Ray cluster) of `--steps` steps of pure-Python work (a fixed amount,
  about `--work-ms`), with `nrlprof.step(n)` at each step: once with the memory backend's window over every
  step, once with nrlprof not activated (the same loop unprofiled). Rounds alternate between the two;
  medians per step, nrlprof.step's own cost and the whole step's ratio. Step anatomy is off in both, so
  the figures are the memory backend's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "RESULT "


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _rss_and_peak_from_status() -> tuple[int, int]:
    """A reference: VmRSS and VmHWM from one read of /proc/self/status (kB)."""
    rss = peak = 0
    with open("/proc/self/status", "rb") as handle:
        for line in handle:
            if line.startswith(b"VmHWM:"):
                peak = int(line.split()[1])
            elif line.startswith(b"VmRSS:"):
                rss = int(line.split()[1])
                break
    return rss, peak


def part_figures(args: argparse.Namespace, work: Path) -> dict:
    os.environ.update(
        NRL_MEMORY_PROFILE_WORKER_PATTERNS="*",
        NRL_MEMORY_PROFILE_STEP_RANGE=f"1:{args.calls + 2}",
        NRL_MEMORY_PROFILE_DIR=str(work / "memory"),
        NRL_STEP_ANATOMY="0",
    )
    from nrlprof.backends.base import ProcessRole
    from nrlprof.backends.memory import MemoryBackend, reset_host_peak
    from nrlprof.config.env import plan_from_env
    from nrlprof.config.steps import Window

    plan = plan_from_env(os.environ)
    backend = MemoryBackend(plan.backend("memory"), ProcessRole(None, plan, None))
    backend.start_window(Window(1, args.calls + 1), 1)
    marks, closes, resets, status_reads = [], [], [], []
    for step in range(2, args.calls + 2):
        began = time.perf_counter()
        backend.mark_step(step)
        marks.append(time.perf_counter() - began)
    for step in range(args.calls):
        backend.step_started = (step, time.monotonic())
        began = time.perf_counter()
        backend._close_step()
        closes.append(time.perf_counter() - began)
        began = time.perf_counter()
        reset_host_peak()
        resets.append(time.perf_counter() - began)
        began = time.perf_counter()
        _rss_and_peak_from_status()
        status_reads.append(time.perf_counter() - began)
    record = backend.stop_window()
    return {
        "calls": args.calls,
        "mark_step_us": _median_us(marks),
        "close_step_us": _median_us(closes),
        "reset_peak_us": _median_us(resets),
        "status_read_us": _median_us(status_reads),
        "mark_step_p90_us": sorted(marks)[int(len(marks) * 0.9)] * 1e6,
        "samples_written": len(json.loads(Path(record.files[0]).read_text())["steps"]),  # mark_step's + _close_step's
    }


def _work(iterations: int) -> None:
    """Pure-Python work, a fixed amount (the same in both kinds of run), allocating as a training step does."""
    for _ in range(iterations):
        sum(bytearray(4096))


def calibrate(work_ms: float) -> int:
    """Iterations of `_work` that take about `work_ms` here."""
    began, iterations = time.perf_counter(), 0
    while time.perf_counter() - began < 0.2:
        _work(100)
        iterations += 100
    return max(1, int(iterations * work_ms / 1000 / (time.perf_counter() - began)))


def part_loop(args: argparse.Namespace, work: Path) -> dict:
    if args.profiled:
        os.environ.update(
            NRL_MEMORY_PROFILE_WORKER_PATTERNS="*",
            NRL_MEMORY_PROFILE_STEP_RANGE=f"1:{args.steps + 1}",
            NRL_MEMORY_PROFILE_DIR=str(work / "memory"),
        )
    os.environ["NRL_STEP_ANATOMY"] = "0"
    import nrlprof

    if nrlprof.is_active() != args.profiled:
        raise SystemExit(f"nrlprof active: {nrlprof.is_active()}, expected {args.profiled}")
    step_calls, steps = [], []
    for step in range(1, args.steps + 1):
        began = time.perf_counter()
        nrlprof.step(step)
        called = time.perf_counter()
        _work(args.work_iterations)
        steps.append(time.perf_counter() - began)
        step_calls.append(called - began)
    began = time.perf_counter()
    nrlprof.finish()
    finish_s = time.perf_counter() - began
    files = sorted(str(p.name) for p in (work / "memory").rglob("*.memory.json")) if args.profiled else []
    return {
        "profiled": args.profiled,
        "steps": args.steps,
        "step_ms": statistics.median(steps) * 1000,
        "step_call_us": _median_us(step_calls),
        "step_call_first_us": step_calls[0] * 1e6,
        "finish_ms": finish_s * 1000,
        "files": files,
    }


PARTS = {"figures": part_figures, "loop": part_loop}


# ---------------------------------------------------------------- the parent


def run_part(name: str, extra: list[str]) -> dict:
    command = [sys.executable, __file__, "--child", name, *extra]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    raise SystemExit(f"part {name} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--part", action="append", choices=sorted(PARTS), help="parts to run (default: all)")
    parser.add_argument("--calls", type=int, default=2000, help="figures: mark_step calls (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=300, help="loop: steps per round (default: %(default)s)")
    parser.add_argument("--work-ms", type=float, default=5.0, help="loop: work per step (default: %(default)s)")
    parser.add_argument("--work-iterations", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=6, help="loop: rounds of each kind (default: %(default)s)")
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory(prefix="nrlprof-bench-memory-") as work:
            result = PARTS[args.child](args, Path(work))
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0
    parts = args.part or list(PARTS)
    if "figures" in parts:
        figures = run_part("figures", ["--calls", str(args.calls)])
        print(f"figures ({figures['calls']} steps, no CUDA in the process; medians):")
        print(f"  mark_step (close the step + reset the peak) {figures['mark_step_us']:8.1f} us"
              f"   p90 {figures['mark_step_p90_us']:.1f} us")  # fmt: skip
        print(f"  _close_step (RSS, peak from /proc)          {figures['close_step_us']:8.1f} us")
        print(f"  reset_host_peak (clear_refs)                {figures['reset_peak_us']:8.1f} us")
        print(f"  reference: RSS and peak in one read of /proc/self/status {figures['status_read_us']:.1f} us")
        if figures["samples_written"] != 2 * figures["calls"]:
            print(f"  warning: {figures['samples_written']} samples written for {figures['calls']} steps")
    if "loop" in parts:
        loop = ["--steps", str(args.steps), "--work-iterations", str(calibrate(args.work_ms))]
        profiled, plain = [], []
        for _ in range(args.rounds):
            profiled.append(run_part("loop", [*loop, "--profiled"]))
            plain.append(run_part("loop", loop))
        p_step = statistics.median(r["step_ms"] for r in profiled)
        u_step = statistics.median(r["step_ms"] for r in plain)
        p_call = statistics.median(r["step_call_us"] for r in profiled)
        u_call = statistics.median(r["step_call_us"] for r in plain)
        print(f"controller-only loop ({args.steps} steps of {args.work_ms} ms work, {args.rounds} rounds each):")
        print(f"  step, memory window over every step  {p_step:8.3f} ms   nrlprof.step {p_call:7.1f} us")
        print(f"  step, unprofiled                     {u_step:8.3f} ms   nrlprof.step {u_call:7.1f} us")
        ratios = sorted(p["step_ms"] / u["step_ms"] for p, u in zip(profiled, plain, strict=True))
        print(f"  nrlprof.step's own cost with the window  +{p_call - u_call:.1f} us per step"
              f" = {100 * (p_call - u_call) / 1000 / u_step:.2f}% of an unprofiled step")  # fmt: skip
        print(f"  whole step, profiled / unprofiled        {p_step / u_step:.4f}"
              f"   (per round pair: {', '.join(f'{r:.3f}' for r in ratios)}; noisy on a shared machine)")  # fmt: skip
        print(f"  window stop (figures written): {statistics.median(r['finish_ms'] for r in profiled):.1f} ms;"
              f" first step (window start): {statistics.median(r['step_call_first_us'] for r in profiled):.0f} us;"
              f" files per run: {len(profiled[0]['files'])}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
