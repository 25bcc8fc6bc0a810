"""Benchmark `nrlprof.tools.merge.timeline.merge_traces` against a naive json.load + json.dump merge.

    python bench/bench_merge.py                      # 8 ranks x 50 MB
    python bench/bench_merge.py --ranks 2 --size-mb 5

Generates kineto-shaped traces (the text layout torch's exporter writes: CPU ops, user annotations,
CUDA runtime calls, kernels with correlation ids, ac2g flow events; 4 ranks per node, each node on its own
clock base, so half the inputs need their timestamps moved) into a temporary directory, then runs
each merge in its own process, twice over, and reports the faster run's throughput (MB of input per second)
and each merge's peak RSS, read with getrusage(RUSAGE_CHILDREN) in a fresh parent per measurement. CPU
seconds (the merge's processes together) are printed too: on a shared machine wall time says more about
the neighbours than about the merge.
Also timed, in one process: the merge, and the same merge with nothing rewritten (read, split, parse, serialise,
write; the rewriter only counts), the least this design pays whatever the rewriter does.
Targets: >= 3x the naive merge, >= 300 MB/s on 2 cores, peak RSS < 2x the largest input, and an output that is byte
for byte the same whether one process or several wrote it, run after run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_NS = 1_790_000_000_000_000_000
TARGET_MB_S = 300  # on 2 cores
RANKS_PER_NODE = 4  # kineto's clock base is shared by the processes of one host, differs across hosts

_CPU_OP = """  {
    "ph": "X",
    "cat": "cpu_op",
    "name": "aten::%s",
    "pid": PID,
    "tid": PID,
    "ts": %.3f,
    "dur": %.3f
    ,
    "args": {
      "External id": %d,"Record function id": 0, "Sequence number": %d, "Fwd thread id": 0, "Ev Idx": %d
    }
  }"""
_ANNOTATION = """  {
    "ph": "X",
    "cat": "user_annotation",
    "name": "%s",
    "pid": PID,
    "tid": PID,
    "ts": %.3f,
    "dur": %.3f
    ,
    "args": {
      "External id": %d,"Record function id": 0, "Ev Idx": %d
    }
  }"""
_RUNTIME = """  {
    "ph": "X",
    "cat": "cuda_runtime",
    "name": "cudaLaunchKernel",
    "pid": PID,
    "tid": PID,
    "ts": %.3f,
    "dur": %.3f
    ,
    "args": {
      "External id": %d,
      "cbid": 211, "correlation": %d
    }
  }"""
_KERNEL = """  {
    "ph": "X",
    "cat": "kernel",
    "name": "void at::native::vectorized_elementwise_kernel<4, at::native::%s>(int, float*)",
    "pid": 0,
    "tid": 7,
    "ts": %.3f,
    "dur": %.3f
    ,
    "args": {
      "External id": %d,
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": %d,
      "registers per thread": 32,
      "shared memory": 0,
      "blocks per SM": 0.5,
      "warps per SM": 2.0,
      "grid": [256, 1, 1],
      "block": [128, 1, 1],
      "est. achieved occupancy %%": 50
    }
  }"""
_FLOW = """  {
    "ph": "%s", "id": %d, "pid": %s, "tid": %s, "ts": %.3f,
    "cat": "ac2g", "name": "ac2g"%s
  }"""
_OPS = ("mm", "add", "mul", "copy_", "empty", "linear", "softmax", "layer_norm")


def _body(size: int) -> bytes:
    """Events of about `size` bytes, with `PID` standing for the process id."""
    parts: list[str] = []
    written, ext, step, ts = 0, 0, 1, 1_000_000.0
    while written < size:
        parts.append(_ANNOTATION % (f"ProfilerStep#{step}", ts, 5000.0, ext, ext))
        written += len(parts[-1])
        for i in range(400):
            ext += 1
            op = _OPS[i % len(_OPS)]
            for text in (
                _CPU_OP % (op, ts, 9.5, ext, ext, ext),
                _RUNTIME % (ts + 1, 4.0, ext, ext),
                _FLOW % ("s", ext, "PID", "PID", ts + 1, ""),
                _KERNEL % (op, ts + 8, 3.25, ext, ext),
                _FLOW % ("f", ext, 0, 7, ts + 8, ',\n    "bp": "e"'),
            ):
                parts.append(text)
                written += len(text)
            ts += 12.0
        step += 1
    return ",\n".join(parts).encode()


def generate(directory: Path, ranks: int, size_mb: float) -> list[Path]:
    body = _body(int(size_mb * 1e6))
    paths = []
    for rank in range(ranks):
        pid = 40_000 + rank
        node = rank // RANKS_PER_NODE
        nrlprof = {
            "worker": "policy",
            "rank": rank,
            "steps": [3, 4],
            "window": "3-4",
            "host": f"node{node}",
            "pid": pid,
        }
        head = (
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n'
            f'  "distributedInfo": {{"rank": {rank}, "world_size": {ranks}, "backend": "nccl"}},\n'
            f'  "nrlprof": {json.dumps({**nrlprof, "backend": "torch"})},\n'
            f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {BASE_NS + node * 1_234_567_000},\n'
            '  "traceEvents": [\n'
        )
        path = directory / "policy" / str(rank) / f"policy.rank{rank}.steps3-4.{pid}.pt.trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            out.write(head.encode())
            out.write(body.replace(b"PID", str(pid).encode()))
            out.write(b'\n  ],"traceName": "bench" }')
        paths.append(path)
    return paths


def naive_merge(inputs: list[Path], output: Path) -> None:
    events: list[dict] = []
    bases = {}
    for path in inputs:
        with open(path) as handle:
            trace = json.load(handle)
        bases[path] = trace.get("baseTimeNanoseconds", 0)
        events.extend(trace["traceEvents"])
    with open(output, "w") as handle:
        json.dump({"baseTimeNanoseconds": min(bases.values()), "traceEvents": events}, handle)


def _child(kind: str, source: Path, output: Path) -> None:
    sys.path.insert(0, str(ROOT))
    inputs = sorted(source.rglob("*.pt.trace.json"))
    started = time.perf_counter()
    jobs = 1
    if kind in ("merge", "merge1", "unrewritten"):
        from nrlprof.tools.merge.rewrite import TraceRewriter
        from nrlprof.tools.merge.timeline import merge_traces

        if kind == "unrewritten":  # read, split, parse, serialise and write as the merge does; only count
            TraceRewriter.rewrite = lambda self, events: setattr(self, "count", self.count + len(events))
        wanted = (int(os.environ.get("NRLPROF_BENCH_JOBS", "0")) or None) if kind == "merge" else 1
        jobs = merge_traces([source], output, jobs=wanted).jobs
    else:
        naive_merge(inputs, output)
    seconds = time.perf_counter() - started
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))  # fmt: skip
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "jobs": jobs}))


def _process_tree(root: int) -> list[int]:
    """`root` and its descendants, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
        tree.update(frontier)
    return sorted(tree)


