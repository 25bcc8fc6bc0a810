"""`nrlprof merge --address`: a merged timeline of a job's chosen traces, each read and cut on its node.

Each node reads its traces' headers and its memory figures (small); the driver chooses the traces (merge.select),
estimates the timeline's size (merge.estimate), and plans every part as a local merge does. A task per share of a
node's chosen traces (at most `jobs_per_node`, low priority, no CPU asked) writes each part there, in the
output's compression, and streams it back in chunks; the driver splices the parts into the timeline. Only the
chosen events, compressed when the output is, move. A trace of a node that fails is skipped with the reason.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from nrlprof.errors import ToolError
from nrlprof.tools.cluster import connected, run_on_nodes
from nrlprof.tools.merge.estimate import SizedTrace, text_size
from nrlprof.tools.merge.select import EVERYTHING, Selection
from nrlprof.tools.merge.sink import Meter
from nrlprof.tools.merge.timeline import MergeInputs, MergeResult, Part, PartTask, write_part, write_timeline
from nrlprof.tools.output import check_output
from nrlprof.tools.progress import ProgressCallback
from nrlprof.tools.read.inputs import classify
from nrlprof.tools.read.memory import read_memory_files
from nrlprof.tools.read.traces import read_headers
from nrlprof.tools.remote.job import ClusterJob
from nrlprof.tools.remote.listing import NodeFile, NodeFiles
from nrlprof.tools.remote.node_work import NICE, Tally, relay
from nrlprof.tools.remote.runner import Share, run_shares
from nrlprof.tools.remote.shares import split_shares

CHUNK_SIZE = 8 << 20


def read_headers_here(sources: list[str]) -> dict[str, Any]:
    """Runs on a node: the headers of its traces (with their sizes), the unreadable ones, its memory figures."""
    found = classify(Path(s) for s in sources)
    headers, unreadable = read_headers(found.traces)
    memory, memory_unreadable = read_memory_files(found.memory_figures)
    traces = [(h, text_size(h.path), h.path.stat().st_size) for h in headers]
    return {"traces": traces, "unreadable": [*unreadable, *memory_unreadable], "memory": memory}


def write_parts_here(tasks: list[PartTask], nice: int = NICE, chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    """Runs on a node: each task's part written here, sent in chunks (`data`), then its figures (`done`)."""

    def work(tally: Tally) -> None:
        for task in tasks:
            base = tally.bytes
            with tempfile.TemporaryDirectory(prefix="nrlprof-merge-") as directory:
                local = replace(task, part=Path(directory) / "part")
                part = write_part(local, lambda consumed, base=base: tally.tick(base + consumed))
                if part.error is None and local.part.exists():
                    with open(local.part, "rb") as handle:
                        while data := handle.read(chunk_size):
                            tally.send({"task": task.index, "data": data})
                done = {"events": part.events, "names": part.names, "crc": part.crc, "size": part.size,
                        "error": part.error, "step_ends": part.step_ends}  # fmt: skip
                tally.send({"task": task.index, "done": done})
            tally.files, tally.bytes = tally.files + 1, base + task.disk_bytes

    yield from relay(work, nice)


class PartFiles:
    """The parts as they arrive from the nodes: each written to its task's part file here."""

    def __init__(self, tasks: list[PartTask]) -> None:
        self.tasks = {task.index: task for task in tasks}
        self.open: dict[int, BinaryIO] = {}
        self.parts: dict[int, Part] = {}
        self.bytes = 0  # that crossed to the driver
        self._lock = threading.Lock()

    def take(self, share: Share, message: dict[str, Any]) -> None:
        index = message["task"]
        task = self.tasks[index]
        if "data" in message:
            if index not in self.open:
                self.open[index] = open(task.part, "wb")  # noqa: SIM115 - closed with its `done`
            self.open[index].write(message["data"])
            with self._lock:
                self.bytes += len(message["data"])
            return
        handle = self.open.pop(index, None)
        if handle is not None:
            handle.close()
        done = message["done"]
        self.parts[index] = Part(task, done["events"], done["names"], done["crc"], done["size"], done["error"],
                                 done["step_ends"])  # fmt: skip


