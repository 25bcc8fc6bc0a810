"""Nsight Systems in tests without nsys: a real capture's SQLite export (the shared fixture, where it is on this
machine), and a stand-in `nsys stats` that answers with fixed CSV tables."""

from __future__ import annotations

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


KERNEL_CSV = """Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
61.5,2000,4,500.0,500.0,400,600,81.6,"ampere_sgemm_128x64_nn"
38.5,1250,5,250.0,250.0,200,300,35.4,"void at::native::elementwise_kernel<128, 4>(int, float*)"
"""
NVTX_CSV = """Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range
100.0,5000000,2,2500000.0,2500000.0,2000000,3000000,707106.8,PushPop,":policy.train"
"""
# `nsys stats` as Nsight Systems 2023+ answers it; it refuses what real nsys would not parse the same way:
# anything but `stats --report A,B --format csv --output - <existing .nsys-rep>`.
FAKE_NSYS = """#!{python}
import os, sys
args = sys.argv[1:]
def refuse(why):
    print("ERROR: " + why, file=sys.stderr)
    sys.exit(2)
if len(args) != 8 or args[0] != "stats":
    refuse("usage: stats --report R --format csv --output - REPORT, got " + repr(args))
options = dict(zip(args[1:7:2], args[2:7:2]))
if set(options) != {{"--report", "--format", "--output"}}:
    refuse("unexpected options " + repr(args))
if options["--format"] != "csv" or options["--output"] != "-":
    refuse("this stand-in writes CSV to stdout only: " + repr(options))
if not (args[7].endswith(".nsys-rep") and os.path.isfile(args[7])):
    refuse("no such report " + args[7])
reports = options["--report"]
if "{reject}" and "{reject}" in reports:
    print("ERROR: Report '{reject}' could not be found.", file=sys.stderr)
    sys.exit(1)
print("Generating SQLite file report.sqlite from report.nsys-rep")
print("Processing [report.sqlite] with [{{}}]... ".format(reports.split(",")[0]))
sys.stdout.write({kernels!r})
print()
print("Processing [report.sqlite] with [{{}}]... ".format(reports.split(",")[1]))
sys.stdout.write({nvtx!r})
"""


def fake_nsys(directory: Path, reject: str = "", kernels: str = KERNEL_CSV, nvtx: str = NVTX_CSV) -> str:
    path = directory / "nsys"
    path.write_text(FAKE_NSYS.format(python=sys.executable, reject=reject, kernels=kernels, nvtx=nvtx))
    path.chmod(0o755)
    return str(path)


def nsys_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "node-a").mkdir(parents=True)
    (run_dir / "node-a" / "dtensor_policy_worker_3-4_10_4242.nsys-rep").write_bytes(b"fake report")
    return run_dir
