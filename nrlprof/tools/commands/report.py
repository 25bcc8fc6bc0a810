"""`nrlprof report`: one self-contained HTML file of a run, written atomically (the page: render/html.py).

With `--address` instead of DIR, the job's files are read on the nodes that hold them (tools.remote).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nrlprof import exit_codes
from nrlprof.tools.commands.options import add_cluster_reading, add_option, add_summary_input, summarise
from nrlprof.tools.figures.model import Summary
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.output import check_output, write_output
from nrlprof.tools.render.html import render_html


def write_report(directory: Path, output: Path, summary: Summary | None = None) -> None:
    """Summarise `directory` (unless `summary` is given) into the HTML file `output`, written atomically."""
    check_output(output)
    summary = summary if summary is not None else summarize(Path(directory))
    write_output(output, render_html(summary).encode("utf-8", "replace"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "output", "HTML file to write (default: %(default)s)", default=Path("nrlprof-report.html"))
    add_summary_input(parser)
    add_cluster_reading(parser, "read")


def run(args: argparse.Namespace) -> int:
    """OK: report written; PARTIAL: written, some input skipped (or every one), a node failed. Bad input raises."""
    check_output(args.output)
    summary = summarise(args, "report")
    write_report(args.directory, args.output, summary)
    for path, reason in summary.skipped:
        print(f"nrlprof report: warning: skipped {path}: {reason}", file=sys.stderr)
    print(f"report written to {args.output}")
    return exit_codes.outcome(not summary.skipped)
