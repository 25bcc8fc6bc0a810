"""A profiler session prepared on a thread of its own, beside the step before its window.

Preparing torch's profiler (imports, Kineto's once-per-process start-up, CUPTI on a GPU) takes seconds. It runs
while the step before the window does its work, and the window's start only waits for what is left of it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

Prepared = TypeVar("Prepared")


class WarmUp(Generic[Prepared]):
    """`build()` running on a daemon thread; `result()` waits for it and returns what it built or raises."""

    def __init__(self, build: Callable[[], Prepared], name: str) -> None:
        self._built: Prepared | None = None
        self._error: BaseException | None = None
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._run, args=(build,), name=name, daemon=True)
        self._thread.start()

    def _run(self, build: Callable[[], Prepared]) -> None:
        began = time.perf_counter()
        try:
            self._built = build()
        except BaseException as err:  # handed to whoever waits for the result
            self._error = err
        self.seconds = time.perf_counter() - began

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> Prepared:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._built  # type: ignore[return-value]
