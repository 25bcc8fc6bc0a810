"""Reading what the memory backend writes: the per-window `.memory.json` figures (tools.read.inputs finds them).

A file that is not JSON, or whose values are not of the types the backend writes, is skipped with its
reason; nothing here raises for a bad file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.tools.read.traces import is_number

HOST_FIGURES = ("host_rss_mb", "host_peak_mb")
CUDA_FIGURES = ("allocated_mb", "reserved_mb", "peak_mb")
MAX_FIGURES_BYTES = 64 << 20


@dataclass
class StepFigures:
    step: int
    wall_ms: float | None
    host: dict[str, float]
    cuda: dict[str, dict[str, float]]
    end_us: float | None = None


@dataclass
class MemoryFile:
    path: Path
    worker: str
    rank: int | None
    window: str
    pid: int | None
    host: str
    steps: list[StepFigures] = field(default_factory=list)


def _is_int(value: Any) -> bool:
    return value.__class__ is int


def _step(entry: Any, index: int) -> StepFigures:
    if not isinstance(entry, dict):
        raise ValueError(f"steps[{index}] is {type(entry).__name__}, expected an object")
    if not _is_int(entry.get("step")):
        raise ValueError(f"steps[{index}].step is {entry.get('step')!r:.40}, expected an integer")
    host = {}
    for name in HOST_FIGURES:
        value = entry.get(name)
        if value is not None and not is_number(value):
            raise ValueError(f"steps[{index}].{name} is {value!r:.40}, expected a number")
        if value is not None:
            host[name] = float(value)
    cuda_block = entry.get("cuda", {})
    if not isinstance(cuda_block, dict):
        raise ValueError(f"steps[{index}].cuda is {type(cuda_block).__name__}, expected an object")
    cuda: dict[str, dict[str, float]] = {}
    for device, figures in cuda_block.items():
        if not isinstance(figures, dict) or not all(is_number(figures.get(n)) for n in CUDA_FIGURES):
            raise ValueError(f"steps[{index}].cuda[{device!r:.20}] is not an object of {', '.join(CUDA_FIGURES)}")
        cuda[str(device)] = {n: float(figures[n]) for n in CUDA_FIGURES}
    wall = entry.get("wall_ms")
    end = entry.get("t_us")
    return StepFigures(
        entry["step"],
        float(wall) if is_number(wall) else None,
        host,
        cuda,
        float(end) if is_number(end) else None,
    )


def read_memory_file(path: Path) -> MemoryFile:
    """The figures of one file; ValueError with the reason when it is not what the memory backend writes."""
    try:
        size = path.stat().st_size
        if size > MAX_FIGURES_BYTES:
            raise ValueError(f"{size} bytes, more than a figures file holds ({MAX_FIGURES_BYTES})")
        document = json.loads(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot be read ({type(exc).__name__}: {exc})") from exc
    except RecursionError as exc:
        raise ValueError("not JSON as the memory backend writes it (nested too deep)") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"not JSON (not UTF-8: {exc})") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise ValueError(f"holds {type(document).__name__}, expected an object with nrlprof and steps")
    block, steps = document.get("nrlprof"), document.get("steps")
    if not isinstance(block, dict) or not isinstance(steps, list):
        raise ValueError("expected an object with an `nrlprof` object and a `steps` list")
    worker, rank, pid = block.get("worker"), block.get("rank"), block.get("pid")
    if not isinstance(worker, str) or not worker:
        raise ValueError(f"nrlprof.worker is {worker!r:.40}, expected a name")
    if rank is not None and not _is_int(rank):
        raise ValueError(f"nrlprof.rank is {rank!r:.40}, expected an integer")
    if pid is not None and not _is_int(pid):
        raise ValueError(f"nrlprof.pid is {pid!r:.40}, expected an integer")
    window = block.get("window")
    parsed = [_step(entry, i) for i, entry in enumerate(steps)]
    return MemoryFile(path, worker, rank, str(window or ""), pid, str(block.get("host") or "?"), parsed)


def read_memory_files(paths: list[Path]) -> tuple[list[MemoryFile], list[tuple[Path, str]]]:
    """The readable files and, for the others, (path, reason)."""
    files, skipped = [], []
    for path in paths:
        try:
            files.append(read_memory_file(path))
        except ValueError as exc:
            skipped.append((path, str(exc)))
    return files, skipped
