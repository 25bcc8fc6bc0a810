"""No empty GPU trace without a word: a CUDA process's torch trace that holds no kernel is named in `summary`,
with the likely cause (NVTX_INJECTION64_PATH pointing at CUPTI)."""

from __future__ import annotations

import json
from pathlib import Path

from nrlprof.tools.figures.summarize import summarize

WORKER = "dtensor_policy_worker"


def write_trace(directory: Path, rank: int, devices: bool, kernel: bool) -> Path:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 100},
    ]
    if kernel:
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
             "args": {"correlation": 7}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 50,
             "args": {"correlation": 7, "device": 0, "stream": 7}},
        ]  # fmt: skip
    trace = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}] if devices else [],
        "nrlprof": {"worker": WORKER, "rank": rank, "steps": [2], "window": "2", "host": "gpu-node", "pid": 100 + rank,
                    "backend": "torch"},
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "traceEvents": events,
    }  # fmt: skip
    folder = directory / WORKER / str(rank)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{WORKER}.rank{rank}.steps2.{100 + rank}.pt.trace.json"
    path.write_text(json.dumps(trace))
    return path


def test_a_cuda_workers_trace_with_no_kernel_is_named_with_the_likely_cause(tmp_path):
    empty = write_trace(tmp_path, 0, devices=True, kernel=False)
    write_trace(tmp_path, 1, devices=True, kernel=True)
    summary = summarize(tmp_path, nsys="")
    (note,) = [n for n in summary.notes if "no GPU kernel" in n]
    assert note.startswith(f"{WORKER} rank 0: its torch trace {empty.name} holds no GPU kernel though it lists 1 GPU")
    assert "NVTX_INJECTION64_PATH" in note and "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in note
    assert any("no GPU kernel" in n for n in summary.to_json()["notes"])


def test_a_cpu_process_with_no_kernel_is_not_named(tmp_path):
    write_trace(tmp_path, 0, devices=False, kernel=False)
    assert not [n for n in summarize(tmp_path, nsys="").notes if "no GPU kernel" in n]
