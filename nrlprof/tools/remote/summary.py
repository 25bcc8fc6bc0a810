"""`nrlprof summary --address`: a job's summary read on the nodes that hold its files; only figures move.

The job is chosen as `collect` chooses it; each node's files (collect's rule) are read there by at most
`jobs_per_node` tasks, at low priority and asking Ray for no CPU (runner, node_work), into figures
(figures.file_set); the driver assembles them into the summary a local run over the collected files gives, the
same apart from paths (`<node>:<path on the node>`), with the step anatomy read here. A node that cannot be
listed or read is in `skipped` (each of its files, or the node when nothing could be listed) with its reason.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.tools.cluster import NodeError, connected
from nrlprof.tools.figures.file_set import FileSetFigures
from nrlprof.tools.figures.model import Summary
from nrlprof.tools.figures.summarize import NOTHING_FOUND, assemble
from nrlprof.tools.progress import ProgressCallback
from nrlprof.tools.remote.job import ClusterJob
from nrlprof.tools.remote.listing import NodeFiles, WalkOrder
from nrlprof.tools.remote.node_work import NICE
from nrlprof.tools.remote.read_figures import read_share
from nrlprof.tools.remote.runner import Share, run_shares
from nrlprof.tools.remote.shares import split_shares


@dataclass
class ClusterReading:
    """How a summary was read on the cluster: what the tools print beside it."""

    where: str
    sessions: list[str] | None = None
    nodes: list[NodeFiles] = field(default_factory=list)
    node_errors: list[NodeError] = field(default_factory=list)
    files: int = 0
    bytes_listed: int = 0
    bytes_received: int = 0  # the figures, as pickled: what crossed to the driver
    readers: dict[str, list[int]] = field(default_factory=dict)  # node label -> pids of the processes that read
    nice: list[int] = field(default_factory=list)  # the nice each share was read at
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """What to say on stderr: what was read where, what came back; each node that failed; each refusal."""
        readers = sum(len(set(pids)) for pids in self.readers.values())
        said = [
            f"read {self.files} file(s), {self.bytes_listed / 1e6:.1f} MB, on {len(self.nodes)} node(s) "
            f"({readers} process(es), nice {min(self.nice, default=0)}) in {self.seconds:.1f} s; "
            f"{self.bytes_received / 1e3:.1f} kB of figures came back ({self.where})"
        ]
        said += [f"warning: {error.reason}" for error in self.node_errors]
        for listing in self.nodes:
            said += [f"refused on {listing.node.label}: {r['path']}: {r['reason']}" for r in listing.rejected]
        return said


def summarize_cluster(
    job: ClusterJob | None = None,
    *,
    progress: ProgressCallback | None = None,
    after_listing: Callable[[list[NodeFiles]], None] | None = None,
    anatomy_view: bool = True,
) -> tuple[Summary, ClusterReading]:
    """The summary of `job` (default: the job of the local cluster), read on its nodes; BadInput for no cluster,
    ToolError for no files.

    `after_listing` runs between listing and reading (tests remove a node there). `anatomy_view`: as `summarize`'s.
    """
    job = job or ClusterJob()
    started = time.monotonic()
    anatomy = job.anatomy_run()
    with connected(job.address):
        sessions, listings = job.list_files()
        if after_listing is not None:
            after_listing(listings)
        shares = [
            Share(listing, files)
            for listing in listings
            if listing.error is None
            for files in split_shares(listing.files, job.jobs_per_node)
        ]
        results = run_shares(
            shares, read_share, lambda share: ([f.source for f in share.files], NICE), "reading its files", progress,
            job.read_timeout_s,
        )  # fmt: skip
    reading = ClusterReading(job.where(sessions), sessions, listings)
    parts: list[FileSetFigures] = []
    lost: list[tuple[Path, str]] = []
    for listing in listings:
        reading.files += len(listing.files)
        reading.bytes_listed += sum(f.size for f in listing.files)
        if listing.error is not None:
            lost.append((Path(f"{listing.node.label}:"), listing.error))
            _node_error(reading, listing, listing.error)
    for result in results:
        listing = result.share.listing
        if result.error is not None:
            lost += [(listing.shown(f.source), f"not read: {result.error}") for f in result.share.files]
            _node_error(reading, listing, result.error)
            continue
        figures: FileSetFigures = result.value["result"]
        reading.bytes_received += len(pickle.dumps(figures, protocol=pickle.HIGHEST_PROTOCOL))
        reading.readers.setdefault(listing.node.label, []).append(result.value["pid"])
        reading.nice.append(result.value["nice"])
        figures.relabel(lambda path, listing=listing: listing.shown(str(path)))
        parts.append(figures)
    if not any(part.inputs for part in parts) and anatomy is None and not lost:
        raise ToolError(NOTHING_FOUND, reading.where)
    summary = assemble(reading.where, parts, anatomy, WalkOrder(listings), anatomy_view)
    summary.skipped.extend(lost)
    reading.seconds = round(time.monotonic() - started, 3)
    return summary, reading


def _node_error(reading: ClusterReading, listing: NodeFiles, reason: str) -> None:
    if all(error.node_id != listing.node.node_id for error in reading.node_errors):
        reading.node_errors.append(NodeError(listing.node.label, listing.node.node_id, reason))
