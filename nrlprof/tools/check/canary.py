"""`nrlprof doctor --capture`: a short real capture on a node with each backend, and a check that it is readable.

Runs on the node (inside doctor's pinned task). Each capture runs in a child process of this interpreter: a CUDA
matmul inside a named range where a GPU is visible, CPU work otherwise (said in the result). nsys: the report must
exist, be non-empty and export (`nsys export --type sqlite`); a `.qdstrm` left alone means nsys's importer failed.
torch: the trace must load as JSON and hold the range (and, with a GPU, a kernel).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nrlprof.layout import NSYS_EXPORT_SUFFIX, NSYS_REPORT_SUFFIX, NSYS_UNFINISHED_SUFFIX

CANARY_RANGE = "nrlprof-canary"
CAPTURE_TIMEOUT_S = 180.0  # `doctor --capture-timeout`: a busy node may need more
EXPORT_TIMEOUT_S = 120.0
GPU_PROBE_TIMEOUT_S = 120.0
# A GPU torch can use shows one of these device nodes (NVIDIA's driver, WSL's GPU, ROCm's kernel driver); a node
# with none of them has no GPU, and doctor need not import torch there to learn it.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/dxg", "/dev/kfd")

# The captured program: a named range around a little work, on the GPU when torch sees one.
WORKLOAD = f"""
import time
try:
    import torch
    cuda = torch.cuda.is_available()
except ImportError:
    torch, cuda = None, False
try:
    import nvtx
except ImportError:
    nvtx = None
def work():
    if cuda:
        x = torch.ones(1024, 1024, device="cuda")
        for _ in range(20):
            x = x @ x / 1024
        torch.cuda.synchronize()
    else:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            sum(range(10000))
if cuda:
    torch.cuda.nvtx.range_push("{CANARY_RANGE}"); work(); torch.cuda.nvtx.range_pop()
elif nvtx is not None:
    with nvtx.annotate("{CANARY_RANGE}"):
        work()
else:
    work()
"""

TORCH_CAPTURE = f"""
import sys, torch
from torch.profiler import ProfilerActivity, profile, record_function
cuda = torch.cuda.is_available()
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
with profile(activities=activities) as prof:
    with record_function("{CANARY_RANGE}"):
        x = torch.ones(512, 512, device="cuda" if cuda else "cpu")
        for _ in range(5):
            x = x @ x / 512
        if cuda:
            torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
"""


@dataclass
class CanaryResult:
    backend: str
    ok: bool
    gpu: bool  # whether the capture ran GPU work
    detail: str
    seconds: float = 0.0


def gpu_visible(device_nodes: tuple[str, ...] = GPU_DEVICE_NODES) -> bool:
    """Whether torch, in a child of this interpreter, sees a CUDA device (no CUDA is initialised here).

    A node with no GPU device node is answered without the child (its import of torch costs seconds of CPU).
    """
    if not any(os.path.exists(node) for node in device_nodes):
        return False
    code = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        probe = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=GPU_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _run(argv: list[str], timeout_s: float, cwd: str) -> tuple[int | None, str]:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return None, f"did not finish within {timeout_s:g}s"
    except OSError as err:
        return None, f"could not run: {err.strerror or err}"
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return done.returncode, " | ".join(tail)


def _timed(backend: str, gpu: bool) -> Callable[[bool, str], CanaryResult]:
    """The result of `backend`'s canary from (ok, detail), with the seconds since this call."""
    started = time.monotonic()
    return lambda ok, detail: CanaryResult(backend, ok, gpu, detail, round(time.monotonic() - started, 3))


