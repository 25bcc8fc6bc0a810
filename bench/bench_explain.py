"""Benchmark `nrlprof explain`: over a long job's step anatomy, and over large torch traces against `summary`.

    python bench/bench_explain.py                               # both parts, at the issue's sizes
    python bench/bench_explain.py --part anatomy --workers 100 --steps 500     # a quick look
    python bench/bench_explain.py --part traces --trace-mb 50

anatomy: a step-anatomy run of `--workers` actors x `--steps` steps x `--calls` calls a step each (defaults 1,000 x
5,000 x 3: 15 million calls, as bench_anatomy_scale.py's job), written line by line as the recorder writes
`tasks.jsonl` (three worker groups: rollout, log-prob and training; a slow step every 97; one late rank). Timed in a
fresh process each: `explain` (the summary's reading without its anatomy view, then every rule), and the baseline,
`json.loads` of every line with nothing kept (the least a line reader does). Targets: at most 30 s and 1 GB
(peak RSS of the process tree: the reader processes too).

traces: `--trace-files` torch traces of `--trace-mb` MB each (defaults 8 x 200 MB; bench_merge's generator), each
rank its own file: `explain` against `summary --json` on the same files in the same run, each `--repeat` times,
alternated (target: no slower, as explain uses summary's figures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
JOB = "01000000"
NODE = "aa" * 28
T0 = 1_790_000_000_000_000_000
STEP_NS = 1_000_000_000
GROUPS = (  # (worker, share of the workers, methods with their start and end in a step, as shares of it)
    ("vllm_generation_worker", 0.5, (("generate", 0.02, 0.55),)),
    ("dtensor_policy_worker", 0.5, (("get_logprobs", 0.56, 0.66), ("train", 0.67, 0.97))),
)
LINE = (  # as the reader writes a finished call the driver made (anatomy.events)
    '{"actor_id":"%s","kind":"call","class":"%s","method":"%s","start_ns":%d,"end_ns":%d,"task_start_ns":%d,'
    '"task_end_ns":%d,"node_id":"' + NODE + '","pid":%d,"submitted_ns":%d,"running_ns":%d,"finished_ns":%d}\n'
)


def write_anatomy(run: Path, workers: int, steps: int, calls: int) -> int:
    """The run's files; returns the calls written."""
    import orjson

    run.mkdir(parents=True)
    (run / "meta.jsonl").write_bytes(orjson.dumps({"job_id": JOB, "driver_node_id": NODE, "pid": 1}) + b"\n")
    marks = [{"step": s, "t_ns": T0 + (s - 1) * STEP_NS} for s in range(1, steps + 1)]
    marks.append({"finish": True, "t_ns": T0 + steps * STEP_NS})
    (run / "steps.jsonl").write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in marks))
    actors = []
    for index in range(workers):
        group = GROUPS[0] if index < workers * GROUPS[0][1] else GROUPS[1]
        rank = index if group is GROUPS[0] else index - int(workers * GROUPS[0][1])
        actors.append((f"{index:024x}{JOB}", group, rank))
    (run / "actors.jsonl").write_bytes(b"".join(
        orjson.dumps({"actor_id": a, "worker": g[0], "rank": r, "class": "X"}) + b"\n" for a, g, r in actors
    ))  # fmt: skip
    written = 0
    with open(run / "tasks.jsonl", "w") as out:
        for step in range(1, steps + 1):
            base = T0 + (step - 1) * STEP_NS
            slow = 2.0 if step % 97 == 0 else 1.0
            lines = []
            for index, (actor, (worker, _, methods), rank) in enumerate(actors):
                for position, (method, begin, end) in enumerate(methods):
                    share = calls // len(methods) + (position < calls % len(methods))  # `calls` in all
                    for k in range(max(1, share)):
                        start = base + int(begin * STEP_NS) + k * 1000 + rank * 100
                        stop = base + int(end * STEP_NS * (slow if method == "train" else 1.0)) // 1
                        stop = min(stop, base + STEP_NS - 1000) - (200_000 if rank == 3 else 0)
                        written += 1
                        times = (start, stop, start - 1000, stop + 1000, 1000 + index, start - 90_000, start - 2000)
                        lines.append(LINE % (actor, worker, method, *times, stop + 90_000))
            out.write("".join(lines))
    return written


