"""Nsight Systems in tests without nsys: a real capture's SQLite export (the shared fixture, where it is on this
machine), and a stand-in `nsys stats` that answers with fixed CSV tables."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

# a real capture's export, kept beside the checkout (not in the repository)
FIXTURE = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "nsys" / "worker_window.sqlite"
if not FIXTURE.exists():
    FIXTURE = Path("/work/shared/fixtures/nsys/worker_window.sqlite")


def copy_nsys_export(tmp_path: Path) -> Path:
    """The fixture copied into `tmp_path/run` under an nsys report's name; skipped where the fixture is missing."""
    if not FIXTURE.exists():
        pytest.skip(f"the Nsight Systems fixture is not at {FIXTURE}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return Path(shutil.copyfile(FIXTURE, run_dir / "vllm_generation_worker_3_5_4242.1.sqlite"))


PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
KERNEL_CSV = """Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
61.5,2000,4,500.0,500.0,400,600,81.6,"ampere_sgemm_128x64_nn"
38.5,1250,5,250.0,250.0,200,300,35.4,"void at::native::elementwise_kernel<128, 4>(int, float*)"
"""
NVTX_CSV = """Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range
100.0,5000000,2,2500000.0,2500000.0,2000000,3000000,707106.8,PushPop,":policy.train"
"""


def fake_nsys(directory: Path, reject: str = "", kernels: str = KERNEL_CSV, nvtx: str = NVTX_CSV) -> str:
    """An `nsys` in `directory` that runs tests/programs/nsys_stats_standin.py (`nsys stats` answering with the
    tables `kernels` and `nvtx`, and refusing the report `reject`)."""
    tables = directory / "nsys-stats-tables"
    tables.mkdir()
    for name, text in (("kernels.csv", kernels), ("nvtx.csv", nvtx), ("reject", reject)):
        (tables / name).write_text(text)
    return nsys_running(directory, "nsys_stats_standin.py", str(tables))


def nsys_running(directory: Path, program: str, *arguments: str) -> str:
    """An `nsys` in `directory`: one line that runs tests/programs/`program` with `arguments` and nsys's own."""
    path = directory / "nsys"
    command = shlex.join([sys.executable, str(PROGRAMS / program), *arguments])
    path.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    path.chmod(0o755)
    return str(path)


def nsys_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "node-a").mkdir(parents=True)
    (run_dir / "node-a" / "dtensor_policy_worker_3-4_10_4242.nsys-rep").write_bytes(b"fake report")
    return run_dir
