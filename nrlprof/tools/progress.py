"""One progress bar for the tools that move or read many bytes (collect, merge, summary)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator

# Called with (units done so far, units in all); `total` may grow while work is found.
ProgressCallback = Callable[[int, int], None]


@contextlib.contextmanager
def progress_bar(description: str) -> Iterator[ProgressCallback | None]:
    """A byte progress bar on stderr fed with (done, total), or None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*Progress.get_default_columns()[:1], *columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


class ByteMeter:
    """A thread-safe running total that feeds an optional ProgressCallback."""

    def __init__(self, total: int, progress: ProgressCallback | None) -> None:
        self.total = total
        self.done = 0
        self._progress = progress
        self._lock = threading.Lock()

    def add(self, count: int) -> None:
        with self._lock:
            self.done += count
            if self._progress is not None:
                self._progress(self.done, self.total)
