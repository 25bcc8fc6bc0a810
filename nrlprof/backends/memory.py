"""Memory per step: host RSS and CUDA allocator figures at every step of a window, an allocator snapshot per window.

Figures for step n are taken when step n ends (the next step, or the window's stop): host RSS and its
peak during the step (the kernel's high-water mark, reset at each step start), and, in a process where
CUDA is already initialised, per device `memory_allocated`, `memory_reserved` and the peak allocated
during the step.  CUDA is never initialised here.  The figures file is rewritten (atomically) as each step's
figures are taken, so a process killed at step k (SIGKILL, the OOM killer) leaves those of steps up to k-1.
In CUDA processes the allocator's history is recorded from the window's start and dumped as a `.pickle` at its
end, one the viewer opens (nrlprof.backends.memory_snapshot).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from nrlprof import layout
from nrlprof.backends.base import Backend
from nrlprof.backends.host_budget import MB, HostBudget, host_rss_bytes
from nrlprof.backends.memory_snapshot import say_if_too_big, write_snapshot
from nrlprof.config.memory import memory_settings
from nrlprof.config.plan import MEMORY
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import Status, Trigger, WindowRecord
from nrlprof.process.import_hooks import imported


def host_peak_bytes() -> int | None:
    """The high-water mark of RSS since it was last reset (VmHWM)."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_host_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux `clear_refs` 5); False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def cuda_in_use():
    """torch.cuda when this process has already initialised CUDA; None otherwise (and nothing initialised)."""
    torch = imported("torch")
    if torch is None:
        return None
    try:
        return torch.cuda if torch.cuda.is_initialized() else None
    except Exception:
        return None


