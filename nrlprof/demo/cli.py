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

from nrlprof import exit_codes, rayapi
from nrlprof.layout import LOGS_DIR, MANIFEST_DIR, MANIFEST_GLOB, NSIGHT_DIR

if TYPE_CHECKING:
    from nrlprof.demo.job import StepResult
    from nrlprof.tools.figures.model import Summary

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
    out = torch_dir.parent
    reports, manifests = _run_job(args.steps, out)
    print()
    _print_files(torch_dir, reports, manifests, nsys is not None)
    print()
    _print_summary(out)
    return exit_codes.OK


def _run_job(steps: int, out: Path) -> tuple[list[Path], list[Path]]:
    """The job on a fresh local cluster; then, as `nrlprof collect` takes them, the session's Nsight Systems
    reports (into `<out>/nsys`) and the manifests its processes wrote (into `<out>/manifests`)."""
    import ray

    import nrlprof
    from nrlprof.demo.job import create_workers, run_steps

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        workers = create_workers()
        run_steps(workers, steps, nrlprof.step, report=_print_step)
        nrlprof.finish()
        session_dir = Path(rayapi.session_dir())
    finally:
        ray.shutdown()
    logs = session_dir / LOGS_DIR
    reports = _copy(logs / NSIGHT_DIR, "*.nsys-rep", out / "nsys")
    return reports, _copy(logs / MANIFEST_DIR, MANIFEST_GLOB, out / "manifests")


def _print_step(result: StepResult) -> None:
    print(f"step {result.step}: mean reward {result.reward:+.3f}, loss {result.loss:+.4f}, {result.seconds:.2f} s")


def _copy(source: Path, pattern: str, destination: Path) -> list[Path]:
    """The files of the session dir's `source` matching `pattern`, copied into `destination` (this cluster has
    one node: the session dir is here)."""
    copied = []
    for path in sorted(source.glob(pattern)):
        destination.mkdir(parents=True, exist_ok=True)
        copied.append(Path(shutil.copy2(path, destination / path.name)))
    return copied


def _print_files(torch_dir: Path, nsys_reports: list[Path], manifests: list[Path], nsys_found: bool) -> None:
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
    if manifests:
        print(f"manifests ({len(manifests)}, one per profiled process: its windows, files and status) "
              f"under {manifests[0].parent}")  # fmt: skip


def _hidden(relative: Path) -> bool:
    """nrlprof's own bookkeeping (the manifest) lives in dot-directories."""
    return any(part.startswith(".") for part in relative.parts)


def _print_summary(out: Path) -> None:
    """Step times, the windows the manifests record, and the step anatomy: what `nrlprof summary <out>` reads."""
    from nrlprof.errors import ToolError
    from nrlprof.tools.figures.summarize import summarize

    try:
        summary = summarize(out)
    except ToolError as err:
        print(f"nrlprof demo: nothing to summarise: {err}", file=sys.stderr)
        return
    _print_step_table(summary)
    print()
    _print_windows(summary)
    print()
    anatomy = summary.sections.get("anatomy")
    if anatomy is None:
        print(f"nrlprof demo: no step anatomy under {out}", file=sys.stderr)
    else:
        from nrlprof.tools.render.anatomy_text import render_anatomy_text

        print(render_anatomy_text(anatomy), end="")
    from nrlprof.tools.advice.explain import explain
    from nrlprof.tools.advice.phases import phase_map
    from nrlprof.tools.render.explain_text import top_lines

    for line in top_lines(explain(summary, phase_map())):
        print(line)
    print(f"Why the steps are slow, with the evidence: nrlprof explain {out}")
    print(f"Everything together (traces, manifests and step anatomy): nrlprof summary {out}")
    print(f"One timeline:   nrlprof merge {out} -o {out / 'timeline.json.gz'}")
    print(f"One HTML page:  nrlprof report {out} -o {out / 'report.html'}")


def _print_step_table(summary: Summary) -> None:
    from rich.table import Table

    from nrlprof.tools.render.console import print_table, terminal

    table = Table(title="Step wall time (ms), from each trace's ProfilerStep#N")
    table.add_column("worker")
    for step in summary.steps:
        table.add_column(f"step {step}", justify="right")
    for worker in summary.workers:
        cells = [_ms(worker.step_wall_ms.get(step)) for step in summary.steps]
        table.add_row(worker.label, *cells)
    print_table(terminal(), table)
    print("The first step of a window includes starting the profilers in every worker (logged above).")


def _print_windows(summary: Summary) -> None:
    """Each process's window as its manifest records it: status, and the time to start and stop its profiler."""
    print(f"profiled windows, from the manifests ({len(summary.overhead)}):")
    for item in summary.overhead:
        print(f"  {item.label}: {item.backend} window {item.window} {item.status}, profiler start "
              f"{item.start_ms:,.1f} ms, stop {item.stop_ms:,.1f} ms, files finished beside the next step in "
              f"{item.finish_ms:,.1f} ms (pid {item.pid})")  # fmt: skip
    for note in summary.notes:
        print(f"  note: {note}")


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"
