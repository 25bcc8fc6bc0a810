"""Two runs compared (`nrlprof diff A B`): per worker x rank x step, each figure in both and the change.

A and B are each a run directory (summarised here) or a file written by `nrlprof summary --json` of this
format (figures.model.FORMAT).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.tools.figures.model import FORMAT, figure_changes

FIGURES = ("wall_ms", "gpu_kernel_ms", "gpu_busy_pct", "gpu_idle_ms", "comm_ms", "memcpy_ms")
Key = tuple[str, Any, int]


def load_summary(path: Path) -> dict[str, Any]:
    """The `summary --json` object of a run directory or of a file holding one."""
    path = Path(path)
    if path.is_dir():
        from nrlprof.tools.figures.summarize import summarize

        return summarize(path).to_json()
    if not path.is_file():
        raise ToolError("no such file or directory", path)
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise ToolError(f"not a JSON file ({type(exc).__name__}: {exc})", path) from exc
    workers = data.get("workers") if isinstance(data, dict) else None
    if not isinstance(workers, list) or not all(isinstance(w, dict) for w in workers):
        raise ToolError("not a summary: expected the JSON object `nrlprof summary --json` writes, with workers", path)
    written = data.get("format")
    if written != FORMAT:
        which = "no format key (an nrlprof before format 1)" if written is None else f"format {written!r:.20}"
        raise ToolError(f"a summary of {which}; this nrlprof reads format {FORMAT}: summarise the run again", path)
    return data


def step_figures(data: dict[str, Any], source: Path) -> dict[Key, dict[str, float]]:
    """(worker, rank, step) -> the figures of that step; ToolError naming `source` for a malformed entry."""
    result: dict[Key, dict[str, float]] = {}
    for entry in data["workers"]:
        steps = entry.get("steps")
        if not isinstance(steps, dict):
            raise ToolError(f"worker {str(entry.get('worker'))[:60]!r}: steps is not an object", source)
        for step, figures in steps.items():
            if not (isinstance(step, str) and step.isdigit() and isinstance(figures, dict)):
                raise ToolError(
                    f"worker {str(entry.get('worker'))[:60]!r}: step {str(step)[:20]!r} is malformed", source
                )
            key = (str(entry.get("worker")), entry.get("rank"), int(step))
            values = {k: float(v) for k in FIGURES if isinstance(v := figures.get(k), (int, float)) and v == v}
            result[key] = values
    return result


def compare(a: dict[str, Any], b: dict[str, Any], source_a: Path, source_b: Path) -> dict[str, Any]:
    """Rows of figures in both runs with their change; keys found in one run only, listed apart."""
    changes = figure_changes(step_figures(a, source_a), step_figures(b, source_b), FIGURES, _order)
    result = {"a": str(source_a), "b": str(source_b), **changes}
    if "memory" in a and "memory" in b:
        from nrlprof.tools.figures.memory import memory_diff

        result["memory"] = memory_diff(a["memory"], b["memory"])
    if "anatomy" in a and "anatomy" in b:
        from nrlprof.tools.figures.anatomy import anatomy_diff

        result["anatomy"] = anatomy_diff(a["anatomy"], b["anatomy"])
    return result


def _order(key: Key) -> tuple:
    worker, rank, step = key
    return (worker, rank if isinstance(rank, int) else -1, step)
