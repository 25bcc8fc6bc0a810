"""What a plan (the current variables or config) would profile: per backend, the targets, commands and files."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.backends import backend_class
from nrlprof.backends.nsys import armed_label
from nrlprof.config.nsys.options import ARMED_SESSION, LAUNCH_OPTIONS, SESSION_OPTION
from nrlprof.config.plan import MEMORY, NSYS, ROCPROF, TORCH, BackendPlan, Plan
from nrlprof.config.slow import HISTORY, KEEP, MIN_HISTORY, QUIET_STEPS, SlowSettings
from nrlprof.layout import (
    CONTROLLER,
    LOGS_DIR,
    MEMORY_FIGURES_SUFFIX,
    MEMORY_SNAPSHOT_SUFFIX,
    NSIGHT_DIR,
    NSYS_REPORT_SUFFIX,
    ROCPROF_DIR,
    memory_file_name,
    trace_directory,
    trace_file_name,
)
from nrlprof.rayfix.fix import render_tool_options
from nrlprof.tools.plan.overview import WORKER_PYTHON
from nrlprof.workers.identity import WorkerIdentity

SESSION_DIR = "<ray session dir>"
NSIGHT_LOGS = f"{SESSION_DIR}/{LOGS_DIR}/{NSIGHT_DIR}"
ROCPROF_LOGS = f"{SESSION_DIR}/{LOGS_DIR}/{ROCPROF_DIR}"
EACH_NODE = "each node running a matched worker"
# Measured on an H200 with nsys 2025.3.1 (bench/bench_nsys_armed.py and a Ray job; docs/design.md).
ARMED_NSYS_NOTE = (
    "armed for nsys on demand: every matched worker runs in an nsys session of its own from its start, collecting "
    "nothing until a window is asked for (on an H200: +0.2-1.4 s to the worker's first CUDA work under an `nsys "
    "profile` prefix, steps as fast as unarmed; the session's `nsys launch` prefix not yet timed on a GPU); each "
    "window asked for starts a collection in the worker's session before the window's first step (`nsys start`, "
    "0.1 s, between the worker's calls, off the step path) and its report is written when the window closes (the "
    "window's last step waits for nsys: 2.8 s for a small window)"
)
# What `slow` and `slow:keep` cost (bench/bench_slow.py, 2 CPU cores; docs/benchmarks.md).
SLOW_COST = "while nothing is slow, a 100 ms step took 1.004x the step with nrlprof not configured"
KEEP_COST = (
    "a 150 ms step with a few torch ops took 1.05x the step with no profiler (a torch profiler over every step: 1.03x)"
)
_SHOWN_REPORTS = 3  # repeat:K with a large K: the first reports and the last


@dataclass
class BackendView:
    kind: str
    targets: list[dict]
    windows: list[str]
    command: str
    files: list[dict]
    notes: list[str] = field(default_factory=list)


def _example_identity() -> WorkerIdentity:
    return WorkerIdentity("Worker", None, 0, explicit_name="WORKER")


def _nsys_config(backend: BackendPlan) -> tuple[dict, list[str], str]:
    """(nsys options, flags, output name with `<worker>`) as a matched worker's runtime_env gets them."""
    config = dict(backend_class(NSYS).runtime_env_fragment(backend, _example_identity())["_nsight"])
    flags = config.pop("flags", [])
    name = config.pop("o").replace("WORKER", "<worker>", 1)
    return config, flags, name if Path(name).is_absolute() else f"{NSIGHT_LOGS}/{name}"


def _armed_nsys_output(backend: BackendPlan) -> str:
    """Where each window asked for of a worker armed for nsys on demand goes, without `.nsys-rep`."""
    name = f"<worker>_{armed_label(backend)}_<pid>.<k>"
    return f"{backend.output_dir}/{name}" if backend.output_dir else f"{NSIGHT_LOGS}/{name}"


