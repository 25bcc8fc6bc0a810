"""PyTorch profiler: one `torch.profiler` session per window, one trace file per window.

The session records every thread of the process (threaded and async actors, compiled-graph executors
run the work off the thread that starts the window) where torch supports it.  It is warmed up the step
before its window (`prepare_window`), on a thread of its own beside that step's work: torch's trace
preparation (CUPTI on a GPU, seconds) then lands outside the window and off the step's path, and the window
starts with one cheap `step()` of torch's schedule, which is also where recording begins on the gate's thread.
Its stop in the step is the profiler's stop. Kineto's export (which lets the GIL go: the next step's Python runs
beside it), the check of Kineto's text, its compression and the window's record follow beside the next step
(nrlprof.process.finishing). A controller that is an actor (verl's TaskRunner) finishes its trace in the step:
nothing sees its end (Ray ends it with its driver) to wait for the file there.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from nrlprof import layout
from nrlprof.backends import kineto_text
from nrlprof.backends.base import Backend
from nrlprof.backends.cupti_clash import avoid_clash
from nrlprof.backends.host_budget import HostBudget
from nrlprof.backends.inductor_unimported import inductor_left_unimported
from nrlprof.backends.kineto_first_start import without_thread_complaint
from nrlprof.backends.torch_guard import OtherProfilerGuard, another_profiler_running
from nrlprof.backends.torch_kept import KeptSessions
from nrlprof.backends.warm_up import WarmUp
from nrlprof.config.plan import TORCH
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import Status, WindowRecord
from nrlprof.process.finishing import FINISHER
from nrlprof.process.import_hooks import imported
from nrlprof.process.kind import is_ray_worker

STEP_MARKER = "ProfilerStep#{}"
# A window longer than this is listed by its first and last step in the trace's metadata.
MAX_LISTED_STEPS = 10_000
_WARNED: set[str] = set()
# nrlprof's profiler starts in this process, one at a time: a window's (the gate's thread) and the warm-up for a
# window asked for (the controller's listener thread).
_STARTING = threading.Lock()
_kineto_started = False
_MEMORY_WITHOUT_ALL_THREADS = (
    "NRL_TORCH_PROFILE_MEMORY is on: torch then records memory events only without profile_all_threads, "
    "so work on threads other than the one starting a window is missing from the traces"
)
_NO_ALL_THREADS = (
    "this torch profiler records only the thread that starts a window (no profile_all_threads): "
    "work of threaded/async actors on other threads is missing from the traces"
)


def _experimental_config(profile_memory: bool, with_stack: bool = False):
    """Every thread's ops, and no Python event objects built at stop; None where this torch has neither.

    profile_all_threads: off with profile_memory (torch 2.13 then records no `[memory]` events: memory profiling
    wins; said once in the log). trace_only (torch >= 2.13): nrlprof only exports the trace, so torch need not
    build the events a Python caller could read, which is about a third of its stop; with_stack needs them.
    """
    from torch._C._profiler import _ExperimentalConfig

    if profile_memory:
        _warn_once(_MEMORY_WITHOUT_ALL_THREADS)
    all_threads = {} if profile_memory else {"profile_all_threads": True}
    trace_only = {} if with_stack else {"trace_only": True}
    for options in ({**all_threads, **trace_only}, all_threads):
        if not options:
            return None
        try:
            return _ExperimentalConfig(**options)
        except TypeError:
            continue
    _warn_once(_NO_ALL_THREADS)
    return None


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        logger.warning(message)


class _WarmUpThenRecord:
    """torch's schedule: warm up from `start()` until the window's first step, then record, whatever the step's number
    (`mark_step` sets the step number to the driver's step, so no window length or repeat count applies; frameworks
    that count from 0 have a step 0, whose number torch's warm-up had by its own count)."""

    def __init__(self) -> None:
        self.recording = False

    def __call__(self, step_num: int):
        from torch.profiler import ProfilerAction

        return ProfilerAction.RECORD if self.recording else ProfilerAction.WARMUP


# Compression runs on the finisher's thread beside the next step (zlib lets the GIL go): on a torch trace
# (bench/bench_trace_gzip.py), level 3 compresses ~8x faster than gzip's default 9 to a file ~1.4x larger (still
# ~1/12 of the text).
TRACE_GZIP_LEVEL = 3


def _write_valid(exported: Path, target: Path, compress: bool) -> int:
    """Move Kineto's file to `target` (gzip-compressed if asked) with broken names repaired; how many were."""
    if compress:
        partial = exported.with_name(exported.name + ".gz")
        with open(exported, "rb") as source, gzip.open(partial, "wb", compresslevel=TRACE_GZIP_LEVEL) as sink:
            repairs = kineto_text.copy_repaired(source, sink)
        os.unlink(exported)
    else:
        with open(exported, "rb") as source:
            repairs = kineto_text.copy_repaired(source, None)
        partial = exported
        if repairs:
            partial = exported.with_name(exported.name + ".repaired")
            with open(exported, "rb") as source, open(partial, "wb") as sink:
                kineto_text.copy_repaired(source, sink)
            os.unlink(exported)
    os.replace(partial, target)
    return repairs


@dataclass
class Finished:
    """What finishing a window's trace files found, filled in on the finisher's thread."""

    repairs: int = 0
    failures: list[str] = field(default_factory=list)
    # A file that could not be finished: where what torch wrote was kept (None: nothing was).
    kept: dict[str, str | None] = field(default_factory=dict)
    seconds: float = 0.0


def _export(profiler, exported: Path) -> None:
    """Kineto's export, into a directory made first: Kineto only logs that it cannot open a file, writes nothing,
    and saves a session once."""
    exported.parent.mkdir(parents=True, exist_ok=True)
    profiler.export_chrome_trace(str(exported))


def _finish_file(profiler, exported: Path, target: Path, compress: bool, finished: Finished, who: str) -> None:
    """Export the stopped session's trace and move Kineto's file into place, checked."""
    began = time.perf_counter()
    try:
        _export(profiler, exported)
        repairs = _write_valid(exported, target, compress)
    except Exception as err:
        kept = _keep_as_written(exported, target)
        finished.kept[str(target)] = kept
        where = f"what torch wrote is kept as {kept}" if kept else "nothing torch wrote is left"
        finished.failures.append(f"{target.name} could not be written ({err}): {where}")
        logger.error("%s: the torch trace %s could not be written (%s): %s", who, target, err, where)
    else:
        finished.repairs += repairs
        if repairs:
            logger.warning("%s: %s (%s)", who, kineto_text.repair_note(repairs), target)
        logger.debug("torch trace for %s: %s", who, target)
    finally:
        finished.seconds += time.perf_counter() - began
        FINISHER.written(target)


def _keep_as_written(exported: Path, target: Path) -> str | None:
    """After a failed check or compression: Kineto's own file under the trace's name, uncompressed."""
    if not exported.exists():
        return None
    kept = layout.unused_path(target.with_name(target.name.removesuffix(".gz")))
    try:
        os.replace(exported, kept)
    except OSError:
        return str(exported.resolve())
    return str(kept.resolve())


def _completed(finished: Finished, record: WindowRecord, beside: bool = True) -> WindowRecord:
    """A window's record once its files are finished: repaired names said, a file that failed an error; the time
    that took beside the next step (else it is part of `stop_ms`)."""
    notes = [record.message, kineto_text.repair_note(finished.repairs) if finished.repairs else "", *finished.failures]
    return record.replaced(
        files=tuple(kept for f in record.files if (kept := finished.kept.get(f, f)) is not None),
        status=Status.ERROR if finished.failures else record.status,
        message="; ".join(filter(None, notes)),
        finish_ms=finished.seconds * 1000 if beside else 0.0,
    )


def start_up_profiler(who: str, guard: OtherProfilerGuard | None = None) -> None:
    """Kineto's start-up, once per process (CUPTI on a GPU: seconds; 1.8 s on 2 CPU cores), paid before a window
    asked for is handed to the gate rather than in its first step: one empty start and stop of the profiler."""
    global _kineto_started
    if _kineto_started:
        return
    from torch.profiler import profile

    with _STARTING:
        if _kineto_started or another_profiler_running():
            return
        began = time.perf_counter()
        profiler = profile(activities=profiler_activities())
        own = guard.own_start() if guard is not None else contextlib.nullcontext()
        with own, without_thread_complaint(), inductor_left_unimported(profiler):
            profiler.start()
            profiler.stop()
        _kineto_started = True
    logger.debug("%s: torch profiler started up for a window asked for in %.2f s", who, time.perf_counter() - began)


def profiler_activities() -> list:
    import torch
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    return activities


class TorchBackend(KeptSessions, Backend):
    kind = TORCH
    warms_up = True
    finishes_beside = True

    def __init__(self, backend_plan, role, target=None) -> None:
        super().__init__(backend_plan, role, target)
        self.profiler = None
        self.prepared_for: Window | None = None
        self.warm_up: WarmUp | None = None
        self.step_marker = None
        self.files: list[str] = []
        self.call_label = ""
        self.skipped = ""
        self.finished = Finished()
        self.guard = OtherProfilerGuard(self)
        # Said at INFO once per worker kind (the controller, or rank 0 of each worker), else at DEBUG.
        avoid_clash(role.worker_name, say=role.rank in (None, 0))
        self.budget = HostBudget(role.plan.max_host_mb)
        self.truncated = ""  # why the window stopped early (its host budget), if it did
        self.finishes_in_step = role.is_controller and is_ray_worker(sys.argv)
        self._directory: Path | None = None

    def _nrlprof_json(self, window: Window) -> str:
        """The trace's `nrlprof` block (`about`), with the steps of the window."""
        steps = list(window.steps) if len(window.steps) <= MAX_LISTED_STEPS else [window.first, window.last]
        return json.dumps(kineto_text.safe_metadata({**self.about(window), "steps": steps}))

    def _metadata(self, window: Window) -> dict[str, str]:
        rank = self.role.rank if self.role.rank is not None else 0
        world_size = int(os.environ.get("WORLD_SIZE", "0") or 0) or rank + 1
        metadata = {"nrlprof": self._nrlprof_json(window)}
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            metadata["distributedInfo"] = json.dumps({"rank": rank, "world_size": world_size, "backend": "none"})
        return metadata

    def _new_session(self, window: Window, scheduled: bool):
        from torch.profiler import profile

        settings = self.role.plan.torch
        options = {"schedule": _WarmUpThenRecord()} if scheduled else {}
        profiler = profile(
            activities=profiler_activities(),
            record_shapes=settings.record_shapes,
            profile_memory=settings.profile_memory,
            with_stack=settings.with_stack,
            with_flops=settings.with_flops,
            experimental_config=_experimental_config(settings.profile_memory, settings.with_stack),
            **options,
        )
        for key, value in self._metadata(window).items():
            profiler.preset_metadata_json(key, value)
        global _kineto_started
        with _STARTING, self.guard.own_start(), without_thread_complaint(), inductor_left_unimported(profiler):
            profiler.start()
            _kineto_started = True
        return profiler

    def ready_for_asked(self) -> None:
        if not self.discrete and (imported("torch") is not None or self.role.parent is None):
            start_up_profiler(self.role.worker_name, self.guard)

    def _other_profiler(self) -> bool:
        if not another_profiler_running():
            return False
        self.skipped = "another torch profiler was running in this process; nrlprof's window was skipped"
        logger.warning("%s: %s", self.role.worker_name, self.skipped)
        return True

    def holds_profiler(self) -> bool:
        return self.profiler is not None or self.warm_up is not None

    def _torch_here(self) -> bool:
        """torch, ready to use; a worker's child that never imported it has no torch work to record."""
        if imported("torch") is not None:
            return True
        if self.role.parent is None:
            import torch  # noqa: F401

            return True
        self.skipped = "this process has not imported torch: it has no torch work to record"
        return False

    def prepare_window(self, window: Window) -> None:
        self.discard_prepared()
        # What the session imports is imported here, torch first: an import on two threads at once can meet the
        # job's own imports in the opposite order, and Python then hands one thread a half-made module.
        if self.discrete or not self._torch_here() or self._other_profiler():
            return
        for module in ("torch.profiler", "torch.distributed", "torch.profiler._cupti_monitor"):
            with contextlib.suppress(ImportError):  # the last: torch >= 2.12, imported by the profiler's start
                importlib.import_module(module)
        self.guard.install()
        self._trace_directory()
        self.prepared_for = window
        self.warm_up = WarmUp(lambda: self._new_session(window, scheduled=True), "nrlprof-torch-warm-up")

    def discard_prepared(self) -> None:
        warm_up, self.warm_up = self.warm_up, None
        self.prepared_for = None
        if warm_up is None:
            return
        try:
            profiler = warm_up.result()
        except Exception as err:
            logger.debug("%s: the torch warm-up that was not used had failed: %s", self.role.worker_name, err)
            return
        with self.guard.own_start():
            profiler.stop()

    def _take_prepared(self) -> None:
        """The session warmed up for this window; the window's start waits for what is left of its warm-up."""
        warm_up, self.warm_up = self.warm_up, None
        self.prepared_for = None
        if warm_up.done:
            self.profiler = warm_up.result()
            return
        waited = time.perf_counter()
        self.profiler = warm_up.result()
        log = logger.info if self.role.rank in (None, 0) else logger.debug
        log("%s: the torch warm-up (%.2f s) outlasted the step before the window; its start waited %.2f s",
            self.role.worker_name, warm_up.seconds, time.perf_counter() - waited)  # fmt: skip

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at, self.files = window, [], time.time(), []
        self.skipped = ""
        self.truncated = ""
        self.finished = Finished()
        if self.discrete:
            self.mark_step(step)
            return
        if self.prepared_for == window and self.warm_up is not None:
            self._take_prepared()
        else:
            self.discard_prepared()
            if not self._torch_here() or self._other_profiler():
                self.steps_seen.append(step)
                return
            self.guard.install()
            self.profiler = self._new_session(window, scheduled=True)
        self.budget.begin()  # the profiler's own start-up is not counted: what its buffers hold from here is
        self.mark_step(step)

    def begin_call(self, label: str) -> None:
        from torch.profiler import record_function

        step = self.steps_seen[-1]
        self.call_label = label
        self.profiler = self._new_session(Window(step, step), scheduled=False)
        self.step_marker = record_function(STEP_MARKER.format(step))
        self.step_marker.__enter__()

    def end_call(self) -> None:
        if self.step_marker is not None:
            self.step_marker.__exit__(None, None, None)
            self.step_marker = None
        step = self.steps_seen[-1]
        self.files.append(self._finish_session(f"step{step}.{layout.file_safe(self.call_label)}"))

    def mark_step(self, step: int) -> None:
        if self.truncated:
            return
        if not self.discrete and self.profiler is not None and (grown := self.budget.grown_past()) is not None:
            self._stop_early(step, grown)
            return
        self.steps_seen.append(step)
        if self.discrete or self.profiler is None:
            return
        # torch's schedule opens `ProfilerStep#<step_num + 1>`: the driver's step number.
        self.profiler.step_num = step - 1
        schedule = getattr(self.profiler, "schedule", None)
        if isinstance(schedule, _WarmUpThenRecord):
            schedule.recording = True
        self.profiler.step()

    def _stop_early(self, step: int, grown_mb: float) -> None:
        """Past its host budget: the trace of the steps so far is written and the window records nothing more."""
        self.files.append(self._finish_session(f"steps{self.window.label}"))
        self.truncated = (
            f"stopped early at step {step}: the process grew by {grown_mb:.0f} MB in this window, past its host "
            f"budget of {self.budget.budget_mb} MB (NRL_PROFILE_MAX_HOST_MB); the trace holds the steps before it"
        )
        logger.warning("%s rank %s: torch window %s %s", self.role.worker_name, self.role.rank, self.window.label,
                       self.truncated)  # fmt: skip

    def interrupted_by_other_profiler(self) -> None:
        """Another profiler starts in this process: end ours first (two at once crash the process)."""
        if self.window is None:
            self.discard_prepared()
            return
        self.skipped = "another torch profiler started in this process; nrlprof's window was stopped early"
        logger.warning("%s: %s", self.role.worker_name, self.skipped)
        if self.profiler is not None:
            self.files.append(self._finish_session(f"steps{self.window.label}"))

    def _trace_directory(self) -> Path:
        """This process's trace directory, resolved once (its window's warm-up does it, off the stop)."""
        if self._directory is None:
            identity = self.role.identity
            directory = layout.trace_directory(self.role.plan.torch.directory,
                                               identity.file_name if identity else None, self.role.rank)  # fmt: skip
            self._directory = directory.resolve()
        return self._directory

    def _finish_session(self, label: str) -> str:
        profiler, self.profiler = self.profiler, None
        with self.guard.own_start():
            profiler.stop()
        settings = self.role.plan.torch
        identity = self.role.identity
        worker_file = identity.file_name if identity else layout.CONTROLLER
        name = layout.trace_file_name(worker_file, self.role.rank, label, os.getpid(), settings.gzip)
        target = FINISHER.unused_path(self._trace_directory() / name)
        # A path without `.gz`: torch then writes the file itself, and nrlprof compresses it while repairing.
        exported = target.with_name(f".{target.name}.partial")
        job = partial(_finish_file, profiler, exported, target, settings.gzip, self.finished,
                      f"{self.role.worker_name} {label}")  # fmt: skip
        if self.finishes_in_step:
            job()
        else:  # a worker's: once its next call begins, off the answer to the stop and the other workers' stops
            FINISHER.run(job, wait_for_next_call=not self.role.is_controller)
        return str(target)

    def stop_window(self) -> WindowRecord:
        if self.profiler is not None and not self.discrete:
            self.files.append(self._finish_session(f"steps{self.window.label}"))
        status = Status.TRUNCATED if self.truncated else Status.OK
        if self.skipped and not self.files:
            status = Status.SKIPPED
        record = self.record(list(self.files), status, "; ".join(filter(None, [self.truncated, self.skipped])))
        self.window = None
        return _completed(self.finished, record, beside=False) if self.finishes_in_step else record

    def completion(self):
        return None if self.finishes_in_step else partial(_completed, self.finished)
