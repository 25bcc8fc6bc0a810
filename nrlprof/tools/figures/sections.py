"""The parts of a summary that come from nrlprof's other recorders: memory figures and the step anatomy.

Each is present only where its files are under the summarised directory (`*.memory.json` / `*.pickle`;
a step-anatomy run directory, e.g. `NRL_STEP_ANATOMY_DIR` or a directory holding `step_anatomy/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nrlprof.tools.read.anatomy import anatomy_runs


def memory_section(directory: Path) -> dict[str, Any] | None:
    from nrlprof.tools.figures.memory import memory_findings, memory_summary

    model = memory_summary(directory)
    if not model["workers"] and not model["snapshots"] and not model["skipped"]:
        return None
    model["findings"] = memory_findings(model)
    return model


def anatomy_section(directory: Path) -> dict[str, Any] | None:
    from nrlprof.tools.figures.anatomy import anatomy_summary

    runs = anatomy_runs(directory)
    if not runs:
        return None
    return anatomy_summary(runs[-1])


def sections(directory: Path) -> dict[str, Any]:
    """`{"memory": ..., "anatomy": ...}` with the sections whose files exist."""
    found = {"memory": memory_section(directory), "anatomy": anatomy_section(directory)}
    return {name: section for name, section in found.items() if section is not None}
