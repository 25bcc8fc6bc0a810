"""Benchmark `nrlprof summary` (per-step GPU time) against a plain read of the same files.

    python bench/bench_summary.py              # 200 MB of torch traces + an nsys SQLite export of as many events
    python bench/bench_summary.py --mb 1000    # the 1 GB case

Generates kineto-shaped torch traces (CPU ops, ProfilerStep annotations, runtime calls, kernels with
correlation ids, flow events; bench_merge's generator) split over 4 ranks, and a synthetic Nsight Systems
SQLite export (StringIds, NVTX `step <n>` ranges in the `nrlprof` domain, runtime calls, kernels and memcpys)
with as many kernels as the traces hold. Each reader runs in its own process; its wall time and peak RSS
(getrusage of that child; and of its whole process tree, sampled from /proc, the summed proportional set
size, which counts a page that a forked reader shares with its parent once, and the summed RSS, which
counts it in each) are reported:
- torch: `summarize()` of the trace directory vs `json.load` of every trace file;
- nsys: `read_capture()` of the export vs `SELECT *` of its kernel, runtime, NVTX and string tables.
Targets (DESIGN.md): summary throughput >= 5x json.load's, peak memory <= 2.5x the largest file.
`summary` reads traces in parallel (itself and a reader process per further CPU, per trace and per
32 MiB; tools.figures.trace_pool): NRLPROF_BENCH_JOBS=1 measures a single process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
RANKS = 4
EVENTS_PER_KERNEL = 5  # bench_merge's body: cpu_op, runtime call, kernel and two flow events per launch
KERNEL_NAMES = ("void at::native::vectorized_elementwise_kernel<4, at::native::mm>(int, float*)",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas")  # fmt: skip


def make_sqlite(path: Path, kernels: int) -> None:
    """An export with `kernels` kernels (one runtime call each), a memcpy per 50, a `step <n>` range per 400."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
            globalTid INTEGER, textId INTEGER, domainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL, callchainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, gridX INTEGER,
            gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER,
            registersPerThread INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
    """)
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i + 1, n) for i, n in enumerate(KERNEL_NAMES)] +
                   [(10, "cudaLaunchKernel"), (11, "cudaMemcpyAsync")])  # fmt: skip
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1790000000000000000, '', '')")
    db.execute("INSERT INTO NVTX_EVENTS VALUES (0, NULL, 75, 'nrlprof', 1, NULL, 1)")
    steps = (kernels + 399) // 400
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, 1, NULL, 1)",
                   [(s * 5_000_000, s * 5_000_000 + 4_900_000, f"step {s}") for s in range(steps)])  # fmt: skip

    def runtime_rows():
        for k in range(kernels):
            at = (k // 400) * 5_000_000 + (k % 400) * 12_000
            yield at, at + 4_000, 1, 1, k, 10, 0, None

    def kernel_rows():
        for k in range(kernels):
            at = (k // 400) * 5_000_000 + (k % 400) * 12_000 + 8_000
            yield at, at + 3_250, 0, 1, 7, k, 1, 1 + k % 3, 1 + k % 3, 256, 1, 1, 128, 1, 1, 32, 0, 0

    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, ?)", runtime_rows())
    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * 18)})", kernel_rows())
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, ?, 1, 4096, 1)",
                   [(k * 12_000 + 10_000, k * 12_000 + 10_500, k) for k in range(0, kernels, 50)])  # fmt: skip
    db.commit()
    db.close()


def _child(kind: str, source: Path) -> None:
    sys.path.insert(0, str(ROOT))
    started = time.perf_counter()
    if kind == "summary":
        from nrlprof.tools.figures.summarize import summarize

        jobs = int(os.environ.get("NRLPROF_BENCH_JOBS", "0")) or None
        data = summarize(source, nsys="", jobs=jobs).to_json()
        detail = sum(s.get("gpu_kernels", 0) for w in data["workers"] for s in w["steps"].values())
    elif kind == "json.load":
        detail = 0
        for path in sorted(source.rglob("*.pt.trace.json")):
            with open(path, "rb") as handle:
                detail += len(json.load(handle)["traceEvents"])
    elif kind == "nsys-summary":
        from nrlprof.tools.figures.nsys_capture import read_capture

        capture = read_capture(source)
        detail = sum(s.kernels for s in capture.step_gpu.values())
    else:  # plain sqlite3
        db = sqlite3.connect(source)
        detail = 0
        for table in ("StringIds", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                      "CUPTI_ACTIVITY_KIND_MEMCPY"):  # fmt: skip
            detail += len(db.execute(f"SELECT * FROM {table}").fetchall())
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "detail": detail}))


def _measure(kind: str, source: Path) -> None:
    """In a fresh process: RUSAGE_CHILDREN is this reader's alone; its process tree is sampled every 20 ms too.

    Reader processes of a forkserver may not be counted by getrusage, so the tree's summed RSS is also
    read from /proc (bench_merge's sampler).
    """
    from bench_merge import _process_tree, _sample

    child = subprocess.Popen([sys.executable, __file__, "--child", kind, str(source)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    tree_rss = tree_pss = 0
    while child.poll() is None:
        tree = _process_tree(child.pid)
        tree_rss = max(tree_rss, _sample(tree)[0])
        tree_pss = max(tree_pss, _pss(tree))
        time.sleep(0.02)
    out, err = child.communicate()
    if child.returncode != 0:
        sys.exit(f"{kind} failed:\n{err}")
    result = json.loads(out)
    result["rss"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result["tree_rss"] = max(tree_rss, result["rss"])
    result["tree_pss"] = tree_pss
    print(json.dumps(result))


def _pss(pids: list[int]) -> int:
    """Proportional set size summed over `pids`: pages a forked reader shares with its parent counted once."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                total += next(int(line.split()[1]) * 1024 for line in handle if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            continue
    return total


def measure(kind: str, source: Path) -> dict:
    run = subprocess.run([sys.executable, __file__, "--measure", kind, str(source)], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{kind} failed:\n{run.stderr}")
    return json.loads(run.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200.0, help="total size of the torch traces (default: 200)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each reader; the fastest counts")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]))
        return
    if args.measure:
        _measure(args.measure[0], Path(args.measure[1]))
        return
    from bench_merge import generate

    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-summary-") as tmp:
        traces_dir, export = Path(tmp) / "traces", Path(tmp) / "capture_3-4_4242.sqlite"
        started = time.perf_counter()
        traces = generate(traces_dir, RANKS, args.mb / RANKS)
        sizes = [p.stat().st_size for p in traces]
        total_mb = sum(sizes) / 1e6
        kernels = measure("json.load", traces_dir)["detail"] // EVENTS_PER_KERNEL
        make_sqlite(export, kernels)
        export_mb = export.stat().st_size / 1e6
        print(f"generated {len(traces)} traces, {total_mb:.0f} MB, and an export of {kernels:,} kernels, "
              f"{export_mb:.0f} MB, in {time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs")  # fmt: skip
        results = {}
        for kind, source, mb, largest in (("summary", traces_dir, total_mb, max(sizes)),
                                          ("json.load", traces_dir, total_mb, max(sizes)),
                                          ("nsys-summary", export, export_mb, export.stat().st_size),
                                          ("sqlite3", export, export_mb, export.stat().st_size)):  # fmt: skip
            runs = [measure(kind, source) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["seconds"])
            best["rss"] = max(r["rss"] for r in runs)
            best["tree_rss"] = max(r["tree_rss"] for r in runs)
            best["tree_pss"] = max(max(r["tree_pss"], r["rss"]) for r in runs)
            results[kind] = best
            print(f"{kind:13s} {best['seconds']:7.2f} s {mb / best['seconds']:7.1f} MB/s | peak RSS "
                  f"{best['rss'] / 1e6:7.1f} MB = {best['rss'] / largest:5.2f}x the largest file; all processes: "
                  f"PSS {best['tree_pss'] / 1e6:6.1f} MB = {best['tree_pss'] / largest:5.2f}x, RSS summed "
                  f"{best['tree_rss'] / largest:5.2f}x | "
                  f"{best['detail']:,} {'kernels' if 'summary' in kind else 'rows/events'}")  # fmt: skip
        torch_ratio = results["json.load"]["seconds"] / results["summary"]["seconds"]
        nsys_ratio = results["sqlite3"]["seconds"] / results["nsys-summary"]["seconds"]
        memory_ratio = results["summary"]["tree_pss"] / max(sizes)
        print(f"torch: summary {torch_ratio:.2f}x json.load's throughput (target >= 5x), peak memory of all its "
              f"processes (PSS) {memory_ratio:.2f}x the largest trace (target <= 2.5x)")  # fmt: skip
        print(f"nsys: summary {nsys_ratio:.2f}x a plain sqlite3 read's throughput")


if __name__ == "__main__":
    main()
