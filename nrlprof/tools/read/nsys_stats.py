"""Nsight Systems reports in a summary: kernel and NVTX tables from `nsys stats`, identity from the file name."""

from __future__ import annotations

import csv
import io
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.tools.read.nsys_export import capture_identity

NSYS_REPORTS = (("cuda_gpu_kern_sum", "nvtx_sum"), ("gpukernsum", "nvtxppsum"))
NSYS_TIMEOUT_S = 600


@dataclass
class NsysReport:
    path: Path
    worker: str
    window: str
    pid: int | None
    kernels: list[dict[str, str]] = field(default_factory=list)
    nvtx: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def summarize_nsys(reports: list[Path], nsys: str | None) -> tuple[list[NsysReport], list[str]]:
    """Kernel and NVTX summaries of each report via `nsys stats`; a note instead when nsys is missing."""
    parsed = [NsysReport(path, *capture_identity(path)) for path in reports]
    if not reports:
        return [], []
    if nsys is None:
        return parsed, [f"nsys not found: install Nsight Systems to summarise {len(reports)} report(s)"]
    for report in parsed:
        try:
            report.kernels, report.nvtx = nsys_stats(nsys, report.path)
        except ToolError as exc:
            report.error = exc.reason
    return parsed, []


def nsys_stats(nsys: str, path: Path) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(kernel rows, NVTX rows): the current report names first, the pre-2023 ones if nsys rejects them."""
    errors = []
    for names in NSYS_REPORTS:
        command = [nsys, "stats", "--report", ",".join(names), "--format", "csv", "--output", "-", str(path)]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=NSYS_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolError(f"nsys stats failed: {exc}", path) from exc
        kernels, nvtx = parse_nsys_csv(run.stdout)
        if run.returncode == 0 or kernels or nvtx:
            return kernels, nvtx
        detail = (run.stderr or run.stdout).strip().splitlines()
        errors.append(f"{','.join(names)}: {detail[-1] if detail else f'exit status {run.returncode}'}")
    raise ToolError("nsys stats failed: " + "; ".join(errors), path)


def parse_nsys_csv(text: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Rows of the kernel and NVTX tables in `nsys stats --format csv --output -` output.

    A table starts at a header row with `Instances` and a `Time...` column and runs while rows have as
    many fields; kernels have a `Name` column, NVTX ranges a `Range` column. Other lines (progress
    messages, "SKIPPED: ..." notices) are ignored.
    """
    kernels: list[dict[str, str]] = []
    nvtx: list[dict[str, str]] = []
    header: list[str] | None = None
    for fields in csv.reader(io.StringIO(text)):
        fields = [f.strip() for f in fields]
        if header is not None and len(fields) == len(header):
            (nvtx if "Range" in header else kernels).append(dict(zip(header, fields, strict=True)))
            continue
        header = None
        if "Instances" in fields and any(f.startswith("Time") for f in fields) and ({"Name", "Range"} & set(fields)):
            header = fields
    return kernels, nvtx
