"""The parts of a summary that come from nrlprof's other recorders: memory figures and the step anatomy.

Each is present only where its files are under the summarised directory (`*.memory.json` / `*.pickle`;
a step-anatomy run directory, e.g. `NRL_STEP_ANATOMY_DIR` or a directory holding `step_anatomy/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError


def memory_section(directory: Path) -> dict[str, Any] | None:
    from nrlprof.tools.memory_view import memory_findings, memory_summary

    model = memory_summary(directory)
    if not model["workers"] and not model["snapshots"] and not model["skipped"]:
        return None
    model["findings"] = memory_findings(model)
    return model


def anatomy_section(directory: Path) -> dict[str, Any] | None:
    from nrlprof.anatomy import anatomy_summary

    runs = anatomy_runs(directory)
    if not runs:
        return None
    return anatomy_summary(runs[-1])


def anatomy_runs(directory: Path) -> list[Path]:
    """Step-anatomy runs directly in `directory`, in its `step_anatomy/`, or in any `step_anatomy/` below it."""
    from nrlprof.anatomy.files import run_directories

    try:
        runs = run_directories(directory)
    except ToolError:
        return []
    if runs:
        return runs
    for child in sorted(p for p in Path(directory).rglob("step_anatomy") if p.is_dir()):
        runs = run_directories(child)
        if runs:
            return runs
    return []


def sections(directory: Path) -> dict[str, Any]:
    """`{"memory": ..., "anatomy": ...}` with the sections whose files exist."""
    found = {"memory": memory_section(directory), "anatomy": anatomy_section(directory)}
    return {name: section for name, section in found.items() if section is not None}


def sections_text(found: dict[str, Any]) -> str:
    parts = []
    if "memory" in found:
        from nrlprof.tools.memory_view import render_memory_text

        parts.append(render_memory_text(found["memory"], found["memory"]["findings"]))
    if "anatomy" in found:
        from nrlprof.anatomy import render_anatomy_text

        parts.append(render_anatomy_text(found["anatomy"]))
    return "\n".join(parts)