def _child(kind: str, source: str) -> None:
    sys.path.insert(0, str(ROOT))
    started = time.perf_counter()
    if kind == "explain":
        from nrlprof.tools.advice.explain import explain
        from nrlprof.tools.advice.phases import phase_map
        from nrlprof.tools.figures.summarize import summarize

        result = explain(summarize(Path(source), nsys="", anatomy_view=False), phase_map())
        detail = f"{len(result.findings)} findings: " + ", ".join(f.kind for f in result.findings[:4])
    elif kind == "summary":
        from nrlprof.tools.figures.summarize import summarize

        data = summarize(Path(source), nsys="").to_json()
        detail = f"{len(data['workers'])} worker ranks"
    else:  # json.loads of every line
        count = 0
        for path in Path(source).rglob("tasks.jsonl"):
            with open(path, "rb") as handle:
                for line in handle:
                    json.loads(line)
                    count += 1
        detail = f"{count:,} lines"
    print(json.dumps({"seconds": time.perf_counter() - started, "detail": detail}))


def measure(kind: str, source: Path) -> dict:
    """In a fresh process, its tree's peak RSS sampled from /proc every 20 ms (bench_merge's sampler)."""
    from bench_merge import _process_tree, _sample

    child = subprocess.Popen([sys.executable, __file__, "--child", kind, str(source)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    peak = 0
    while child.poll() is None:
        peak = max(peak, _sample(_process_tree(child.pid))[0])
        time.sleep(0.02)
    out, err = child.communicate()
    if child.returncode != 0:
        sys.exit(f"{kind} failed:\n{err}")
    return {**json.loads(out.splitlines()[-1]), "peak_mb": peak / 1e6}


def show(label: str, result: dict, baseline: dict | None = None) -> None:
    ratio = f" ({result['seconds'] / baseline['seconds']:.2f}x the baseline's time)" if baseline else ""
    print(f"  {label:10s} {result['seconds']:7.1f} s  peak {result['peak_mb']:7.0f} MB{ratio}  {result['detail']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("anatomy", "traces", "both"), default="both")
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=3, help="calls a step each worker makes (default: 3)")
    parser.add_argument("--trace-files", type=int, default=8)
    parser.add_argument("--trace-mb", type=float, default=200.0)
    parser.add_argument("--repeat", type=int, default=2, help="runs of summary and explain over the traces")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-explain-") as tmp:
        if args.part in ("anatomy", "both"):
            run = Path(tmp) / "anatomy" / "step_anatomy" / "run-20260101T000000Z-1"
            began = time.perf_counter()
            calls = write_anatomy(run, args.workers, args.steps, args.calls)
            size = (run / "tasks.jsonl").stat().st_size
            print(f"anatomy: {args.workers:,} workers x {args.steps:,} steps, {calls:,} calls, tasks.jsonl "
                  f"{size / 1e9:.2f} GB, written in {time.perf_counter() - began:.0f} s; load "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
            baseline = measure("json.loads", run.parent.parent)
            result = measure("explain", run.parent.parent)
            show("json.loads", baseline)
            show("explain", result, baseline)
            print(f"  target: explain <= 30 s and <= 1,000 MB: {result['seconds']:.1f} s, {result['peak_mb']:.0f} MB")
            import shutil

            shutil.rmtree(run.parent.parent)
        if args.part in ("traces", "both"):
            from bench_merge import generate

            began = time.perf_counter()
            traces = generate(Path(tmp) / "traces", args.trace_files, args.trace_mb)
            total = sum(p.stat().st_size for p in traces) / 1e6
            print(f"traces: {len(traces)} x {args.trace_mb:.0f} MB ({total:.0f} MB), written in "
                  f"{time.perf_counter() - began:.0f} s")  # fmt: skip
            runs: dict[str, list[dict]] = {"summary": [], "explain": []}
            for _ in range(args.repeat):  # alternated: neither always reads from a warmer page cache
                for kind in runs:
                    runs[kind].append(measure(kind, Path(tmp) / "traces"))
            summary, result = (min(runs[k], key=lambda r: r["seconds"]) for k in ("summary", "explain"))
            show("summary", summary)
            show("explain", result, summary)
            print(f"  (the fastest of {args.repeat} runs each, with its peak)")


if __name__ == "__main__":
    main()
