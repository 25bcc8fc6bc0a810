"""`nrlprof diff A B`: two runs' per-step figures side by side (tools.figures.compare), as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nrlprof.tools.figures.compare import compare, load_summary
from nrlprof.tools.render.console import render_diff


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, help="run A: a directory of traces/reports, or a `summary --json` file")
    parser.add_argument("b", type=Path, help="run B: the same kinds")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """0: compared. Bad input raises ToolError (the CLI's exit code 2)."""
    result = compare(load_summary(args.a), load_summary(args.b), args.a, args.b)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render_diff(result)
    return 0
