"""Traces built by hand or recorded here, for the tests of the readers, merge, summary and report.

`gpu_trace` is a small GPU-shaped kineto trace (cpu_op -> launch -> kernel, linked by ids and flows);
`gpu_step_trace` is one with figures worked out by hand (kernels, NCCL, memcpy, memset across two steps);
`record_cpu_trace` records a real torch profiler trace on CPU. `run_dir` lays out one good and one bad file.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

BASE_NS = 1_790_000_000_000_000_000


def record_cpu_trace(
    path: Path,
    worker: str,
    rank: int | None,
    steps: tuple[int, ...] = (3, 4),
    host: str = "node-a",
    step_sleep_s: float = 0.05,
    range_sleep_s: float = 0.02,
) -> Path:
    """A real torch profiler trace, with the metadata nrlprof's runtime presets; gzipped for `.gz` paths.

    Each step `n` is a `ProfilerStep#n` range holding `step_sleep_s` of sleep, inside which a
    `<worker>.train` range holds `range_sleep_s` of it, plus a matmul.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    path.parent.mkdir(parents=True, exist_ok=True)
    window = f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0])
    prof = profile(activities=[ProfilerActivity.CPU])
    info = {"rank": rank if rank is not None else 0, "world_size": 2, "backend": "gloo"}
    block = {"worker": worker, "rank": rank, "steps": list(steps), "window": window, "host": host}
    prof.preset_metadata_json("distributedInfo", json.dumps(info))
    prof.preset_metadata_json("nrlprof", json.dumps({**block, "pid": os.getpid(), "backend": "torch"}))
    with prof:
        for step in steps:
            with record_function(f"ProfilerStep#{step}"):
                started = time.perf_counter()
                with record_function(f"{worker}.train"):
                    a = torch.ones(32, 32)
                    (a @ a).sum()
                    time.sleep(range_sleep_s)
                time.sleep(max(0.0, step_sleep_s - (time.perf_counter() - started)))
    plain = path.with_name(path.name.removesuffix(".gz"))
    prof.export_chrome_trace(str(plain))
    if path.name.endswith(".gz"):
        with open(plain, "rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        plain.unlink()
    return path


def gpu_trace(
    rank: int = 0, pid: int = 1000, base_ns: int = BASE_NS, steps: tuple[int, ...] = (3, 4), worker: str = "policy"
) -> dict:
    """A small GPU-shaped kineto trace: cpu_op -> cudaLaunchKernel -> kernel, linked by ids and ac2g flows."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    ts, ext = 1_000_000.0, 0
    for step in steps:
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": pid,
                       "ts": ts, "dur": 1000.0, "args": {"External id": ext}})  # fmt: skip
        for i in range(4):
            ext += 1
            at = ts + 10 + i * 200
            op, kernel = ("aten::mm", "ampere_sgemm_128x64_nn") if i % 2 == 0 else ("aten::add", "elementwise_kernel")
            events += [
                {"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": pid, "ts": at, "dur": 50.0,
                 "args": {"External id": ext}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid,
                 "ts": at + 5, "dur": 20.0, "args": {"External id": ext, "cbid": 211, "correlation": ext}},
                {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": at + 40, "dur": 100.0,
                 "args": {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": 7,
                          "correlation": ext, "registers per thread": 32, "shared memory": 0,
                          "blocks per SM": 1.0, "warps per SM": 4.0, "grid": [64, 1, 1], "block": [128, 1, 1],
                          "est. achieved occupancy %": 25}},
                {"ph": "s", "id": ext, "pid": pid, "tid": pid, "ts": at + 5, "cat": "ac2g", "name": "ac2g"},
                {"ph": "f", "id": ext, "pid": 0, "tid": 7, "ts": at + 40, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            ]  # fmt: skip
        ts += 2000
    window = f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0])
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85_000_000_000}],
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "nrlprof": {
            "worker": worker,
            "rank": rank,
            "steps": list(steps),
            "window": window,
            "host": "gpu-node",
            "pid": pid,
            "backend": "torch",
        },
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns,
        "traceEvents": events,
        "traceName": "gpu",
    }


def write_json(path: Path, trace: dict | list) -> Path:
    """json.dump's layout (not kineto's): read through the ijson path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt") as handle:
        json.dump(trace, handle, indent=1)
    return path


def load(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)


def events_of(path: Path) -> list[dict]:
    return load(path)["traceEvents"]


def truncate(source: Path, target: Path, keep: float = 0.6) -> Path:
    data = source.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data[: int(len(data) * keep)])
    return target


SGEMM = "ampere_sgemm_128x64_nn"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::add_kernel<float>>(int, float*, float*)"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _launch(name: str, ts: float, correlation: int, pid: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": pid, "ts": ts, "dur": 5.0,
            "args": {"correlation": correlation, "cbid": 211}}  # fmt: skip


def _gpu(cat: str, name: str, ts: float, dur: float, correlation: int, stream: int = 7) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "stream": stream, "device": 0}}  # fmt: skip


