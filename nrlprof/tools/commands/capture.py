"""`nrlprof capture`: a window in a job that is already running (armed with NRL_PROFILE_ON_DEMAND=1).

It asks the job's controller, through the cluster's KV store, to profile its next N steps in the workers the patterns
select and in the controller; prints the job, the controller and the steps the window covers; with `--wait`, the files
once it has closed. Exit 0: the window opened (and, with --wait, closed in every process); 1: in part (a worker late,
gone or not ready); 2: bad input, no armed job, a request the job refused (a pattern that matches no live worker, a
window of the same backend that overlaps).
"""

from __future__ import annotations

import argparse
import sys

from nrlprof import exit_codes
from nrlprof.config.env import parse_patterns, parse_ranks
from nrlprof.config.plan import MEMORY, NSYS, TORCH
from nrlprof.config.requests import CLOSED, OPENED, REFUSED, Card, Reply, Request
from nrlprof.errors import NrlprofError
from nrlprof.manifest import Status
from nrlprof.tools.commands.options import UsageError, add_option, positive_int

COMMAND = "capture"


class Refused(NrlprofError):
    """The job refused the request: its message says why; the job is untouched."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "address", "the Ray cluster the armed job runs on ('auto': the local one)")
    parser.add_argument("--list", action="store_true", help="show the armed jobs, their current step and workers")
    parser.add_argument("--job", default=None, metavar="ID", help="the armed job, where several share the cluster")
    parser.add_argument("--workers", default=None, metavar="PATTERNS",
                        help="comma-separated worker patterns, as NRL_*_WORKER_PATTERNS mean them")  # fmt: skip
    parser.add_argument("--ranks", default=None, metavar="RANKS", help="'all' (default) or ranks such as '0,1'")
    parser.add_argument("--backend", choices=(TORCH, MEMORY, NSYS), default=None, help="the profiler of the window")
    parser.add_argument("--steps", type=positive_int, default=None, metavar="N", help="profile the next N steps")
    parser.add_argument("--wait", action="store_true", help="stay until the window has closed, then print its files")


def run(args: argparse.Namespace) -> int:
    if not args.list:
        missing = [f"--{name}" for name in ("workers", "backend", "steps") if getattr(args, name) is None]
        if missing:
            raise UsageError(f"{', '.join(missing)} needed (or --list)")
        patterns = parse_patterns(args.workers)
        if not patterns:
            raise UsageError(f"--workers {args.workers!r}: expected comma-separated worker patterns such as '*policy*'")
        ranks = None if args.ranks is None else parse_ranks(args.ranks, "--ranks")
    from nrlprof.tools.capture import client
    from nrlprof.tools.cluster import connected

    with connected(args.address):
        cards = client.armed_jobs()
        if args.list:
            return _list(cards, args.job)
        card = client.choose_job(cards, args.job)
        request = Request(card.job, args.backend, patterns, args.steps, ranks, node=client.this_node())
        client.send(request)
        print(f"nrlprof capture: asked {card.describe()} for request {request.id}: {request.describe()}")
        sys.stdout.flush()
        reply = client.wait_for(request, (OPENED,))
        if reply is None:
            client.withdraw(request)
            raise Refused(f"job {request.job} did not answer request {request.id} (it ended, or its controller is "
                          "stuck); the request is withdrawn")  # fmt: skip
        if reply.state == REFUSED:
            raise Refused(f"job {request.job} refused request {request.id}: {reply.message}")
        _print_opened(reply)
        if not args.wait:
            return exit_codes.OK if reply.state != CLOSED else _print_closed(reply)
        closed = client.wait_for(request, (CLOSED,), timeout_s=float("inf"))
        if closed is None:
            print(f"nrlprof capture: job {request.job} ended before the window closed", file=sys.stderr)
            return exit_codes.PARTIAL
        return _print_closed(closed)


def _list(cards: list[Card], job: str | None) -> int:
    from nrlprof.tools.capture.client import choose_job

    if job is not None:
        cards = [choose_job(cards, job)]
    if not cards:
        print("no armed job on this cluster (a job is armed by NRL_PROFILE_ON_DEMAND=1 at its start, or by "
              "NRL_*_STEP_RANGE=slow)")  # fmt: skip
    for card in cards:
        print(f"{card.describe()}: step {'not yet' if card.step is None else card.step}")
        if card.slow is not None:
            print(f"  {card.slow.describe()}")
        if not card.asks:
            print("  takes no window asked for (NRL_PROFILE_ON_DEMAND is not set)")
        for row in card.workers:
            print(f"  {row.name}: rank{'s' if len(row.ranks) > 1 else ''} {','.join(map(str, row.ranks))}")
        if not card.workers:
            print("  no worker yet")
    return exit_codes.OK


def _print_opened(reply: Reply) -> None:
    workers = ", ".join(f"{row.name} ({','.join(map(str, row.ranks))})" for row in reply.workers)
    print(
        f"nrlprof capture: job {reply.job}, controller {reply.controller} on {reply.host} pid {reply.pid}: "
        f"{reply.backend} window of steps {reply.window} (steps {reply.first} to {reply.last}) in "
        f"{reply.answered} worker(s) [{workers}]{' and the controller' if _controllers(reply) else ''}"
    )
    sys.stdout.flush()


def _controllers(reply: Reply) -> int:
    """The controller takes part in a window asked for, but for nsys (it is not launched under nsys)."""
    return 0 if reply.backend == NSYS else 1


def _print_closed(reply: Reply) -> int:
    """The files of the window as the manifest records name them; PARTIAL when a process was late or gone."""
    records = reply.records
    expected = sum(len(row.ranks) for row in reply.workers) + _controllers(reply)
    complete = len(records) >= expected
    for record in sorted(records, key=lambda r: (r.worker, r.rank is not None, r.rank or 0)):
        rank = "" if record.rank is None else f" rank {record.rank}"
        complete = complete and record.status == Status.OK
        note = "" if record.status == Status.OK else f" [{record.status}: {record.message}]"
        print(f"{record.worker}{rank} on {record.host}{note}")
        for path in record.files:
            print(f"  {path}")
    if len(records) < expected:
        print(f"nrlprof capture: {expected - len(records)} process(es) of the window sent no record (gone)",
              file=sys.stderr)  # fmt: skip
    print(f"nrlprof capture: window {reply.window} closed in {len(records)} process(es)")
    return exit_codes.outcome(complete)
