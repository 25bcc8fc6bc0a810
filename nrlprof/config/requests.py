"""A window asked for while an armed job runs (`nrlprof capture`): the request, the job's card and its answers, and
their keys in Ray's KV store. Nothing here imports Ray: both sides pass the text through Ray's internal KV.

The armed job's controller writes its card under `armed/<job>` and rewrites it every HEARTBEAT_S; a card older than
STALE_S belongs to a job that is gone. A request goes under `request/<job>/<id>`, where only that job's controller
reads it (and deletes it); its answers under `answer/<id>`: `accepted`, then `opened` (the steps the window covers),
then `closed` (the window's manifest records); or `refused`, with the reason.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from nrlprof import wire
from nrlprof.config.plan import MEMORY, NSYS, TORCH, Target
from nrlprof.manifest import WindowRecord

ARMED_PREFIX = "armed/"
REQUEST_PREFIX = "request/"
ANSWER_PREFIX = "answer/"
HEARTBEAT_S = 1.0
STALE_S = 15.0
# How often the controller's listener looks for requests (off the step path, on its own thread).
POLL_S = 0.25
REQUESTABLE = (TORCH, MEMORY, NSYS)
MAX_STEPS = 100_000

ACCEPTED, OPENED, CLOSED, REFUSED = "accepted", "opened", "closed", "refused"


def armed_key(job: str) -> str:
    return f"{ARMED_PREFIX}{job}"


def request_prefix(job: str) -> str:
    return f"{REQUEST_PREFIX}{job}/"


def answer_key(request_id: str) -> str:
    return f"{ANSWER_PREFIX}{request_id}"


@dataclass(frozen=True)
class Request:
    """Profile the next `steps` steps of the workers `patterns` (and `ranks`) select, with `backend`."""

    job: str
    backend: str
    patterns: tuple[str, ...]
    steps: int
    ranks: frozenset[int] | None = None
    node: str = ""
    id: str = field(default_factory=lambda: secrets.token_hex(8))

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(Target(pattern, self.ranks) for pattern in self.patterns)

    def describe(self) -> str:
        ranks = "" if self.ranks is None else f" ranks {','.join(map(str, sorted(self.ranks)))}"
        return f"{self.backend} for {self.steps} step(s) of workers '{','.join(self.patterns)}'{ranks}"

    def to_json(self) -> str:
        return wire.encode(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Request:
        """The request a text holds; ValueError naming what is wrong (a request never stops the job)."""
        request = wire.decode(text, cls)
        if request.backend not in REQUESTABLE:
            raise ValueError(f"backend {request.backend!r} is not one of {', '.join(REQUESTABLE)}")
        if not request.patterns or not all(request.patterns):
            raise ValueError("no worker pattern")
        if not 1 <= request.steps <= MAX_STEPS:
            raise ValueError(f"steps {request.steps!r} is not a count from 1 to {MAX_STEPS}")
        if request.ranks is not None and min(request.ranks, default=0) < 0:
            raise ValueError(f"ranks {sorted(request.ranks)} are not a list of ranks")
        return request


@dataclass(frozen=True)
class WorkerRow:
    """One worker name of a job and its ranks, as the card and the answers show them."""

    name: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class SlowBudget:
    """A job armed for slow steps: its backends and modes (`torch slow:keep`), what counts as slow, the windows or
    kept steps it has used of its budget, and the steps that triggered them."""

    backends: tuple[str, ...]
    factor: float
    used: int
    max_triggers: int
    steps: tuple[int, ...] = ()

    def describe(self) -> str:
        steps = f" (slow steps {', '.join(map(str, self.steps))})" if self.steps else ""
        return (f"armed for slow steps ({', '.join(self.backends)}; >= {self.factor:g}x the median): "
                f"{self.max_triggers - self.used} of {self.max_triggers} left{steps}")  # fmt: skip


@dataclass(frozen=True)
class Card:
    """An armed job, rewritten every HEARTBEAT_S: its controller, the step it is at, the workers a window can
    select; whether it takes windows asked for (`asks`: NRL_PROFILE_ON_DEMAND), and its budget for slow steps."""

    job: str
    controller: str
    host: str
    pid: int
    step: int | None
    workers: tuple[WorkerRow, ...]
    at: float
    asks: bool = True
    slow: SlowBudget | None = None

    def describe(self) -> str:
        return f"job {self.job} (controller {self.controller} on {self.host} pid {self.pid})"


@dataclass(frozen=True)
class Reply:
    """The job's answer to a request: `accepted`, `opened` (the steps the window covers), `closed` (the window's
    records), or `refused` (why, in `message`); who answered."""

    state: str
    message: str = ""
    job: str = ""
    controller: str = ""
    host: str = ""
    pid: int = 0
    backend: str = ""
    window: str | None = None
    first: int | None = None
    last: int | None = None
    workers: tuple[WorkerRow, ...] = ()
    answered: int = 0
    records: tuple[WindowRecord, ...] = ()

    def to_json(self) -> str:
        return wire.encode(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Reply:
        return wire.decode(text, cls)
