"""Several traces read at once (tools.trace_pool): this process and reader processes, same answer as one."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from helpers.traces import gpu_trace, kineto_text

from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.figures.trace_pool import (
    PER_JOB_BYTES,
    READER_DIED,
    default_jobs,
    read_one,
    read_traces,
    split_work,
)
from nrlprof.tools.figures.trace_stats import TraceStats
from nrlprof.tools.read import traces
from nrlprof.tools.read.pool import start_context
from nrlprof.tools.read.traces import TraceHeader, find_traces


def write_run(root: Path, steps_per_rank: list[int]) -> Path:
    """Policy ranks with the given number of steps each (so files of different sizes), in kineto's layout."""
    for rank, count in enumerate(steps_per_rank):
        trace = gpu_trace(rank=rank, pid=1000 + rank, steps=tuple(range(1, count + 1)))
        path = root / "policy" / str(rank) / f"policy.rank{rank}.steps1-{count}.{1000 + rank}.pt.trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kineto_text(trace))
    return root


def headers_of(root: Path) -> list[TraceHeader]:
    return sorted(find_traces([root])[0], key=TraceHeader.sort_key)


@pytest.mark.parametrize("jobs", [2, 3])
def test_reader_processes_give_what_one_process_gives(tmp_path, jobs):
    root = write_run(tmp_path / "run", [40, 5, 25, 60, 10])
    broken = root / "policy" / "9" / "policy.rank9.steps1-2.1009.pt.trace.json"
    broken.parent.mkdir()
    broken.write_text(kineto_text(gpu_trace(rank=9, pid=1009))[:-400])  # cut short
    odd = gpu_trace(rank=8, pid=1008)
    odd["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": [1], "tid": 1, "ts": 1.0, "dur": 1.0})
    strange = root / "policy" / "8" / "policy.rank8.steps3-4.1008.pt.trace.json"
    strange.parent.mkdir()
    strange.write_text(kineto_text(odd))
    alone = summarize(root, nsys="", jobs=1).to_json()
    together = summarize(root, nsys="", jobs=jobs).to_json()
    assert together == alone
    assert [(s["path"], s["reason"].split(" (")[0]) for s in together["skipped"]] == [
        (str(strange), "unexpected content"),
        (str(broken), "not valid JSON, or cut short"),
    ]
    assert {w["rank"]: len(w["steps"]) for w in together["workers"]} == {0: 40, 1: 5, 2: 25, 3: 60, 4: 10}


def test_readers_come_from_a_forkserver_when_this_process_has_another_thread(tmp_path):
    root = write_run(tmp_path / "run", [30, 5, 20])
    alone = summarize(root, nsys="", jobs=1).to_json()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert start_context("nrlprof.tools.figures.trace_pool").get_start_method() == "forkserver"
        assert summarize(root, nsys="", jobs=2).to_json() == alone
    finally:
        stop.set()
        other.join()


def test_readers_are_forked_from_a_process_with_one_thread(tmp_path):
    root = write_run(tmp_path / "run", [30, 5, 20])
    script = Path(__file__).parent / "programs" / "summarize_in_a_fresh_process.py"
    run = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    method, together = json.loads(run.stdout)
    assert method == "fork"
    assert together == json.loads(json.dumps(summarize(root, nsys="", jobs=1).to_json()))


def test_progress_counts_every_byte_once(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "_CHUNK", 4096)  # many ticks per trace read here
    root = write_run(tmp_path / "run", [30, 5, 20, 8])
    headers = headers_of(root)
    total = sum(h.path.stat().st_size for h in headers)
    seen: list[tuple[int, int]] = []
    outcomes = list(read_traces(headers, 2, lambda done, whole: seen.append((done, whole))))
    assert [h for h, _ in outcomes] == headers and all(isinstance(o, TraceStats) for _, o in outcomes)
    assert {whole for _, whole in seen} == {total}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == total


def die_in_a_reader_process(header: TraceHeader, progress=None):
    """The reader, except that in a reader process it dies (as the kernel's OOM killer would do)."""
    if multiprocessing.parent_process() is not None:
        os._exit(9)
    return read_one(header, progress)


def test_a_reader_process_that_dies_costs_only_its_traces(tmp_path):
    # the largest trace is this process's; the small one goes to the reader process, which dies on it
    root = write_run(tmp_path / "run", [400, 2])
    headers = headers_of(root)
    (largest, first), (small, second) = read_traces(headers, 2, reader=die_in_a_reader_process)
    assert (largest, small) == (headers[0], headers[1])
    assert isinstance(first, TraceStats) and second == READER_DIED


@pytest.mark.parametrize("sizes", [[5, 1, 4, 2, 3], [10, 1, 1, 1], [7], [3, 3, 3, 3, 3, 3, 3]])
@pytest.mark.parametrize("jobs", [2, 3])
def test_work_is_split_largest_first_to_the_least_loaded(sizes, jobs):
    own, pooled = split_work(sizes, jobs)
    assert sorted(own + pooled) == list(range(len(sizes)))
    assert sizes.index(max(sizes)) in own  # this process starts at once: it takes the largest
    assert all(sizes[a] >= sizes[b] for a, b in itertools.pairwise(pooled))
    # no reader ends up with more than an even share plus one file
    assert sum(sizes[i] for i in own) <= sum(sizes) / jobs + max(sizes)


@pytest.mark.parametrize(
    "cpus, sizes, jobs",
    [
        (4, [1000] * 10, 1),  # small input: one process
        (4, [100 * PER_JOB_BYTES], 1),  # one trace: one process
        (4, [PER_JOB_BYTES // 2, PER_JOB_BYTES // 2 + 1], 2),  # over PER_JOB_BYTES in all: two
        (4, [PER_JOB_BYTES] * 3, 3),  # at most one per trace
        (2, [PER_JOB_BYTES] * 8, 2),  # at most one per CPU
        (8, [PER_JOB_BYTES // 4] * 12, 4),  # one per PER_JOB_BYTES, and one more
        (8, [], 1),
        (None, [PER_JOB_BYTES] * 3, 1),  # the number of CPUs unknown: one
        (3, [PER_JOB_BYTES] * 8, 3),
    ],
)
def test_how_many_processes_read(tmp_path, monkeypatch, cpus, sizes, jobs):
    headers = []
    for index, size in enumerate(sizes):
        path = tmp_path / f"policy.rank{index}.steps1-2.{index}.pt.trace.json"
        with open(path, "wb") as handle:
            handle.truncate(size)  # sparse: the size without the disk
        headers.append(TraceHeader(path, {}))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus or 0)) if pid == 0 else {0})
    assert default_jobs(headers) == jobs
    monkeypatch.delattr(os, "sched_getaffinity")  # as on macOS: the CPUs of the machine
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    assert default_jobs(headers) == jobs


@pytest.mark.parametrize("other_thread", [False, True], ids=["alone", "with-another-thread"])
def test_when_no_reader_process_starts_this_process_reads_everything(tmp_path, monkeypatch, other_thread):
    root = write_run(tmp_path / "run", [30, 5, 20, 8])
    headers = headers_of(root)
    alone = list(read_traces(headers, 1))

    def cannot_start(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(ProcessPoolExecutor, "submit", cannot_start)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    if other_thread:
        other.start()
    try:
        assert list(read_traces(headers, 3)) == alone
    finally:
        stop.set()
        if other_thread:
            other.join()
