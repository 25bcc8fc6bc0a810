"""PyTorch profiler: one `torch.profiler` session per window, one trace file per window."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from nrlprof.backends.base import Backend
from nrlprof.config.plan import TORCH
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.workers.identity import file_safe

STEP_MARKER = "ProfilerStep#{}"


def trace_directory(torch_dir: str, worker_file_name: str | None, rank: int | None) -> Path:
    """`<dir>/<worker>/<rank>/` for workers; `<dir>/` for the controller."""
    base = Path(torch_dir)
    if worker_file_name is None:
        return base
    return base / worker_file_name / str(rank if rank is not None else 0)


def trace_file_name(worker_file_name: str, rank: int | None, label: str, gzip: bool) -> str:
    """`<worker>.rank<r>.<label>.<pid>.pt.trace.json`, label `steps3-4` or (discrete) `step3.<method>`."""
    rank_part = "" if rank is None else f".rank{rank}"
    suffix = ".pt.trace.json.gz" if gzip else ".pt.trace.json"
    return f"{worker_file_name}{rank_part}.{label}.{os.getpid()}{suffix}"


def unused_path(path: Path) -> Path:
    """The path itself, or with `.1`, `.2`... before the suffixes: a later window never overwrites."""
    if not path.exists():
        return path
    stem, dot, suffixes = path.name.partition(".pt.trace")
    counter = 1
    while True:
        candidate = path.with_name(f"{stem}.{counter}{dot}{suffixes}")
        if not candidate.exists():
            return candidate
        counter += 1


class TorchBackend(Backend):
    kind = TORCH

    def __init__(self, backend_plan, role, target=None) -> None:
        super().__init__(backend_plan, role, target)
        self.profiler = None
        self.step_marker = None
        self.files: list[str] = []
        self.call_label = ""

    def _activities(self) -> list:
        import torch
        from torch.profiler import ProfilerActivity

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        return activities

    def _metadata(self, window: Window) -> dict[str, str]:
        rank = self.role.rank if self.role.rank is not None else 0
        world_size = int(os.environ.get("WORLD_SIZE", "0") or 0) or rank + 1
        nrlprof_block = {
            "worker": self.role.worker_name,
            "rank": self.role.rank,
            "steps": list(window.steps),
            "window": window.label,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "backend": TORCH,
        }
        metadata = {"nrlprof": json.dumps(nrlprof_block)}
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            metadata["distributedInfo"] = json.dumps({"rank": rank, "world_size": world_size, "backend": "none"})
        return metadata

    def _start_session(self, window: Window) -> None:
        from torch.profiler import profile

        settings = self.role.plan.torch
        self.profiler = profile(
            activities=self._activities(),
            record_shapes=settings.record_shapes,
            profile_memory=settings.profile_memory,
            with_stack=settings.with_stack,
            with_flops=settings.with_flops,
        )
        for key, value in self._metadata(window).items():
            self.profiler.preset_metadata_json(key, value)
        self.profiler.start()

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at, self.files = window, [], time.time(), []
        if not self.discrete:
            self._start_session(window)
        self.mark_step(step)

    def begin_call(self, label: str) -> None:
        from torch.profiler import record_function

        step = self.steps_seen[-1]
        self.call_label = label
        self._start_session(Window(step, step))
        self.step_marker = record_function(STEP_MARKER.format(step))
        self.step_marker.__enter__()

    def end_call(self) -> None:
        self._close_marker()
        step = self.steps_seen[-1]
        self.files.append(self._finish_session(f"step{step}.{file_safe(self.call_label)}"))

    def mark_step(self, step: int) -> None:
        from torch.profiler import record_function

        self.steps_seen.append(step)
        if self.discrete:
            return
        self._close_marker()
        self.step_marker = record_function(STEP_MARKER.format(step))
        self.step_marker.__enter__()

    def _close_marker(self) -> None:
        if self.step_marker is not None:
            self.step_marker.__exit__(None, None, None)
            self.step_marker = None

    def _finish_session(self, label: str) -> str:
        profiler, self.profiler = self.profiler, None
        profiler.stop()
        settings = self.role.plan.torch
        identity = self.role.identity
        worker_file = identity.file_name if identity else "controller"
        directory = trace_directory(settings.directory, identity.file_name if identity else None, self.role.rank)
        directory.mkdir(parents=True, exist_ok=True)
        target = unused_path(directory / trace_file_name(worker_file, self.role.rank, label, settings.gzip))
        partial = target.with_name(f".{target.name}.partial{'.gz' if settings.gzip else ''}")
        profiler.export_chrome_trace(str(partial))
        os.replace(partial, target)
        logger.debug("torch trace for %s %s: %s", self.role.worker_name, label, target)
        return str(target.resolve())

    def stop_window(self) -> WindowRecord:
        self._close_marker()
        if self.profiler is not None:
            self.files.append(self._finish_session(f"steps{self.window.label}"))
        record = self.record(list(self.files))
        self.window = None
        return record
