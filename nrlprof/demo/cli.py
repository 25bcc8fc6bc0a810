"""`nrlprof demo`: run the bundled RL-shaped Ray job (nrlprof.demo.job) profiled, then show what was written.

Settings come, in this order of precedence, from the command line, from NRL_* variables already set, and
from the demo's defaults: steps 3:5 of 6 with the torch profiler for the policy, generation and
tensor-parallel workers, plus Nsight Systems for the policy when `nsys` is on PATH.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

from nrlprof import exit_codes

if TYPE_CHECKING:
    from nrlprof.demo.job import StepResult

DEFAULT_OUT = "nrlprof-demo"
DEFAULT_RANGE = "3:5"
DEFAULT_STEPS = 6
TORCH_PATTERNS = "*policy*,*generation*,*tensor_parallel*"
NSYS_PATTERNS = "*policy*"
# Without these, every torch window prints kineto's profiler_start/stop lines from every worker, and Ray
# folds the identical match lines of the two tensor-parallel workers into one.
QUIET_ENV = {"KINETO_LOG_LEVEL": "6", "RAY_DEDUP_LOGS": "0"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=_positive, default=DEFAULT_STEPS, help="training steps to run (default 6)")
    parser.add_argument(
        "--range", dest="step_range", help=f"steps to profile, as NRL_*_PROFILE_STEP_RANGE (default {DEFAULT_RANGE})"
    )
    parser.add_argument(
        "--out", type=Path, help=f"output directory; torch traces go to <out>/torch (default {DEFAULT_OUT})"
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def demo_environment(args: argparse.Namespace, environ: MutableMapping[str, str], nsys: str | None) -> Path:
    """Set the profiling variables the demo needs in `environ`; the torch trace directory."""
    out = args.out or Path(DEFAULT_OUT)

    def choose(variable: str, flag_value: object, default: str) -> None:
        if flag_value is not None:
            environ[variable] = str(flag_value)
        elif not environ.get(variable, "").strip():
            environ[variable] = default

    choose("NRL_TORCH_PROFILE_WORKER_PATTERNS", None, TORCH_PATTERNS)
    choose("NRL_TORCH_PROFILE_STEP_RANGE", args.step_range, DEFAULT_RANGE)
    choose("NRL_TORCH_PROFILE_DIR", None if args.out is None else out / "torch", str(out / "torch"))
    choose("NRL_STEP_ANATOMY_DIR", None if args.out is None else out / "step_anatomy", str(out / "step_anatomy"))
    if nsys is not None:
        choose("NRL_NSYS_WORKER_PATTERNS", None, NSYS_PATTERNS)
        choose("NRL_NSYS_PROFILE_STEP_RANGE", args.step_range, environ["NRL_TORCH_PROFILE_STEP_RANGE"])
    for variable, value in QUIET_ENV.items():
        environ.setdefault(variable, value)
    return Path(environ["NRL_TORCH_PROFILE_DIR"]).expanduser().resolve()


def run(args: argparse.Namespace) -> int:
    nsys = shutil.which("nsys")
    torch_dir = demo_environment(args, os.environ, nsys)
    if nsys is None:
        print("nrlprof demo: nsys not found on PATH, so only torch profiler traces are taken")
    import nrlprof

    nrlprof.activate_from_env()  # `import nrlprof` ran before the variables above were set
    reports = _run_job(args.steps, torch_dir.parent / "nsys")
    print()
    _print_files(torch_dir, reports, nsys is not None)
    print()
    _print_step_table(torch_dir)
    print()
    _print_step_anatomy(Path(os.environ["NRL_STEP_ANATOMY_DIR"]).expanduser().resolve())
    return exit_codes.OK


def _run_job(steps: int, nsys_dir: Path) -> list[Path]:
    """The job on a fresh local cluster; the Nsight Systems reports copied into `nsys_dir`."""
    import ray

    import nrlprof
    from nrlprof.demo.job import create_workers, run_steps

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        workers = create_workers()
        run_steps(workers, steps, nrlprof.step, report=_print_step)
        nrlprof.finish()
        return _copy_nsys_reports(nsys_dir)
    finally:
        ray.shutdown()


def _print_step(result: StepResult) -> None:
    print(f"step {result.step}: mean reward {result.reward:+.3f}, loss {result.loss:+.4f}, {result.seconds:.2f} s")


def _copy_nsys_reports(destination: Path) -> list[Path]:
    """Ray writes nsys reports under its session directory (one per node); this cluster has one node."""
    import ray

    session_dir = ray._private.worker.global_worker.node.get_session_dir_path()
    reports = sorted((Path(session_dir) / "logs" / "nsight").glob("*.nsys-rep"))
    copied = []
    for report in reports:
        destination.mkdir(parents=True, exist_ok=True)
        copied.append(Path(shutil.copy2(report, destination / report.name)))
    return copied


def _print_files(torch_dir: Path, nsys_reports: list[Path], nsys_found: bool) -> None:
    files = sorted(p for p in torch_dir.rglob("*") if p.is_file() and not _hidden(p.relative_to(torch_dir)))
    print(f"torch profiler traces ({len(files)}) under {torch_dir}:")
    for path in files:
        print(f"  {path.relative_to(torch_dir)}  ({path.stat().st_size / 1024:,.0f} KiB)")
    if nsys_reports:
        print(f"Nsight Systems reports ({len(nsys_reports)}) under {nsys_reports[0].parent}:")
        for path in nsys_reports:
            print(f"  {path.name}")
    elif nsys_found:
        print("no Nsight Systems report: nsys captures only while CUDA is available in the worker")


def _hidden(relative: Path) -> bool:
    """nrlprof's own bookkeeping (the manifest) lives in dot-directories."""
    return any(part.startswith(".") for part in relative.parts)


def _print_step_table(torch_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from nrlprof.errors import ToolError
    from nrlprof.tools.figures.summarize import summarize

    try:
        summary = summarize(torch_dir)
    except ToolError as err:
        print(f"nrlprof demo: no step times: {err}", file=sys.stderr)
        return
    table = Table(title="Step wall time (ms), from each trace's ProfilerStep#N")
    table.add_column("worker")
    for step in summary.steps:
        table.add_column(f"step {step}", justify="right")
    for worker in summary.workers:
        cells = [_ms(worker.step_wall_ms.get(step)) for step in summary.steps]
        table.add_row(worker.label, *cells)
    Console().print(table)
    print("The first step of a window includes starting the profilers in every worker (logged above).")
    print(f"Full breakdown: nrlprof summary {torch_dir}")
    print(f"One timeline:   nrlprof merge {torch_dir} -o {torch_dir.parent / 'timeline.json.gz'}")


def _print_step_anatomy(anatomy_dir: Path) -> None:
    """Every step of the job and every worker group, profiled or not: from Ray's task events."""
    from nrlprof.anatomy.files import run_directories
    from nrlprof.tools.figures.anatomy import anatomy_summary
    from nrlprof.tools.render.anatomy_text import render_anatomy_text

    runs = run_directories(anatomy_dir) if anatomy_dir.is_dir() else []
    if not runs:
        print(f"nrlprof demo: no step anatomy under {anatomy_dir}", file=sys.stderr)
        return
    print(render_anatomy_text(anatomy_summary(runs[-1])), end="")
    print(f"Everything together (traces and step anatomy): nrlprof summary {anatomy_dir.parent}")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"
