"""`nrlprof diff A B`: two runs' per-step figures side by side (tools.figures.compare), as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nrlprof import exit_codes
from nrlprof.tools.commands.options import add_option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, help="run A: a directory of traces/reports, or a `summary --json` file")
    parser.add_argument("b", type=Path, help="run B: the same kinds")
    add_option(parser, "json", "print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """OK: compared; PARTIAL: a run's summary skipped some input. Bad input raises ToolError."""
    from nrlprof.tools.figures.compare import compare, load_summary

    a, b = load_summary(args.a), load_summary(args.b)
    result = compare(a, b, args.a, args.b)
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
