"""`nrlprof diff A B`: two runs' per-step figures side by side (tools.figures.compare), as a table or JSON.

A run is a directory, a `summary --json` file, or a cluster address (`auto`, `host:port`, `ray://...`) whose job
is read on the nodes that hold its files (tools.remote).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nrlprof import exit_codes
from nrlprof.tools.commands.options import add_job_options, add_option, cluster_job, positive_int

RUN_HELP = "a directory of traces/reports, a `summary --json` file, or a cluster address (auto, host:port)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help=f"run A: {RUN_HELP}")
    parser.add_argument("b", help="run B: the same kinds")
    add_option(parser, "json", "print the comparison as JSON")
    add_job_options(parser)
    jobs = "for a run given as a cluster address: processes reading on each node (default: %(default)s)"
    parser.add_argument("--jobs-per-node", type=positive_int, default=1, metavar="N", help=jobs)


def load_run(run: str, args: argparse.Namespace) -> dict[str, Any]:
    """The `summary --json` object of a run: an existing path is read as such, else an address is joined."""
    from nrlprof.tools.cluster import is_address
    from nrlprof.tools.figures.compare import load_summary

    if Path(run).exists() or not is_address(run):
        return load_summary(Path(run))
    from nrlprof.tools.remote.summary import summarize_cluster

    summary, reading = summarize_cluster(cluster_job(args, address=run))
    for line in reading.lines():
        print(f"nrlprof diff: {line}", file=sys.stderr)
    return summary.to_json()


def run(args: argparse.Namespace) -> int:
    """OK: compared; PARTIAL: a run's summary skipped some input. Bad input raises ToolError."""
    from nrlprof.tools.figures.compare import compare

    a, b = load_run(args.a, args), load_run(args.b, args)
    result = compare(a, b, Path(args.a), Path(args.b))
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        from nrlprof.tools.render.console import render_diff

        render_diff(result)
    skipped = {side: len(data.get("skipped") or ()) for side, data in (("A", a), ("B", b))}
    for side, count in skipped.items():
        if count:
            print(f"nrlprof diff: warning: run {side} skipped {count} input(s), listed in its summary", file=sys.stderr)
    return exit_codes.outcome(not any(skipped.values()))
