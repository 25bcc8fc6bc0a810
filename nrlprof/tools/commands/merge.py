"""`nrlprof merge`: a run's torch traces, Nsight Systems captures, memory figures and step anatomy in one
Chrome/Perfetto timeline (tools.merge), the chosen part of it.

With `--address` instead of inputs, the traces are read and cut on the nodes that hold them (tools.remote): only
the chosen events move.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nrlprof import exit_codes
from nrlprof.tools.commands.options import (
    UsageError,
    add_cluster_reading,
    add_option,
    cluster_job,
    one_source,
)
from nrlprof.tools.merge.select import Selection
from nrlprof.tools.progress import progress_bar

if TYPE_CHECKING:
    from nrlprof.tools.merge.timeline import MergeResult

RANKS_FORM = "ranks and ranges of ranks, such as 0,1 or 0-3,8"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    inputs = "trace files or directories (searched recursively); or --address"
    parser.add_argument("inputs", nargs="*", type=Path, help=inputs)
    output = "merged trace; gzipped when it ends with .gz (default: %(default)s)"
    add_option(parser, "output", output, default=Path("timeline.json.gz"))
    parser.add_argument("--ray-timeline", type=Path, default=None, help="a ray.timeline() JSON file to add")
    parser.add_argument("--strict", action="store_true", help="fail on the first unreadable trace")
    add_option(parser, "jobs", "processes reading traces (default: one per CPU, at most one per 64 MiB)")
    add_option(parser, "json", "print the result as JSON")
    parser.add_argument("--workers", metavar="PATTERN", help="only workers matching these comma-separated patterns")
    parser.add_argument("--ranks", metavar="RANKS", help=f"only these ranks ({RANKS_FORM}); the controller stays")
    parser.add_argument("--steps", metavar="STEPS", help="only the events of these steps (3, 3:5, 1,4; stop exclusive)")
    force = "write the timeline even when it is larger than Perfetto's UI can open"
    parser.add_argument("--force", action="store_true", help=force)
    add_cluster_reading(parser, "merge")


def parse_ranks(text: str) -> frozenset[int]:
    ranks: set[int] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        first, dash, last = item.partition("-")
        if not (first.isdigit() and (not dash or last.isdigit())) or (dash and int(last) < int(first)):
            raise UsageError(f"--ranks {text!r}: {item!r} is not a rank or a range; expected {RANKS_FORM}")
        ranks.update(range(int(first), int(last if dash else first) + 1))
    if not ranks:
        raise UsageError(f"--ranks {text!r} names no rank; expected {RANKS_FORM}")
    return frozenset(ranks)


def selection_of(args: argparse.Namespace) -> Selection:
    """The filters of the command line; UsageError (or ConfigError for steps) naming a bad one."""
    workers: tuple[str, ...] = ()
    if args.workers is not None:
        workers = tuple(filter(None, (p.strip() for p in args.workers.split(","))))
        if not workers:
            raise UsageError(f"--workers {args.workers!r} names no pattern; expected patterns such as 'policy*,ref*'")
    steps = None
    if args.steps is not None:
        from nrlprof.config.steps import parse_step_spec

        steps = tuple((w.first, w.last) for w in parse_step_spec(args.steps, "--steps").windows)
    return Selection(workers, parse_ranks(args.ranks) if args.ranks is not None else None, steps)


def run(args: argparse.Namespace) -> int:
    """OK: merged (memory figures with no place on the clock are a note); PARTIAL: some input skipped, or
    nothing could be placed, or a node failed. Bad input (and a timeline too large to open) raises."""
    args.inputs = args.inputs or None
    on_cluster = one_source(args, "inputs")
    selection = selection_of(args)
    with progress_bar("merging traces") as progress:
        if on_cluster:
            from nrlprof.tools.remote.merge import merge_on_cluster

            result, lines = merge_on_cluster(
                cluster_job(args), args.output, selection=selection, force=args.force, ray_timeline=args.ray_timeline,
                strict=args.strict, progress=progress,
            )  # fmt: skip
        else:
            from nrlprof.tools.merge.timeline import merge_traces

            result = merge_traces(args.inputs, args.output, args.ray_timeline, progress, args.strict, args.jobs,
                                  selection=selection, force=args.force)  # fmt: skip
            lines = []
    for line in lines:
        print(f"nrlprof merge: {line}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        print(f"merged {merged_text(result)}: {result.events_out} events, {result.bytes_in / 1e6:.1f} MB "
              f"in {result.seconds:.1f} s -> {result.output}")  # fmt: skip
    for path, reason in result.unplaced:
        print(f"nrlprof merge: note: {path}: {reason}", file=sys.stderr)
    for path, reason in result.skipped:
        print(f"nrlprof merge: warning: skipped {path}: {reason}", file=sys.stderr)
    return exit_codes.outcome(not result.skipped and not (result.placed_nothing and result.unplaced))


def merged_text(result: MergeResult) -> str:
    """What went into the timeline: `2 torch trace(s), 1 Nsight Systems capture(s), the step anatomy`."""
    parts = [f"{len(result.merged)} torch trace(s)"]
    if result.nsys_captures:
        parts.append(f"{len(result.nsys_captures)} Nsight Systems capture(s)")
    if result.memory_files:
        parts.append(f"memory figures of {result.memory_files} file(s)")
    if result.anatomy_events:
        parts.append(f"the step anatomy ({result.anatomy_events} spans)")
    return ", ".join(parts)
