"""Where a controller's steps come from, and which source wins.

An explicit `nrlprof.step(n)` wins over everything once called; the step marker (NRL_STEP_METHOD) wins over
the framework adapters (verl's trainer, NeMo RL's loops, ...), which drive the steps only when neither of the
others does. The log says which source drives the steps, and when that changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nrlprof.log import logger

EXPLICIT = "nrlprof.step()"


class StepSources:
    def __init__(self, drive: Callable[[int], None], marker_configured: bool) -> None:
        self._drive = drive
        self.marker_configured = marker_configured
        self.explicit_seen = False
        self.current: str | None = None
        self._lock = threading.Lock()

    def explicit(self, step: int) -> None:
        self.explicit_seen = True
        self._step(EXPLICIT, step)

    def from_marker(self, step: int, description: str) -> None:
        if not self.explicit_seen:
            self._step(description, step)

    def from_framework(self, step: int, description: str) -> None:
        if not (self.explicit_seen or self.marker_configured):
            self._step(description, step)

    def _step(self, source: str, step: int) -> None:
        with self._lock:
            if source != self.current:
                if self.current is None:
                    logger.info("steps come from %s (first step: %d)", source, step)
                else:
                    logger.info("steps come from %s from step %d on (before: %s)", source, step, self.current)
                self.current = source
            self._drive(step)