def nsys_canary(nsys: str, gpu: bool, work_dir: str, timeout_s: float = CAPTURE_TIMEOUT_S) -> CanaryResult:
    """A real nsys capture of the workload; the report must exist and export to SQLite."""
    result = _timed("nsys", gpu)
    output = Path(work_dir) / "canary"
    trace = "cuda,nvtx,osrt" if gpu else "nvtx,osrt"
    argv = [nsys, "profile", "-o", str(output), "--force-overwrite=true", f"--trace={trace}", "--sample=none",
            "--cpuctxsw=none", sys.executable, "-c", WORKLOAD]  # fmt: skip
    code, tail = _run(argv, timeout_s, work_dir)
    report = output.with_name(output.name + NSYS_REPORT_SUFFIX)
    if code is None:
        return result(False, f"`nsys profile` {tail}")
    if not report.is_file() or report.stat().st_size == 0:
        if list(Path(work_dir).glob("*" + NSYS_UNFINISHED_SUFFIX)):
            return result(False, "nsys left only a .qdstrm and no report: its importer failed (QdstrmImporter; a "
                          "missing library such as libdw.so.1?)")  # fmt: skip
        return result(False, f"`nsys profile` (exit {code}) wrote no report {report.name}: {tail}")
    sqlite = output.with_suffix(NSYS_EXPORT_SUFFIX)
    argv = [nsys, "export", "--type=sqlite", "--force-overwrite=true", "-o", str(sqlite), str(report)]
    code, tail = _run(argv, EXPORT_TIMEOUT_S, work_dir)
    if code != 0 or not sqlite.is_file():
        return result(False, f"the report {report.name} did not export to SQLite (exit {code}): {tail}")
    size = report.stat().st_size
    return result(True, f"{report.name} ({size} bytes) exported to SQLite" + ("" if gpu else "; CPU only"))


def torch_canary(gpu: bool, work_dir: str, timeout_s: float = CAPTURE_TIMEOUT_S) -> CanaryResult:
    """A real torch profiler capture; the trace must load and hold the range (and a kernel with a GPU)."""
    result = _timed("torch", gpu)
    trace = Path(work_dir) / "canary.pt.trace.json"
    code, tail = _run([sys.executable, "-c", TORCH_CAPTURE, str(trace)], timeout_s, work_dir)
    if code != 0:
        return result(False, f"the torch profiler capture failed (exit {code}): {tail}")
    try:
        events = json.loads(trace.read_text(encoding="utf-8")).get("traceEvents", [])
    except (OSError, ValueError, AttributeError) as err:
        return result(False, f"the trace {trace.name} is not readable JSON: {err}")
    names = {e.get("name") for e in events if isinstance(e, dict)}
    if CANARY_RANGE not in names:
        return result(False, f"the trace holds {len(events)} events but not the range {CANARY_RANGE!r}")
    kernels = sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "kernel")
    if gpu and not kernels:
        return result(False, "the trace holds no CUDA kernel although a GPU is visible (CUPTI not working?)")
    return result(True, f"{len(events)} events" + (f", {kernels} kernels" if gpu else "; CPU only"))


def canaries_time_s(backends: list[str], capture_timeout_s: float) -> float:
    """The longest `run_canaries` can take on a node: every child it runs reaching its limit, and a minute."""
    return GPU_PROBE_TIMEOUT_S + len(backends) * (capture_timeout_s + EXPORT_TIMEOUT_S) + 60.0


def run_canaries(backends: list[str], capture_timeout_s: float = CAPTURE_TIMEOUT_S) -> dict[str, Any]:
    """Runs on the node: one capture per backend in `backends` ("nsys", "torch"); others are skipped."""
    gpu = gpu_visible()
    results = []
    with tempfile.TemporaryDirectory(prefix="nrlprof-canary-") as work_dir:
        for backend in backends:
            if backend == "torch":
                results.append(torch_canary(gpu, work_dir, capture_timeout_s))
            elif backend == "nsys":
                nsys = shutil.which("nsys")
                if nsys is None:
                    results.append(CanaryResult("nsys", False, gpu, "nsys is not on PATH"))
                else:
                    results.append(nsys_canary(nsys, gpu, work_dir, capture_timeout_s))
    return {"gpu": gpu, "results": [asdict(r) for r in results]}
