"""The armed jobs of the cluster this process joined, a request sent to one of them, and its answers.

Everything travels through Ray's KV store (nrlprof.config.requests): the job's controller reads its requests there and
writes its answers there; nothing else is reached.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from nrlprof import rayapi, wire
from nrlprof.config.requests import (
    ARMED_PREFIX,
    CLOSED,
    REFUSED,
    STALE_S,
    Card,
    Reply,
    Request,
    answer_key,
    armed_key,
    request_prefix,
)
from nrlprof.tools.cluster import BadInput

# How long the job has to answer a request (accepted or refused): its controller reads every POLL_S and readies the
# workers first (NRL_PROFILE_TIMEOUT_S at most, when one is busy).
ANSWER_TIMEOUT_S = 180.0


class NotArmed(BadInput):
    """No armed job on the cluster, or not the one asked for."""


def armed_jobs(now: float | None = None) -> list[Card]:
    """The cards of the armed jobs that are running (a card not rewritten for STALE_S is a job gone), by job id."""
    now = time.time() if now is None else now
    cards = [card for key in rayapi.kv_keys(ARMED_PREFIX) if (card := _card(rayapi.kv_get(key))) is not None]
    return sorted((card for card in cards if now - card.at <= STALE_S), key=lambda card: card.job)


def _card(text: bytes | None) -> Card | None:
    try:
        return wire.decode(text, Card) if text else None
    except ValueError:
        return None


def choose_job(cards: list[Card], job: str | None) -> Card:
    """The one armed job, or the one `--job` names; NotArmed saying which there are."""
    there = "; ".join(card.describe() for card in cards) or "none"
    if job is not None:
        for card in cards:
            if card.job == job:
                return card
        raise NotArmed(f"--job {job!r} is not an armed job on this cluster; the armed jobs: {there} "
                       "(a job is armed by NRL_PROFILE_ON_DEMAND=1 at its start)")  # fmt: skip
    if not cards:
        raise NotArmed("no armed job on this cluster (a job is armed by NRL_PROFILE_ON_DEMAND=1 at its start)")
    if len(cards) > 1:
        raise NotArmed(f"{len(cards)} armed jobs on this cluster: pick one with --job: {there}")
    return cards[0]


def this_node() -> str:
    """`host (ip)` of this process: the job's log says where a request came from."""
    try:
        import ray

        ip = ray.util.get_node_ip_address()
    except Exception:
        ip = "?"
    return f"{socket.gethostname()} ({ip})"


def send(request: Request) -> None:
    """The request, where only its job's controller reads it; refused if its job is no longer armed."""
    if not rayapi.kv_get(armed_key(request.job)):
        raise NotArmed(f"job {request.job} is not armed (or has ended)")
    rayapi.kv_put(f"{request_prefix(request.job)}{request.id}", request.to_json())


def wait_for(
    request: Request,
    states: tuple[str, ...],
    timeout_s: float = ANSWER_TIMEOUT_S,
    job_alive: Callable[[], bool] | None = None,
) -> Reply | None:
    """The job's latest answer once it is in `states` (or refused or closed); None when none came in time, or the
    job's card went. The answer is taken off the store once final."""
    deadline = time.monotonic() + timeout_s
    alive = job_alive or (lambda: _card_is_fresh(request.job))
    while True:
        text = rayapi.kv_get(answer_key(request.id))
        reply = Reply.from_json(text) if text else None
        if reply is not None and reply.state in (*states, REFUSED, CLOSED):
            if reply.state in (REFUSED, CLOSED):
                rayapi.kv_delete(answer_key(request.id))
            return reply
        if time.monotonic() >= deadline or not alive():
            return None
        time.sleep(0.2)


def _card_is_fresh(job: str) -> bool:
    """The job's card is there and was rewritten within STALE_S: its controller still listens."""
    card = _card(rayapi.kv_get(armed_key(job)))
    return card is not None and time.time() - card.at <= STALE_S


def withdraw(request: Request) -> None:
    """A request no one answered is taken back, so a job that comes later never acts on it."""
    rayapi.kv_delete(f"{request_prefix(request.job)}{request.id}")