def _armed_nsys_command(backend: BackendPlan, interpreter: str) -> str:
    launch = {k: v for k, v in backend.options if k in LAUNCH_OPTIONS} | {SESSION_OPTION: ARMED_SESSION}
    collection = {k: v for k, v in backend.options if k not in LAUNCH_OPTIONS}
    output = _armed_nsys_output(backend)
    start = ["nsys", "start", f"--session={ARMED_SESSION}", "--capture-range=cudaProfilerApi",
             "--capture-range-end=stop", "-o", output, *render_tool_options(collection)]  # fmt: skip
    return (
        f"{shlex.join(['nsys', 'launch', *render_tool_options(launch)])} {_interpreter(interpreter)} "
        f"default_worker.py ...; for each window, in the worker: {shlex.join(start)}"
    )


def _command(backend: BackendPlan, interpreter: str) -> str:
    if backend.kind == NSYS and SESSION_OPTION in backend.options_dict:
        return _armed_nsys_command(backend, interpreter)
    if backend.kind == NSYS:
        config, flags, output = _nsys_config(backend)
        argv = ["nsys", "profile", *render_tool_options(config), "-o", output, *[f"--{f}" for f in flags]]
        return shlex.join(argv) + f" {_interpreter(interpreter)} default_worker.py ..."
    if backend.kind == ROCPROF:
        fragment = backend_class(ROCPROF).runtime_env_fragment(backend, _example_identity())["_rocprof_sys"]
        argv = ["rocprof-sys-python", *render_tool_options(fragment["args"]), "--"]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(fragment["env"].items()))
        return f"{env} PYTHON_EXECUTABLE={_interpreter(interpreter)} {shlex.join(argv)} default_worker.py ..."
    if backend.kind == MEMORY:
        return "(in-process: host RSS and CUDA allocator figures per step, allocator snapshot per window; no wrapper)"
    return "(in-process: torch.profiler.profile per window, no wrapper)"


def _interpreter(interpreter: str) -> str:
    """The worker's interpreter in a command: a path quoted for the shell, the placeholder as it is."""
    return interpreter if interpreter == WORKER_PYTHON else shlex.quote(interpreter)


def nsys_report_names(output: str, capture_range_end: str | None) -> list[str]:
    """The reports nsys writes for `-o output`: `<output>.nsys-rep`, or `<output>.<k>.nsys-rep` per range.

    With `repeat:K` (and `repeat-shutdown:K`) nsys numbers the reports of the K capture ranges 1..K;
    a large K is shown as the first reports, `...` and the last.
    """
    base = output.replace("%p", "<pid>")
    end = capture_range_end or "stop"
    if not end.startswith("repeat"):
        return [base + NSYS_REPORT_SUFFIX]
    count = end.partition(":")[2]
    if not count.isdigit():
        return [f"{base}.<k>{NSYS_REPORT_SUFFIX}"]
    numbers = [str(k) for k in range(1, int(count) + 1)]
    if len(numbers) > _SHOWN_REPORTS + 1:
        numbers = [*numbers[:_SHOWN_REPORTS], "...", numbers[-1]]
    return [k if k == "..." else f"{base}.{k}{NSYS_REPORT_SUFFIX}" for k in numbers]


def _files(plan: Plan, backend: BackendPlan) -> list[dict]:
    if backend.kind == NSYS and SESSION_OPTION in backend.options_dict:
        return [{"node": EACH_NODE, "path": _armed_nsys_output(backend) + NSYS_REPORT_SUFFIX}]
    if backend.kind == NSYS:
        config, _, output = _nsys_config(backend)
        names = nsys_report_names(output, config.get("capture-range-end"))
        return [{"node": EACH_NODE, "path": name} for name in names]
    if backend.kind == ROCPROF:
        where = f"{backend.output_dir}/<worker>/<rank>" if backend.output_dir else ROCPROF_LOGS
        return [{"node": EACH_NODE, "path": f"{where}/<worker>_rank<rank>_*"}]
    if backend.kind == MEMORY:
        return _memory_files(backend)
    files = []
    directory = str(Path(plan.torch.directory).expanduser().resolve())
    # Placeholders stand where the runtime puts the worker's name, rank and pid.
    for window in _windows(backend):
        label = f"steps{window.label}"
        worker = trace_file_name("<worker>", "<rank>", label, "<pid>", plan.torch.gzip)  # type: ignore[arg-type]
        folder = trace_directory(directory, "<worker>", "<rank>")  # type: ignore[arg-type]
        files.append({"node": EACH_NODE, "path": str(folder / worker)})
        controller = trace_file_name(CONTROLLER, None, label, "<pid>", plan.torch.gzip)  # type: ignore[arg-type]
        files.append({"node": "the driver's node", "path": str(trace_directory(directory, None, None) / controller)})
    return files


