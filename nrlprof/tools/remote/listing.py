"""Which files of one job each node holds (the rule `collect` takes them by), listed there without reading them.

A file is named `<node>:<path on the node>` in what the tools print, and ordered by the place `collect` would copy
it to (`<node>/<dest>`), so that a summary read on the nodes lists its items in the order a summary of the
collected directory does.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from nrlprof.tools.cluster import NodeInfo, run_on_nodes
from nrlprof.tools.collect.collector import choose_sessions
from nrlprof.tools.collect.scan import node_temp_dir, scan_outputs


@dataclass(frozen=True)
class NodeFile:
    source: str  # absolute path on the node
    dest: str  # where collect copies it, below DIR/<node>
    size: int


@dataclass
class NodeFiles:
    """One node's files of the job, or why they could not be listed."""

    node: NodeInfo
    files: list[NodeFile] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)  # refused by collect's rule: path, reason
    error: str | None = None

    def shown(self, source: str) -> Path:
        """How a file of this node is named: `<node>:<path>`."""
        return Path(f"{self.node.label}:{source}")


def list_files_here(sessions: list[str] | None, allowed_roots: list[str]) -> dict[str, Any]:
    """Runs on a node: (source, dest, size) of the job's files there, and what collect's rule refused."""
    scan = scan_outputs(node_temp_dir(), sessions, allowed_roots)
    files = []
    for source, dest in sorted(scan.found.items(), key=lambda item: PurePosixPath(item[1]).parts):
        try:
            info = os.lstat(source)
        except OSError:
            continue  # gone since the scan
        if stat.S_ISREG(info.st_mode):
            files.append((source, dest, info.st_size))
    return {"files": files, "rejected": scan.rejected}


def list_job_files(
    nodes: list[NodeInfo],
    session: str | None,
    all_sessions: bool,
    allowed_roots: list[str],
    timeout_s: float,
) -> tuple[list[str] | None, list[NodeFiles]]:
    """The job's session dirs (chosen as collect chooses them) and each node's files in them."""
    sessions = choose_sessions(nodes, session, all_sessions, timeout_s)
    answers = run_on_nodes(
        list_files_here, nodes, lambda node: (sessions, allowed_roots), timeout_s, "listing the job's files"
    )
    listings = []
    for answer in answers:
        listing = NodeFiles(answer.node, error=answer.error)
        if answer.error is None:
            listing.files = [NodeFile(*item) for item in answer.value["files"]]
            listing.rejected = answer.value["rejected"]
        listings.append(listing)
    return sessions, listings


class WalkOrder:
    """The order of one walk of the collected directory, for the paths of files named `<node>:<path>`."""

    def __init__(self, listings: list[NodeFiles]) -> None:
        self._keys = {
            str(listing.shown(f.source)): PurePosixPath(listing.node.label, f.dest).parts
            for listing in listings
            for f in listing.files
        }

    def __call__(self, path: Path) -> tuple[str, ...]:
        return self._keys.get(str(path)) or PurePosixPath(str(path)).parts
