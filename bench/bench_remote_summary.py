"""`nrlprof summary --address` (read on the nodes) against `collect` + `summary` (copy, then read here).

    python bench/bench_remote_summary.py [--nodes 4] [--mb-per-node 100] [--traces-per-node 2]

A `ray.cluster_utils.Cluster` of N raylets on this machine, each with its own temp dir; every node holds
kineto-shaped torch traces (bench_merge.py's layout, one policy rank each) in its own session dir, named by a
manifest there. Printed: the time of each way (the baseline, collect + summary, measured in the same run), the
bytes that crossed to the driver (the figures, pickled; the copied files), and how the time grows with the nodes
that hold traces (1 to N: the other nodes' manifests are put aside). "Cold": each command run as a user runs it
(`nrlprof summary --address`; `nrlprof collect --to DIR`, then `nrlprof summary DIR`), a process of its own that
joins the cluster as a new job, for which Ray starts worker processes on the nodes; "warm": summary --address and
collect called in this driver, whose workers are up (then `nrlprof summary DIR` as a command: it has no Ray). Each
is the best of two. Both ways give the same summary (checked).
The raylets share this machine's CPUs: on a real cluster each node reads on its own cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_merge import BASE_NS, _body
from local_cluster import local_cluster, node_sessions

from nrlprof.manifest import WindowRecord, append_record
from nrlprof.tools.collect.collector import collect
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.remote.summary import summarize_cluster

MANIFEST = "manifest-bench.jsonl"


def write_trace(path: Path, rank: int, node: int, body: bytes) -> None:
    pid = 40_000 + rank
    block = {"worker": "policy", "rank": rank, "steps": [3, 4], "window": "3-4", "host": f"node{node}", "pid": pid}
    head = (
        '{\n  "schemaVersion": 1,\n'
        f'  "distributedInfo": {{"rank": {rank}, "world_size": 64, "backend": "nccl"}},\n'
        f'  "nrlprof": {json.dumps({**block, "backend": "torch"})},\n'
        f'  "baseTimeNanoseconds": {BASE_NS + node * 1_234_567_000},\n  "traceEvents": [\n'
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        out.write(head.encode())
        out.write(body.replace(b"PID", str(pid).encode()))
        out.write(b'\n  ],"traceName": "bench" }')


def plant(base: Path, nodes: int, mb_per_node: float, traces_per_node: int) -> list[Path]:
    """Traces and a manifest in each node's session dir; returns each node's manifest."""
    body = _body(int(mb_per_node * 1e6 / traces_per_node))
    manifests = []
    for node, session in enumerate(node_sessions(base)):
        files = []
        for index in range(traces_per_node):
            rank = node * traces_per_node + index
            path = (
                session
                / "bench_traces"
                / "policy"
                / str(rank)
                / f"policy.rank{rank}.steps3-4.{40_000 + rank}.pt.trace.json"
            )
            write_trace(path, rank, node, body)
            files.append(str(path))
        append_record(session / "logs" / "nrlprof", WindowRecord("torch", "policy", node, [3, 4], "3-4", files=files))
        manifests.append(next((session / "logs" / "nrlprof").glob("manifest-*.jsonl")))
    return manifests


def holding(manifests: list[Path], count: int) -> None:
    """Only the first `count` nodes hold the job's files: the others' manifests put aside."""
    for index, manifest in enumerate(manifests):
        aside = manifest.with_name(manifest.name + ".aside")
        if index < count and aside.exists():
            aside.rename(manifest)
        elif index >= count and manifest.exists():
            manifest.rename(aside)


def nrlprof(address: str, *args: str) -> float:
    """Seconds of one `nrlprof` command, run as a user runs it: a process of its own that joins the cluster."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nrlprof", *args], capture_output=True, text=True,
                          env={**os.environ, "RAY_ADDRESS": address})  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"nrlprof {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started


def timed(address: str, work: Path) -> tuple[float, float, float]:
    """Best of two: summary --address; collect; summary of what collect copied."""
    remote, copy, read = [], [], []
    for _ in range(2):
        to = Path(tempfile.mkdtemp(dir=work))
        remote.append(nrlprof(address, "summary", "--address", address, "--json"))
        copy.append(nrlprof(address, "collect", "--to", str(to)))
        read.append(nrlprof(address, "summary", str(to), "--json"))
        shutil.rmtree(to, ignore_errors=True)
    return min(remote), min(copy), min(read)


