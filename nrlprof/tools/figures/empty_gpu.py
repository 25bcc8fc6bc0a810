"""Torch traces of CUDA processes that hold no GPU kernel, with the likely cause: an empty GPU trace is named.

A process used CUDA when its trace lists GPU devices (`deviceProperties`) or CUDA runtime calls. With no kernel in
it, the usual cause is an image that sets NVTX_INJECTION64_PATH to libcupti: Kineto's CUPTI subscription then fails
(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), as it does beside any other CUPTI user.
"""

from __future__ import annotations

from nrlprof.layout import CONTROLLER
from nrlprof.tools.figures.trace_stats import TraceStats

LIKELY_CAUSE = (
    "the likely cause: NVTX_INJECTION64_PATH pointing at libcupti in that process's environment (Kineto then fails "
    "with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; nrlprof unsets it in the processes of its torch windows, "
    "so look for a process or profiler that sets it later), or another CUPTI user on the same process (Nsight "
    "Systems or Compute, DCGM profiling)"
)


def used_cuda(stats: TraceStats) -> str | None:
    """What in the trace shows the process used CUDA, or None."""
    devices = stats.header.metadata.get("deviceProperties")
    if isinstance(devices, list) and devices:
        return f"it lists {len(devices)} GPU device(s)"
    if stats.cuda_launches:
        return f"it holds {stats.cuda_launches} CUDA runtime call(s)"
    return None


def no_kernel_notes(stats: list[TraceStats]) -> list[str]:
    """One note per trace of a CUDA process that holds no GPU kernel."""
    notes = []
    for item in stats:
        evidence = used_cuda(item)
        if evidence is None or item.kernels or item.step_gpu:
            continue
        header = item.header
        who = CONTROLLER if header.is_controller else f"{header.worker} rank {header.rank}"
        notes.append(f"{who}: its torch trace {header.path.name} holds no GPU kernel though {evidence}; {LIKELY_CAUSE}")
    return notes
