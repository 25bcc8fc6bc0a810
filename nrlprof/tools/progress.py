"""One progress bar for the tools that move or read many bytes (collect, merge, summary)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator

# Called with (bytes done so far, bytes in all) and, by the tools that count files too, files=(done, in all);
# `total` may grow while work is found.
ProgressCallback = Callable[..., None]


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

        def update(done: int, total: int, files: tuple[int, int] | None = None) -> None:
            text = description if files is None else f"{description}: {files[0]}/{files[1]} files"
            bar.update(task, completed=done, total=total, description=text)

        yield update


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
