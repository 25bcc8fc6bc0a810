"""`nrlprof merge`: every torch trace of a run in one Chrome/Perfetto timeline (tools.merge)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nrlprof import exit_codes
from nrlprof.tools.commands.options import add_option
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.progress import progress_bar


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, help="trace files or directories (searched recursively)")
    output = "merged trace; gzipped when it ends with .gz (default: %(default)s)"
    add_option(parser, "output", output, default=Path("timeline.json.gz"))
    parser.add_argument("--ray-timeline", type=Path, default=None, help="a ray.timeline() JSON file to add")
    parser.add_argument("--strict", action="store_true", help="fail on the first unreadable trace")
    add_option(parser, "jobs", "processes reading traces (default: one per CPU, at most one per 256 MiB)")
    add_option(parser, "json", "print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """OK: merged (memory figures with no place on the clock are a note); PARTIAL: some input skipped, or
    nothing could be placed. Bad input raises ToolError."""
    with progress_bar("merging traces") as progress:
        result = merge_traces(args.inputs, args.output, args.ray_timeline, progress, args.strict, args.jobs)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        mb = result.bytes_in / 1e6
        print(
            f"merged {len(result.merged)} trace(s), {result.events_out} events, {mb:.1f} MB "
            f"in {result.seconds:.1f} s -> {result.output}"
        )
    for path, reason in result.unplaced:
        print(f"nrlprof merge: note: {path}: {reason}", file=sys.stderr)
    for path, reason in result.skipped:
        print(f"nrlprof merge: warning: skipped {path}: {reason}", file=sys.stderr)
    placed_nothing = not result.merged and not result.counter_events  # every input skipped or unplaced
    return exit_codes.outcome(not result.skipped and not (placed_nothing and result.unplaced))
