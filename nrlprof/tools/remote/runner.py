"""Running one streaming task per share of a node's files, every node at once, and following them.

At most `jobs` shares per node (one task each, asking Ray for no CPU), so at most `jobs` processes read on a
node. Each task yields its progress (node_work.relay) and last its result; a task whose node goes, or falls
silent, or that raises, gives its share an error and the others go on. Progress: files and bytes of every share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nrlprof.tools.cluster import FileFailed, NodeLost, stream_from_node
from nrlprof.tools.progress import ProgressCallback
from nrlprof.tools.remote.listing import NodeFile, NodeFiles

MAX_FOLLOWERS = 64  # threads following tasks; a share waits for one before its task starts
READ_TIMEOUT_S = 300.0  # of silence from a task (it sends a heartbeat every second while it works)


@dataclass
class Share:
    listing: NodeFiles
    files: list[NodeFile]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class ShareResult:
    share: Share
    value: dict[str, Any] | None = None  # the task's last message: result, nice, pid
    error: str | None = None


class ShareMeter:
    """Files and bytes done over all shares (each task reports its own running total)."""

    def __init__(self, shares: list[Share], progress: ProgressCallback | None) -> None:
        self.done = [(0, 0)] * len(shares)
        self.total_files = sum(len(s.files) for s in shares)
        self.total_bytes = sum(s.bytes for s in shares)
        self._progress = progress
        self._lock = threading.Lock()

    def update(self, index: int, files: int, count: int) -> None:
        with self._lock:
            self.done[index] = (files, count)
            if self._progress is not None:
                files_done = sum(f for f, _ in self.done)
                self._progress(sum(b for _, b in self.done), self.total_bytes, files=(files_done, self.total_files))


def run_shares(
    shares: list[Share],
    function: Callable[..., Iterator[dict[str, Any]]],
    args_of: Callable[[Share], tuple[Any, ...]],
    what: str,
    progress: ProgressCallback | None = None,
    timeout_s: float = READ_TIMEOUT_S,
    on_message: Callable[[Share, dict[str, Any]], None] | None = None,
) -> list[ShareResult]:
    """One task per share, `function(*args_of(share))` pinned to its node; results in the order of `shares`.

    `on_message` gets each message that is neither progress nor the last (merge's pieces of events).
    """
    meter = ShareMeter(shares, progress)

    def follow(index: int) -> ShareResult:
        share = shares[index]
        node = share.listing.node
        last = None
        try:
            for message in stream_from_node(function, node, args_of(share), timeout_s, what):  # read to its end
                if "result" in message:
                    meter.update(index, len(share.files), share.bytes)
                    last = message
                elif "files" in message:
                    meter.update(index, message["files"], message["bytes"])
                elif on_message is not None:
                    on_message(share, message)
        except NodeLost as err:
            return ShareResult(share, error=str(err))
        except FileFailed as err:
            return ShareResult(share, error=f"{node.describe()}: {err}")
        if last is None:
            return ShareResult(share, error=f"{node.describe()}: the task ended without a result while {what}")
        return ShareResult(share, last)

    if not shares:
        return []
    with ThreadPoolExecutor(max_workers=min(len(shares), MAX_FOLLOWERS), thread_name_prefix="nrlprof-share") as pool:
        return list(pool.map(follow, range(len(shares))))