def remote_parts(where: dict[str, tuple[NodeFiles, NodeFile]], jobs_per_node: int, timeout_s: float, lines: list):
    """The PartMaker of a merge read on the nodes: `where` says which node holds each trace (by shown path)."""

    def make(tasks: list[PartTask], meter: Meter) -> Iterable[Part]:
        by_node: dict[str, tuple[NodeFiles, list[tuple[NodeFile, PartTask]]]] = {}
        for task in tasks:
            listing, file = where[str(task.path)]
            by_node.setdefault(listing.node.node_id, (listing, []))[1].append((file, task))
        shares, share_tasks = [], {}
        for listing, pairs in by_node.values():
            on_node = {file.source: (file, task) for file, task in pairs}
            for files in split_shares([file for file, _ in pairs], jobs_per_node):
                shares.append(Share(listing, files))
                share_tasks[id(shares[-1])] = [replace(on_node[f.source][1], path=Path(f.source)) for f in files]
        arrived = PartFiles(tasks)
        results = run_shares(shares, write_parts_here, lambda share: (share_tasks[id(share)], NICE),
                             "merging its traces", meter.progress, timeout_s, arrived.take)  # fmt: skip
        for result in results:
            if result.error is not None:
                lines.append(f"warning: {result.error}")
                for task in share_tasks[id(result.share)]:
                    arrived.parts.setdefault(task.index, Part(task, error=f"not read: {result.error}"))
        lines.append(f"{arrived.bytes / 1e6:.1f} MB of chosen events came from the nodes")
        for task in tasks:
            part = arrived.parts.get(task.index) or Part(task, error="no part came back from its node")
            yield replace(part, task=task)

    return make


def merge_on_cluster(
    job: ClusterJob,
    output: Path,
    *,
    selection: Selection = EVERYTHING,
    force: bool = False,
    ray_timeline: Path | None = None,
    strict: bool = False,
    progress: ProgressCallback | None = None,
) -> tuple[MergeResult, list[str]]:
    """The timeline of `job`, its traces read and cut on their nodes; what to say on stderr."""
    output = check_output(Path(output))
    anatomy = job.anatomy_run()
    lines: list[str] = []
    with connected(job.address):
        sessions, listings = job.list_files()
        lines.append(f"the job of {job.where(sessions)}")
        merge, where = _node_headers(listings, job.list_timeout_s, lines)
        if strict and merge.unreadable:
            raise ToolError(merge.unreadable[0][1], merge.unreadable[0][0])
        merge.anatomy_run = anatomy
        make_parts = remote_parts(where, job.jobs_per_node, job.read_timeout_s, lines)
        result = write_timeline(merge, output, make_parts, ray_timeline, progress, strict, selection=selection,
                                force=force)  # fmt: skip
    return result, lines


def _node_headers(
    listings: list[NodeFiles], timeout_s: float, lines: list[str]
) -> tuple[MergeInputs, dict[str, tuple[NodeFiles, NodeFile]]]:
    """Every node's trace headers and memory figures, their paths shown as `<node>:<path>`."""
    merge = MergeInputs([])
    where: dict[str, tuple[NodeFiles, NodeFile]] = {}
    usable = [listing for listing in listings if listing.error is None]
    by_node = {listing.node.node_id: listing for listing in usable}
    answers = run_on_nodes(read_headers_here, [listing.node for listing in usable],
                           lambda node: ([f.source for f in by_node[node.node_id].files],), timeout_s,
                           "reading its trace headers")  # fmt: skip
    merge.unreadable += [(listing.shown(""), listing.error) for listing in listings if listing.error is not None]
    for answer in answers:
        listing = by_node[answer.node.node_id]
        if answer.error is not None:
            merge.unreadable.append((Path(f"{listing.node.label}:"), answer.error))
            continue
        files = {f.source: f for f in listing.files}
        for header, text_bytes, disk_bytes in answer.value["traces"]:
            source = str(header.path)
            header.path = listing.shown(source)
            where[str(header.path)] = (listing, files[source])
            merge.traces.append(SizedTrace(header, text_bytes, disk_bytes))
        merge.unreadable += [(listing.shown(str(p)), reason) for p, reason in answer.value["unreadable"]]
        for memory in answer.value["memory"]:
            memory.path = listing.shown(str(memory.path))
            merge.memory_files.append(memory)
    lines += [f"warning: {reason}" for path, reason in merge.unreadable if str(path).endswith(":")]
    return merge, where