class MemoryBackend(Backend):
    kind = MEMORY

    def __init__(self, backend_plan, role, target=None) -> None:
        super().__init__(backend_plan, role, target)
        self.max_entries, self.on_oom, self.stacks = memory_settings(backend_plan.options_dict)
        # Each step's figures, serialised once: the file rewritten at every step costs a write, not a re-encoding.
        self.sample_lines: list[str] = []
        self.step_started: tuple[int, float] | None = None
        self.recording = False
        self.skip_said = False
        # slow:keep: the allocator history is what a process holds between steps; past this budget it stops.
        self.budget = HostBudget(role.plan.max_host_mb)
        self.keep_history_stopped = False

    def start_window(self, window: Window, step: int, history: bool = True) -> None:
        self.window, self.steps_seen, self.started_at, self.sample_lines = window, [], time.time(), []
        cuda = cuda_in_use()
        if cuda is not None:
            self.recording = history and self._record_history(cuda)
        elif not self.skip_said:
            self.skip_said = True
            logger.info(
                "memory: %s has not initialised CUDA; allocator snapshots are skipped in it, per-step figures kept",
                self.role.worker_name,
            )
        self.mark_step(step)

    def _record_history(self, cuda) -> bool:
        try:
            cuda.memory._record_memory_history(max_entries=self.max_entries, stacks=self.stacks)
            return True
        except Exception as err:
            logger.warning("memory: allocator history unavailable in %s: %s", self.role.worker_name, err)
            return False

    def mark_step(self, step: int) -> None:
        self._close_step()
        self.steps_seen.append(step)
        reset_host_peak()
        cuda = cuda_in_use()
        if cuda is not None:
            for device in range(cuda.device_count()):
                cuda.reset_peak_memory_stats(device)
        self.step_started = (step, time.monotonic())

    def _close_step(self) -> Path | None:
        """The figures of the step that ends, added to the window's file; the file, if it was written."""
        if self.step_started is None:
            return None
        step, began = self.step_started
        self.step_started = None
        wall_ms = (time.monotonic() - began) * 1000
        # t_us: wall clock at the step's end, as torch traces count it, so merge can place the figures.
        sample: dict = {
            "step": step,
            "wall_ms": wall_ms,
            "t_us": time.time_ns() / 1000,
            "host_rss_mb": host_rss_bytes() / MB,
        }
        peak = host_peak_bytes()
        if peak is not None:
            sample["host_peak_mb"] = max(peak, host_rss_bytes()) / MB
        cuda = cuda_in_use()
        if cuda is not None:
            sample["cuda"] = {
                str(device): {
                    "allocated_mb": cuda.memory_allocated(device) / MB,
                    "reserved_mb": cuda.memory_reserved(device) / MB,
                    "peak_mb": cuda.max_memory_allocated(device) / MB,
                }
                for device in range(cuda.device_count())
            }
        self.sample_lines.append(json.dumps(sample))
        try:
            return self._write_figures(f"steps{self.window.label}")
        except OSError as err:
            logger.warning("memory: figures of %s could not be written: %s", self.role.worker_name, err)
            return None

    def _path(self, label: str, suffix: str) -> Path:
        identity = self.role.identity
        worker_file = identity.file_name if identity else layout.CONTROLLER
        directory = layout.trace_directory(
            self.backend_plan.output_dir or "memory_profile", identity.file_name if identity else None, self.role.rank
        )
        directory.mkdir(parents=True, exist_ok=True)
        return directory / layout.memory_file_name(worker_file, self.role.rank, label, os.getpid(), suffix)

    def stop_window(self) -> WindowRecord:
        label = f"steps{self.window.label}"
        figures = self._close_step() or self._write_figures(label)
        files = [str(figures)]
        if self.recording:
            snapshot = self._dump_snapshot(label)
            if snapshot is not None:
                files.append(str(snapshot))
        record = self.record(files, Status.OK, "" if self.recording else "no CUDA in this process: figures only")
        self.window = None
        return record

    def begin_kept(self, step: int) -> bool:
        """slow:keep: this step's figures (and, with CUDA, its allocator history), kept only if it is slow. Past the
        host budget, the history is no longer recorded; the figures, a few numbers a step, still are."""
        self.trigger = None
        self.start_window(Window(step, step), step, history=not self.keep_history_stopped)
        if self.recording:
            self.budget.begin()
        self.keeping = True
        return True

    def end_kept(self, trigger: Trigger | None) -> WindowRecord | None:
        self.keeping = False
        grown = self.budget.grown_past() if self.recording else None
        if trigger is not None:
            self.trigger = trigger
            record = self.stop_window()
        else:
            record = None
            self.step_started = None  # nothing written
            if self.recording and not self.on_oom:
                cuda_in_use().memory._record_memory_history(enabled=None)
            self.recording = False
            self.window = None
        if grown is not None:
            self.keep_history_stopped = True
            logger.warning("%s rank %s: slow:keep records no more allocator history: step %s grew the process by "
                           "%.0f MB, past its host budget of %s MB (NRL_PROFILE_MAX_HOST_MB); per-step figures go on",
                           self.role.worker_name, self.role.rank, self.steps_seen[-1], grown,
                           self.budget.budget_mb)  # fmt: skip
        return record

    def _write_figures(self, label: str) -> Path:
        path = self._path(label, layout.MEMORY_FIGURES_SUFFIX)
        steps = ",\n".join(self.sample_lines)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(f'{{"nrlprof": {json.dumps(self.about(self.window))},\n"steps": [\n{steps}\n]}}\n')
        os.replace(partial, path)
        return path

    def _dump_snapshot(self, label: str) -> Path | None:
        cuda = cuda_in_use()
        path = self._path(label, layout.MEMORY_SNAPSHOT_SUFFIX)
        try:
            size = write_snapshot(cuda.memory._snapshot(), path)
            say_if_too_big(size, path, self.role.worker_name, self.max_entries, self.stacks)
            return path
        except Exception as err:
            logger.warning("memory: snapshot of %s failed: %s", self.role.worker_name, err)
            return None
        finally:
            if not self.on_oom:  # with snapshot-on-OOM, history keeps recording for the next failure
                cuda.memory._record_memory_history(enabled=None)
            self.recording = False


def arm_oom_snapshot(backend: MemoryBackend) -> bool:
    """Record allocator history from CUDA's start and dump it when this process runs out of memory.

    Queued until the process initialises CUDA (never initialised here); False where torch is missing.
    The job's own handling of the error is unchanged: the observer only writes the snapshot.
    """
    try:
        import torch
    except ImportError:
        return False
    from nrlprof.manifest import append_record

    def on_oom(device: int, allocated: int, device_allocated: int, device_free: int) -> None:
        path = backend._path("oom", layout.MEMORY_SNAPSHOT_SUFFIX)
        write_snapshot(torch.cuda.memory._snapshot(), path)
        message = f"out of memory on device {device}: {allocated / MB:.0f} MB requested, {device_free / MB:.0f} MB free"
        record = WindowRecord(MEMORY, backend.role.worker_name, backend.role.rank, (), "oom", (str(path),), Status.OOM,
                              message)  # fmt: skip
        append_record(layout.manifest_dir(backend.role.session_dir, backend.role.plan.torch.directory), record)
        logger.error("memory: %s: %s; allocator snapshot %s", backend.role.worker_name, message, path)

    def arm() -> None:
        torch.cuda.memory._record_memory_history(max_entries=backend.max_entries, stacks=backend.stacks)
        torch._C._cuda_attach_out_of_memory_observer(on_oom)

    torch.cuda._lazy_call(arm)
    return True
