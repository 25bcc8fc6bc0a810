"""The step anatomy of a summary read on the cluster: the driver writes it, so it is read here."""

from __future__ import annotations

import os
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.tools.figures.sections import anatomy_run
from nrlprof.tools.read.inputs import Inputs


def default_anatomy_dir() -> Path:
    """Where a driver started here writes it: NRL_STEP_ANATOMY_DIR, else `step_anatomy` here."""
    from nrlprof.anatomy.settings import anatomy_settings

    return Path(anatomy_settings(os.environ, backends_configured=False).directory)


def local_anatomy(directory: Path | None) -> Path | None:
    """The newest step-anatomy run in `directory` (given: it must hold one), or in the default dir if any."""
    if directory is None:
        default = default_anatomy_dir()
        return anatomy_run(default, Inputs()) if default.is_dir() else None
    run = anatomy_run(Path(directory), Inputs())
    if run is None:
        raise ToolError("no step-anatomy run found here (expected a run-* directory, or step_anatomy/)", directory)
    return run
