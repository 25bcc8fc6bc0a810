"""The job a command reads where its files live, and how: what `summary`, `report`, `merge` and `diff` take with
`--address`, checked once, in one object."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.tools.cluster import BadInput, alive_nodes
from nrlprof.tools.collect.collector import allowed_roots
from nrlprof.tools.collect.pull import LIST_TIMEOUT_S
from nrlprof.tools.figures.sections import anatomy_run
from nrlprof.tools.read.inputs import Inputs
from nrlprof.tools.remote.listing import NodeFiles, list_job_files
from nrlprof.tools.remote.runner import READ_TIMEOUT_S


@dataclass
class ClusterJob:
    """The job on the cluster at `address` (None: `RAY_ADDRESS`, else the local one), chosen as `collect` chooses
    it (`session`, `all_sessions`, `allow_dirs`); read by `jobs_per_node` processes on each node; its step
    anatomy read here from `anatomy_dir` (None: the default directory, where there is one)."""

    address: str | None = None
    session: str | None = None
    all_sessions: bool = False
    allow_dirs: tuple[str, ...] = ()
    jobs_per_node: int = 1
    anatomy_dir: Path | None = None
    list_timeout_s: float = LIST_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S
    roots: list[str] = field(init=False)  # where files named by manifests may lie (collect's rule)

    def __post_init__(self) -> None:
        if self.jobs_per_node < 1:
            raise BadInput(f"--jobs-per-node {self.jobs_per_node} is not a positive number")
        if self.session is not None and self.all_sessions:
            raise BadInput("--session and --all-sessions exclude each other")
        self.roots = allowed_roots(list(self.allow_dirs))  # a bad --allow-dir is refused before joining a cluster

    def list_files(self) -> tuple[list[str] | None, list[NodeFiles]]:
        """The job's session dirs and each live node's files in them; inside `cluster.connected(address)`."""
        return list_job_files(alive_nodes(), self.session, self.all_sessions, self.roots, self.list_timeout_s)

    def anatomy_run(self) -> Path | None:
        """The newest step-anatomy run here (the driver wrote it here); ToolError where `anatomy_dir` was given
        and holds none."""
        if self.anatomy_dir is None:
            default = default_anatomy_dir()
            return anatomy_run(default, Inputs()) if default.is_dir() else None
        run = anatomy_run(Path(self.anatomy_dir), Inputs())
        if run is None:
            raise ToolError(
                "no step-anatomy run found here (expected a run-* directory, or step_anatomy/)", self.anatomy_dir
            )
        return run

    def where(self, sessions: list[str] | None) -> str:
        """`cluster <address>: <the sessions read>`, the name the paths and lines of a reading go under."""
        which = "every session" if sessions is None else ", ".join(sessions) or "no session"
        return f"cluster {self.address or 'auto'}: {which}"


def default_anatomy_dir() -> Path:
    """Where a driver started here writes it: NRL_STEP_ANATOMY_DIR, else `step_anatomy` here."""
    from nrlprof.anatomy.settings import anatomy_settings

    return Path(anatomy_settings(os.environ, backends_configured=False).directory)
