"""The memory backend's per-step figures files, written here in its format at the path it writes them to."""

from __future__ import annotations

import json
from pathlib import Path


def write_figures(
    root: Path,
    worker: str,
    rank: int | None,
    steps: list[dict],
    pid: int = 4242,
    host: str = "node-a",
) -> Path:
    """A `.memory.json` as the memory backend writes it, at the path it writes it to."""
    window = f"{steps[0]['step']}-{steps[-1]['step']}"
    directory = root / worker / str(rank if rank is not None else 0)
    directory.mkdir(parents=True, exist_ok=True)
    rank_part = "" if rank is None else f".rank{rank}"
    path = directory / f"{worker}{rank_part}.steps{window}.{pid}.memory.json"
    block = {"worker": worker, "rank": rank, "window": window, "pid": pid, "host": host, "backend": "memory"}
    path.write_text(json.dumps({"nrlprof": block, "steps": steps}, indent=1))
    return path


def host_steps(rss: list[float], first: int = 2, peak_extra: float = 40.0) -> list[dict]:
    return [
        {"step": first + i, "wall_ms": 100.0, "host_rss_mb": value, "host_peak_mb": value + peak_extra}
        for i, value in enumerate(rss)
    ]