def gpu_step_trace(rank: int = 0, pid: int = 1000, step3_us: float = 1000.0, worker: str = "policy") -> dict:
    """Steps 3 (1000 us from ts 1000, or `step3_us`) and 4 (2100-3100) with kernels, NCCL, memcpy and memset.

    Step 3 launches: elementwise 1100-1300 and sgemm 1200-1500 on another stream (overlapping by 100),
    NCCL 1600-1700, memcpy 1700-1750, memset 1750-1760, and at ts 1900 a kernel that runs 2120-2170, in
    step 4's window. Step 4 launches one kernel, 2200-2300.
    """
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": pid, "tid": pid, "ts": 1000.0,
         "dur": step3_us, "args": {}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": pid, "tid": pid, "ts": 2100.0,
         "dur": 1000.0, "args": {}},
        _launch("cudaLaunchKernel", 1010.0, 1, pid), _gpu("kernel", ELEMENTWISE, 1100.0, 200.0, 1),
        _launch("cudaLaunchKernel", 1020.0, 2, pid), _gpu("kernel", SGEMM, 1200.0, 300.0, 2, stream=8),
        _launch("cudaLaunchKernel", 1030.0, 3, pid), _gpu("kernel", NCCL, 1600.0, 100.0, 3, stream=9),
        _launch("cudaMemcpyAsync", 1040.0, 4, pid), _gpu("gpu_memcpy", "Memcpy HtoD", 1700.0, 50.0, 4),
        _launch("cudaMemsetAsync", 1050.0, 5, pid), _gpu("gpu_memset", "Memset (Device)", 1750.0, 10.0, 5),
        _launch("cudaLaunchKernel", 1900.0, 6, pid), _gpu("kernel", SGEMM, 2120.0, 50.0, 6),
        _launch("cudaLaunchKernel", 2110.0, 7, pid), _gpu("kernel", SGEMM, 2200.0, 100.0, 7),
    ]  # fmt: skip
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "nrlprof": {
            "worker": worker,
            "rank": rank,
            "steps": [3, 4],
            "window": "3-4",
            "host": "gpu-node",
            "pid": pid,
            "backend": "torch",
        },
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
    }


GOOD = "policy.rank0.steps3-4.1000.pt.trace.json"
BAD = "policy.rank1.steps3-4.1001.pt.trace.json"


def run_dir(tmp_path: Path, bad: dict | bytes, name: str = BAD) -> Path:
    """A good rank-0 trace and one bad file (a trace as a dict, or raw bytes)."""
    root = tmp_path / "run"
    write_json(root / "policy" / "0" / GOOD, gpu_trace())
    target = root / "policy" / "1" / name
    if isinstance(bad, bytes):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bad)
    else:
        write_json(target, bad)
    return root


def rank1_trace(**nrlprof: object) -> dict:
    trace = gpu_trace(rank=1, pid=1001)
    trace["nrlprof"].update(nrlprof)
    return trace


def kineto_text(trace: dict) -> str:
    """The trace as kineto lays it out: each event's closing brace alone on a line at the events' indent."""
    head = {k: v for k, v in trace.items() if k not in ("traceEvents", "traceName")}
    lines = ["{"] + [f'  "{k}": {json.dumps(v)},' for k, v in head.items()] + ['  "traceEvents": [']
    body = ",".join("\n  {\n    " + json.dumps(e)[1:-1] + "\n  }" for e in trace["traceEvents"])
    return "\n".join(lines) + body + '\n],\n  "traceName": "x"\n}\n'


def data_parallel_trace(
    rank: int,
    arrives_us: dict[int, float],
    transfer_us: float = 200.0,
    steps: tuple[int, ...] = (3, 4, 5),
    step_us: float = 10_000.0,
    hidden_under_compute: bool = False,
    worker: str = "policy",
) -> dict:
    """One data-parallel rank's GPU trace: per step, compute kernels until `arrives_us[rank]`, then an NCCL
    all-reduce that ends when the last rank has arrived plus `transfer_us` (a late rank makes its peers' kernels
    long). `hidden_under_compute`: a compute kernel on another stream runs beside the whole collective."""
    pid = 2000 + rank
    events: list[dict] = []
    last = max(arrives_us.values())
    correlation = 0
    for index, step in enumerate(steps):
        begin = 1000.0 + index * step_us
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": pid,
                       "ts": begin, "dur": step_us - 10, "args": {}})  # fmt: skip
        arrive = begin + arrives_us[rank]
        spans = [(SGEMM, begin + 100, arrive - begin - 100, 7)]
        comm_start, comm_end = arrive, begin + last + transfer_us
        spans.append((NCCL, comm_start, comm_end - comm_start, 9))
        if hidden_under_compute:
            spans.append((SGEMM, comm_start, comm_end - comm_start, 8))
        for name, ts, dur, stream in spans:
            correlation += 1
            events.append(_launch("cudaLaunchKernel", begin + 10 + correlation, correlation, pid))
            events.append(_gpu("kernel", name, ts, dur, correlation, stream=stream))
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": len(arrives_us), "backend": "nccl"},
        "nrlprof": {
            "worker": worker,
            "rank": rank,
            "steps": list(steps),
            "window": f"{steps[0]}-{steps[-1]}",
            "host": "gpu-node",
            "pid": pid,
            "backend": "torch",
        },
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
    }
