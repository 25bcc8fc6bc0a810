"""A window asked for while an armed job runs (`nrlprof capture`): the request, the job's card and its answers, and
their keys in Ray's KV store. Nothing here imports Ray: both sides pass the text through Ray's internal KV.

The armed job's controller writes its card under `armed/<job>` and rewrites it every HEARTBEAT_S; a card older than
STALE_S belongs to a job that is gone. A request goes under `request/<job>/<id>`, where only that job's controller
reads it (and deletes it); its answers under `answer/<id>`: `accepted`, then `opened` (the steps the window covers),
then `closed` (the window's manifest records); or `refused`, with the reason.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

from nrlprof.config.plan import MEMORY, NSYS, TORCH, Target

NAMESPACE = "nrlprof"
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
        return json.dumps(
            {
                "id": self.id,
                "job": self.job,
                "backend": self.backend,
                "patterns": list(self.patterns),
                "steps": self.steps,
                "ranks": None if self.ranks is None else sorted(self.ranks),
                "node": self.node,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Request:
        """The request a text holds; ValueError naming what is wrong (a request never stops the job)."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise ValueError("not a JSON request") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        patterns, steps, ranks = data.get("patterns"), data.get("steps"), data.get("ranks")
        if data.get("backend") not in REQUESTABLE:
            raise ValueError(f"backend {data.get('backend')!r} is not one of {', '.join(REQUESTABLE)}")
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p for p in patterns):
            raise ValueError("no worker pattern")
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
            raise ValueError(f"steps {steps!r} is not a count from 1 to {MAX_STEPS}")
        if ranks is not None and not (isinstance(ranks, list) and all(isinstance(r, int) and r >= 0 for r in ranks)):
            raise ValueError(f"ranks {ranks!r} are not a list of ranks")
        if not isinstance(data.get("id"), str) or not isinstance(data.get("job"), str):
            raise ValueError("no request id or job")
        return cls(
            job=data["job"],
            backend=data["backend"],
            patterns=tuple(patterns),
            steps=steps,
            ranks=None if ranks is None else frozenset(ranks),
            node=str(data.get("node", "")),
            id=data["id"],
        )


def answer(state: str, message: str = "", **details: object) -> str:
    return json.dumps({"state": state, "message": message, **details}, default=str)