def _windows(backend: BackendPlan) -> tuple:
    """The windows whose files `plan` names: those planned, or the one of a slow step `<n>`."""
    if backend.slow:
        return (SlowStepLabel(),)
    return backend.steps.windows if backend.steps else ()


@dataclass(frozen=True)
class SlowStepLabel:
    label: str = "<n>"


def _memory_files(backend: BackendPlan) -> list[dict]:
    directory = str(Path(backend.output_dir or "memory_profile").expanduser().resolve())
    folder = trace_directory(directory, "<worker>", "<rank>")  # type: ignore[arg-type]
    files = []
    for window in _windows(backend):
        for suffix in (MEMORY_FIGURES_SUFFIX, f"{MEMORY_SNAPSHOT_SUFFIX}  (CUDA processes only)"):
            name = memory_file_name("<worker>", "<rank>", f"steps{window.label}", "<pid>", suffix)  # type: ignore[arg-type]
            files.append({"node": EACH_NODE, "path": str(folder / name)})
    return files


SLOW_WINDOWS = "slow: a window at the step after each slow step"
SLOW_KEEP_WINDOWS = "slow:keep: every step recorded, the slow steps' traces kept"


def slow_note(backend: BackendPlan, settings: SlowSettings) -> str:
    """What counts as slow, what opens, the spacing, the budget and the cost, as `plan` says them."""
    slow = (f"a step that takes {settings.factor:g}x the median of up to {HISTORY} steps before it (no verdict before "
            f"{MIN_HISTORY}), or a worker rank whose call takes {settings.factor:g}x its peers' median in the same "
            "step")  # fmt: skip
    spacing = (f"after each, no verdict until {QUIET_STEPS} more steps have entered the median (a run of slow steps "
               "or a machine that stays busy triggers once)")  # fmt: skip
    where = "every matched worker" + (" and the controller" if backend.controller else "")
    if backend.slow == KEEP:
        return (f"slow:keep: {where} record(s) every step, one torch session per step, dropped unread unless the step "
                f"is slow ({slow}): then its traces are kept, at most {settings.max_triggers} a run, after which the "
                f"recording stops; each process holds one step's events at a time, within NRL_PROFILE_MAX_HOST_MB; "
                f"{spacing}; cost: {KEEP_COST}")  # fmt: skip
    return (f"slow: no window is planned; after {slow}, a window of {settings.steps} step(s) opens at the next step in "
            f"{where}, at most {settings.max_triggers} a run; {spacing}; cost: {SLOW_COST}")  # fmt: skip


def describe(plan: Plan, interpreter: str = WORKER_PYTHON) -> list[BackendView]:
    """Per backend, what it profiles; `interpreter`: the worker's, when known (else a placeholder)."""
    views = []
    for backend in plan.backends:
        targets = [
            {
                "pattern": t.pattern,
                "ranks": "all" if t.ranks is None else sorted(t.ranks),
                "discrete": t.discrete,
                "methods": list(t.methods),
            }
            for t in backend.targets
        ]
        armed_nsys = backend.kind == NSYS and plan.on_demand is not None and plan.on_demand.nsys and not backend.slow
        windows = [w.label for w in backend.steps.windows] if backend.steps else ["whole lifetime"]
        if armed_nsys:
            windows = ["on demand (nrlprof capture)"]
        if backend.slow:
            windows = [SLOW_KEEP_WINDOWS if backend.slow == KEEP else SLOW_WINDOWS]
        view = BackendView(backend.kind, targets, windows, _command(backend, interpreter), _files(plan, backend))
        if armed_nsys:
            view.notes.append(ARMED_NSYS_NOTE)
        if backend.slow and plan.slow is not None:
            view.notes.append(slow_note(backend, plan.slow))
        if backend.kind == TORCH:
            view.notes.append(f"torch traces go to {Path(plan.torch.directory).resolve()} on each node")
        if backend.kind == NSYS and backend.output_dir is None:
            view.notes.append(
                "nsys reports stay on the node that ran the worker: `nrlprof collect --to DIR` gathers them"
            )
        views.append(view)
    return views
