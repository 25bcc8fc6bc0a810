"""The parts of a summary that come from nrlprof's other recorders: memory figures and the step anatomy.

Each is present only where its files are under the summarised directory (`*.memory.json` / `*.pickle`;
a step-anatomy run directory, e.g. `NRL_STEP_ANATOMY_DIR` or a directory holding `step_anatomy/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrlprof.tools.read.inputs import Inputs

if TYPE_CHECKING:
    from nrlprof.tools.figures.anatomy_tables import AnatomyTables
    from nrlprof.tools.figures.memory import MemoryReading
    from nrlprof.tools.read.anatomy import ProfiledNames


def memory_section(reading: MemoryReading) -> dict[str, Any] | None:
    """The memory model and its findings, or None where no memory file was read."""
    from nrlprof.tools.figures.memory import memory_findings, memory_model_of

    model = memory_model_of(reading)
    if not model["workers"] and not model["snapshots"] and not model["skipped"]:
        return None
    model["findings"] = memory_findings(model)
    return model


def anatomy_run(directory: Path, found: Inputs) -> Path | None:
    """The latest step-anatomy run in `directory` or below it, if any."""
    from nrlprof.tools.read.anatomy import anatomy_runs

    runs = anatomy_runs(directory, found.anatomy_dirs)
    return runs[-1] if runs else None


def anatomy_tables_of(run: Path | None, profiled: ProfiledNames | None = None) -> AnatomyTables | None:
    """The step anatomy of `run` as tables, its workers named as their profiler files name them (`profiled`)."""
    if run is None:
        return None
    from nrlprof.tools.figures.anatomy_tables import anatomy_tables
    from nrlprof.tools.read.anatomy_calls import read_run_calls

    return anatomy_tables(read_run_calls(run, profiled))


def anatomy_section(tables: AnatomyTables | None) -> dict[str, Any] | None:
    """The step anatomy as `summary --json` holds it."""
    from nrlprof.tools.figures.anatomy import public_model

    return None if tables is None else public_model(tables)
