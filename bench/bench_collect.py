"""Throughput of `nrlprof collect` on a 3-node local Ray cluster, against a plain `shutil.copyfile` baseline.

    python bench/bench_collect.py [--mb-per-node N] [--files-per-node K] [--chunk-mib C]

Each node (a raylet with its own temp dir, all on this machine) gets K fake `.nsys-rep` files totalling N MB in
its session's `logs/nsight/`. The baseline copies the same files with `shutil.copyfile` on this machine (and,
for scale, with a Python read + sha256 + write loop); the ratio is collect's throughput over the baseline's.
"Cold" is the first collect of this driver (Ray starts worker processes on the nodes), "warm" a second one into
a fresh directory; both hash every file on its node before pulling it. A last collect with nothing changed
shows the fixed cost.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

from local_cluster import local_cluster, node_sessions

from nrlprof.tools.collect.collector import CHUNK_SIZE, CollectResult, collect

BLOCK = 4 * 1024 * 1024


def write_reports(base: Path, mb_per_node: int, files_per_node: int) -> list[Path]:
    """Random-content reports in each node's current session (random: no compression or dedup shortcut)."""
    per_file = mb_per_node * 1_000_000 // files_per_node
    paths = []
    for session in node_sessions(base):
        for index in range(files_per_node):
            path = session / "logs" / "nsight" / f"bench_{index}.nsys-rep"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as out:
                for offset in range(0, per_file, BLOCK):
                    out.write(os.urandom(min(BLOCK, per_file - offset)))
            paths.append(path)
    return paths


def baseline(paths: list[Path], to: Path) -> float:
    started = time.perf_counter()
    for index, path in enumerate(paths):
        shutil.copyfile(path, to / f"{index}-{path.name}")
    return time.perf_counter() - started


def hashing_baseline(paths: list[Path], to: Path) -> float:
    started = time.perf_counter()
    for index, path in enumerate(paths):
        digest = hashlib.sha256()
        with open(path, "rb") as source, open(to / f"{index}-{path.name}", "wb") as out:
            while block := source.read(CHUNK_SIZE):
                digest.update(block)
                out.write(block)
    return time.perf_counter() - started


def timed_collect(to: Path, chunk_size: int) -> tuple[CollectResult, float]:
    """The result and the seconds spent listing (and hashing on the nodes) before the pull began."""
    listed = []
    started = time.monotonic()
    result = collect(to, chunk_size=chunk_size, after_listing=lambda _: listed.append(time.monotonic()))
    return result, listed[0] - started


def report(label: str, total_bytes: int, seconds: float) -> float:
    rate = total_bytes / 1e6 / seconds
    print(f"{label:<34} {total_bytes / 1e6:9.1f} MB  {seconds:7.2f} s  {rate:8.1f} MB/s")
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb-per-node", type=int, default=200)
    parser.add_argument("--files-per-node", type=int, default=4)
    parser.add_argument("--chunk-mib", type=int, default=CHUNK_SIZE // (1024 * 1024))
    args = parser.parse_args(argv)

    with local_cluster(3, "nrlb", dashboard=False) as (base, work, _address):
        paths = write_reports(base, args.mb_per_node, args.files_per_node)
        total = sum(p.stat().st_size for p in paths)
        for name in ("baseline", "hashing"):
            (work / name).mkdir()
        base_rate = report("baseline shutil.copyfile", total, baseline(paths, work / "baseline"))
        report("read + sha256 + write (Python)", total, hashing_baseline(paths, work / "hashing"))

        chunk_size = args.chunk_mib * 1024 * 1024
        rates = {}
        for run in ("cold", "warm"):
            result, listing_s = timed_collect(work / run, chunk_size)
            if not result.ok or result.bytes_copied != total:
                print(f"collect failed: {result.to_json()}", file=sys.stderr)
                return 1
            rates[run] = report(f"nrlprof collect, {run}", total, result.seconds)
            print(f"{'':<4}listing + hashing on the nodes {listing_s:6.2f} s, pull {result.seconds - listing_s:6.2f} s")
        again = collect(work / "warm", chunk_size=chunk_size)
        print(f"{'re-collect, nothing changed':<34} {len(again.skipped):>6} files  {again.seconds:7.2f} s")
        print(f"chunk size {args.chunk_mib} MiB; ratio collect / shutil.copyfile: "
              f"cold {rates['cold'] / base_rate:.3f}, warm {rates['warm'] / base_rate:.3f}")  # fmt: skip
        return 0


if __name__ == "__main__":
    sys.exit(main())
