"""PyTorch profiler: one `torch.profiler` session per window, one trace file per window."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from nrlprof.backends.base import Backend
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.plan import TORCH
from nrlprof.steps import Window

STEP_MARKER = "ProfilerStep#{}"


def trace_directory(torch_dir: str, worker_file_name: str | None, rank: int | None) -> Path:
    """`<dir>/<worker>/<rank>/` for workers; `<dir>/` for the controller."""
    base = Path(torch_dir)
    if worker_file_name is None:
        return base
    return base / worker_file_name / str(rank if rank is not None else 0)


def trace_file_name(worker_file_name: str, rank: int | None, window_label: str, gzip: bool) -> str:
    rank_part = "" if rank is None else f".rank{rank}"
    suffix = ".pt.trace.json.gz" if gzip else ".pt.trace.json"
    return f"{worker_file_name}{rank_part}.steps{window_label}.{os.getpid()}{suffix}"


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

    def __init__(self, backend_plan, role) -> None:
        super().__init__(backend_plan, role)
        self.profiler = None
        self.step_marker = None

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

    def start_window(self, window: Window, step: int) -> None:
        from torch.profiler import profile

        settings = self.role.plan.torch
        self.window, self.steps_seen, self.started_at = window, [], time.time()
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
        self.mark_step(step)

    def mark_step(self, step: int) -> None:
        from torch.profiler import record_function

        self._close_marker()
        self.steps_seen.append(step)
        self.step_marker = record_function(STEP_MARKER.format(step))
        self.step_marker.__enter__()

    def _close_marker(self) -> None:
        if self.step_marker is not None:
            self.step_marker.__exit__(None, None, None)
            self.step_marker = None

    def stop_window(self) -> WindowRecord:
        self._close_marker()
        profiler, self.profiler = self.profiler, None
        profiler.stop()
        settings = self.role.plan.torch
        identity = self.role.identity
        worker_file = identity.file_name if identity else "controller"
        directory = trace_directory(settings.directory, identity.file_name if identity else None, self.role.rank)
        directory.mkdir(parents=True, exist_ok=True)
        label = self.window.label if self.window else "none"
        target = unused_path(directory / trace_file_name(worker_file, self.role.rank, label, settings.gzip))
        partial = target.with_name(f".{target.name}.partial{'.gz' if settings.gzip else ''}")
        profiler.export_chrome_trace(str(partial))
        os.replace(partial, target)
        logger.debug("torch trace for %s steps %s: %s", self.role.worker_name, label, target)
        record = self.record([str(target.resolve())])
        self.window = None
        return record