def warm(address: str, work: Path) -> tuple[float, float, float, dict, dict, int, int, int]:
    """In this driver, whose job has its worker processes on every node already: the time of summary --address
    and of collect, best of two; then `nrlprof summary DIR` of the copy (a process of its own, as a user runs it);
    both summaries (to check they agree) and the bytes of figures received, of traces listed, of files copied."""
    remote, copy = [], []
    for _ in range(2):
        started = time.perf_counter()
        summary, reading = summarize_cluster()
        remote.append(time.perf_counter() - started)
        to = Path(tempfile.mkdtemp(dir=work))
        started = time.perf_counter()
        result = collect(to)
        copy.append(time.perf_counter() - started)
    read = nrlprof(address, "summary", str(to), "--json")
    local = summarize(to).to_json()
    shutil.rmtree(to, ignore_errors=True)
    return (min(remote), min(copy), read, summary.to_json(), local, reading.bytes_received, reading.bytes_listed,
            result.bytes_copied)  # fmt: skip


def without_paths(data: dict) -> str:
    text = json.dumps({k: v for k, v in data.items() if k != "directory"})
    return re.sub(r'(?<=")[^"\s]*/([^"/\s]+)(?=["\s:])', r"\1", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--mb-per-node", type=float, default=100.0)
    parser.add_argument("--traces-per-node", type=int, default=2)
    args = parser.parse_args(argv)

    with local_cluster(args.nodes, "nrlq") as (base, work, address):
        manifests = plant(base, args.nodes, args.mb_per_node, args.traces_per_node)
        summarize_cluster()  # Ray starts a worker process on every node: the first summary's cost, not counted
        print(f"{args.nodes} nodes, {args.traces_per_node} trace(s) of {args.mb_per_node / args.traces_per_node:.0f}"
              " MB per node")  # fmt: skip
        print("warm: in this driver (worker processes already up on every node); cold: each command a process")
        print(f"{'':>5} {'warm':>30} {'cold (commands)':>34}")
        print(f"{'nodes':>5} {'--address':>10} {'collect':>9} {'+summary':>9} {'--address':>10} {'collect':>9} "
              f"{'+summary':>9} {'traces MB':>10} {'figures kB':>11} {'share':>8}")  # fmt: skip
        rows = []
        for count in range(1, args.nodes + 1):
            holding(manifests, count)
            remote_w, copy_w, read_w, remote_json, local_json, received, listed, copied = warm(address, work)
            remote_c, copy_c, read_c = timed(address, work)
            if without_paths(remote_json) != without_paths(local_json):
                print("the two summaries differ", file=sys.stderr)
                return 1
            rows.append((count, remote_w, copy_w + read_w, remote_c, copy_c + read_c))
            print(f"{count:>5} {remote_w:>9.2f}s {copy_w:>8.2f}s {read_w:>8.2f}s {remote_c:>9.2f}s {copy_c:>8.2f}s "
                  f"{read_c:>8.2f}s {listed / 1e6:>10.1f} {received / 1e3:>11.1f} "
                  f"{100 * received / listed:>7.3f}%")  # fmt: skip
        first, last = rows[0], rows[-1]
        print(
            f"{last[0]} nodes: collect + summary / summary --address = {last[2] / last[1]:.2f}x warm, "
            f"{last[4] / last[3]:.2f}x cold"
        )
        print(f"from 1 to {last[0]} nodes ({last[0]}x the traces), warm: summary --address {last[1] / first[1]:.2f}x "
              f"the time, collect + summary {last[2] / first[2]:.2f}x; cold: {last[3] / first[3]:.2f}x, "
              f"{last[4] / first[4]:.2f}x")  # fmt: skip
        print(
            f"bytes to the driver: {received / 1e3:.0f} kB of figures ({100 * received / listed:.3f}% of the "
            f"{listed / 1e6:.0f} MB of traces) against {copied / 1e6:.0f} MB copied by collect"
        )
        return 0


if __name__ == "__main__":
    sys.exit(main())
