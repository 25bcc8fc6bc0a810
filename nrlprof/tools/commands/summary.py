"""`nrlprof summary DIR`: per worker x rank x step time, GPU, memory and step-anatomy figures, as tables or JSON.

With `--address` instead of DIR, the job's files are read on the nodes that hold them (tools.remote).
"""

from __future__ import annotations

import argparse
import json
import sys

from nrlprof import exit_codes
from nrlprof.errors import ToolError
from nrlprof.tools.commands.options import add_cluster_reading, add_option, add_summary_input, summarise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "json", "print the summary as JSON")
    add_summary_input(parser)
    hta = "add HolisticTraceAnalysis's temporal breakdown and comm/compute overlap per rank (slow)"
    parser.add_argument("--hta", action="store_true", help=hta)
    add_cluster_reading(parser, "read")


def run(args: argparse.Namespace) -> int:
    """OK: everything summarised; PARTIAL: some input skipped (or every one), a node failed. Bad input: ToolError."""
    if args.hta and args.address is not None:
        raise ToolError("--hta reads every trace of a worker kind in one place: collect the job, then summarise DIR")
    summary = summarise(args, "summary")
    if args.hta:
        from nrlprof.tools.figures.hta import hta_figures

        summary.hta, notes = hta_figures(summary.workers)
        summary.notes.extend(notes)
    if args.json:
        sys.stdout.write(json.dumps(summary.to_json(), indent=2) + "\n")
        for path, reason in summary.skipped:
            print(f"nrlprof summary: warning: skipped {path}: {reason}", file=sys.stderr)
    else:
        from nrlprof.tools.render.console import render_summary

        render_summary(summary)
    return exit_codes.outcome(not summary.skipped)
