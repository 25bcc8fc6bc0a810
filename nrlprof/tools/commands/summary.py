"""`nrlprof summary DIR`: per worker x rank x step time, GPU, memory and step-anatomy figures, as tables or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nrlprof import exit_codes
from nrlprof.tools.commands.options import add_option
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.progress import progress_bar


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="directory holding traces and reports (searched recursively)")
    add_option(parser, "json", "print the summary as JSON")
    add_option(parser, "jobs", "processes reading traces (default: one per CPU, at most one per trace and per 32 MiB)")
    hta = "add HolisticTraceAnalysis's temporal breakdown and comm/compute overlap per rank (slow)"
    parser.add_argument("--hta", action="store_true", help=hta)


def run(args: argparse.Namespace) -> int:
    """OK: everything summarised; PARTIAL: some input skipped, or every one. Bad input raises ToolError."""
    with progress_bar("reading traces") as progress:
        summary = summarize(args.directory, progress=progress, jobs=args.jobs)
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