def _sample(pids: list[int]) -> tuple[int, dict[int, float]]:
    """(RSS bytes summed over `pids`, CPU seconds of each)."""
    rss, cpu = 0, {}
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                rss += int(handle.read().split()[1]) * page
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return rss, cpu


def _measure(kind: str, source: Path, output: Path) -> None:
    """In a fresh process, so RUSAGE_CHILDREN sees this one child (and what it waited for) only.

    Worker processes of a forkserver are not this process's descendants in getrusage's sense, so the whole
    process tree is also sampled from /proc every 20 ms: peak of the summed RSS, CPU seconds of every process.
    """
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, str(source), str(output)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tree_rss, cpu_seen = 0, {}
    while child.poll() is None:
        rss, cpu = _sample(_process_tree(child.pid))
        tree_rss = max(tree_rss, rss)
        cpu_seen.update(cpu)
        time.sleep(0.02)
    out, err = child.communicate()
    if child.returncode != 0:
        sys.exit(f"{kind} failed:\n{err}")
    result = json.loads(out)
    result["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result["tree_rss_bytes"] = max(tree_rss, result["max_rss_bytes"])
    result["tree_cpu_seconds"] = max(sum(cpu_seen.values()), result["cpu_seconds"])
    print(json.dumps(result))


def measure(kind: str, source: Path, output: Path) -> dict:
    run = subprocess.run(
        [sys.executable, __file__, "--measure", kind, str(source), str(output)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--size-mb", type=float, default=50.0, help="size of each rank's trace")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each merge; the fastest counts")
    parser.add_argument("--gz", action="store_true", help="also time merge_traces to a .json.gz output")
    parser.add_argument("--jobs", type=int, default=0, help="merge_traces jobs (default: its own choice)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    if args.measure:
        _measure(args.measure[0], Path(args.measure[1]), Path(args.measure[2]))
        return
    os.environ["NRLPROF_BENCH_JOBS"] = str(args.jobs)

    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-") as tmp:
        source = Path(tmp) / "traces"
        started = time.perf_counter()
        inputs = generate(source, args.ranks, args.size_mb)
        sizes = [p.stat().st_size for p in inputs]
        total_mb, largest = sum(sizes) / 1e6, max(sizes)
        print(f"generated {len(inputs)} traces, {total_mb:.0f} MB in {time.perf_counter() - started:.1f} s")
        kinds = [("merge", "merged.json"), ("merge1", "merged.json"), ("unrewritten", "unrewritten.json"),
                 ("naive", "naive.json")]  # fmt: skip
        if args.gz:
            kinds.insert(1, ("merge", "merged.json.gz"))
        results = {}
        digests: set[str] = set()  # of every plain-JSON output of merge_traces, whatever its processes
        for kind, name in kinds:
            runs = []
            for _ in range(args.repeat):
                runs.append(measure(kind, source, Path(tmp) / name))
                if kind in ("merge", "merge1") and name == "merged.json":
                    digests.add(hashlib.sha256((Path(tmp) / name).read_bytes()).hexdigest())
                (Path(tmp) / name).unlink()
            best = min(runs, key=lambda r: r["seconds"])
            for key in ("cpu_seconds", "tree_cpu_seconds"):
                best[key] = min(r[key] for r in runs)
            for key in ("max_rss_bytes", "tree_rss_bytes"):
                best[key] = max(r[key] for r in runs)
            label = f"{kind} -> {name}" + (f" ({best['jobs']} jobs)" if kind != "naive" else "")
            results[label] = best
            print(
                f"{label:34s} {best['seconds']:6.2f} s {total_mb / best['seconds']:6.1f} MB/s | "
                f"CPU {best['tree_cpu_seconds']:6.2f} s {total_mb / best['tree_cpu_seconds']:6.1f} MB/s | "
                f"peak RSS {best['max_rss_bytes'] / 1e6:6.1f} MB ({best['max_rss_bytes'] / largest:4.2f}x), "
                f"all processes {best['tree_rss_bytes'] / 1e6:6.1f} MB ({best['tree_rss_bytes'] / largest:4.2f}x)"
            )
        fast = next(v for k, v in results.items() if k.startswith("merge -> merged.json "))
        naive = results["naive -> naive.json"]
        ratio = naive["seconds"] / fast["seconds"]
        mbps = total_mb / fast["seconds"]
        rss_ratio = fast["max_rss_bytes"] / largest
        tree_ratio = fast["tree_rss_bytes"] / largest
        load = os.getloadavg()[0]
        one = next(v for k, v in results.items() if k.startswith("merge1 -> "))
        floor = next(v for k, v in results.items() if k.startswith("unrewritten -> "))
        ceiling = total_mb / floor["seconds"] * fast["jobs"]
        print(f"speed-up over naive: {ratio:.1f}x (target >= 3x)")
        print(f"throughput: {mbps:.0f} MB/s (target >= {TARGET_MB_S} MB/s); load average {load:.1f} on "
              f"{os.cpu_count()} CPUs")  # fmt: skip
        print(f"one process: merge {total_mb / one['seconds']:.0f} MB/s, the same with nothing rewritten (read, "
              f"parse, serialise, write) {total_mb / floor['seconds']:.0f} MB/s: at most {ceiling:.0f} MB/s in "
              f"{fast['jobs']} processes without a faster parser; merge / that: {mbps / ceiling:.2f}")  # fmt: skip
        print(f"peak RSS / largest input: {rss_ratio:.2f}, all processes {tree_ratio:.2f} (target < 2)")
        same = len(digests) == 1
        print(f"output: {'byte for byte the same' if same else 'NOT the same'} in {fast['jobs']} processes and in one, "
              f"on every run ({2 * args.repeat} outputs, {len(digests)} distinct sha256)")  # fmt: skip
        ok = ratio >= 3 and mbps >= TARGET_MB_S and max(rss_ratio, tree_ratio) < 2 and same
        print("targets met" if ok else "targets NOT met")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
