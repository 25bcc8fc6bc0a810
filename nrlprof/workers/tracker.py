"""The matched actors this process created, kept so windows can reach them."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from nrlprof import rayapi
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

    def find(self, handle: Any) -> TrackedActor | None:
        """The tracked actor this handle reaches (handles compare by their actor's id)."""
        actor_id = rayapi.actor_id(handle)
        with self._lock:
            for actor in self._actors:
                if actor.handle is handle or (actor_id is not None and rayapi.actor_id(actor.handle) == actor_id):
                    return actor
        return None

    def actors(self) -> tuple[TrackedActor, ...]:
        with self._lock:
            return tuple(self._actors)

    def clear(self) -> None:
        with self._lock:
            self._actors.clear()

    def __len__(self) -> int:
        return len(self._actors)
