"""The matched actors this process created, kept so windows can reach them."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from nrlprof.workers.identity import WorkerIdentity


@dataclass(frozen=True)
class TrackedActor:
    handle: Any
    identity: WorkerIdentity
    kinds: tuple[str, ...]


class Tracker:
    def __init__(self) -> None:
        self._actors: list[TrackedActor] = []
        self._lock = threading.Lock()

    def add(self, actor: TrackedActor) -> None:
        with self._lock:
            self._actors.append(actor)

    def remove(self, actor: TrackedActor) -> None:
        with self._lock:
            if actor in self._actors:
                self._actors.remove(actor)

    def actors(self) -> tuple[TrackedActor, ...]:
        with self._lock:
            return tuple(self._actors)

    def __len__(self) -> int:
        return len(self._actors)
