"""The parts of a summary that come from nrlprof's other recorders: memory figures and the step anatomy.

Each is present only where its files are under the summarised directory (`*.memory.json` / `*.pickle`;
a step-anatomy run directory, e.g. `NRL_STEP_ANATOMY_DIR` or a directory holding `step_anatomy/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrlprof.tools.read.inputs import Inputs

if TYPE_CHECKING:
    from nrlprof.tools.figures.memory import MemoryReading


def memory_section(reading: MemoryReading) -> dict[str, Any] | None:
    """The memory model and its findings, or None where no memory file was read."""
    from nrlprof.tools.figures.memory import memory_findings, memory_model_of

    model = memory_model_of(reading)
    if not model["workers"] and not model["snapshots"] and not model["skipped"]:
        return None
    model["findings"] = memory_findings(model)
    return model


def anatomy_section(directory: Path, found: Inputs) -> dict[str, Any] | None:
    from nrlprof.tools.figures.anatomy import anatomy_summary
    from nrlprof.tools.read.anatomy import anatomy_runs

    runs = anatomy_runs(directory, found.anatomy_dirs)
    if not runs:
        return None
    return anatomy_summary(runs[-1])
