"""`nrlprof collect --to DIR`: one job's files from every node (tools.collect), and what was copied."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nrlprof.tools.collect.collector import CollectResult, collect
from nrlprof.tools.commands.options import add_job_options, add_option
from nrlprof.tools.progress import progress_bar


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", required=True, metavar="DIR", help="directory to copy the outputs into")
    add_option(parser, "address", "Ray cluster address (default: RAY_ADDRESS or the local one)")
    add_job_options(parser)
    add_option(parser, "json", "print the result as JSON")


def _mb(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def print_summary(result: CollectResult, stream: Any = sys.stderr) -> None:
    which = "all session dirs" if result.sessions is None else ", ".join(result.sessions) or "no session dir"
    print(
        f"nrlprof collect: {len(result.copied)} copied ({_mb(result.bytes_copied)}), "
        f"{len(result.skipped)} unchanged, {len(result.failed)} failed, {len(result.rejected)} refused, "
        f"from {len(result.nodes)} node(s), {which}, into {result.to} in {result.seconds:.1f}s",
        file=stream,
    )
    for error in result.node_errors:
        print(f"  error: {error.reason}", file=stream)
    for failure in result.failed:
        if not failure.reason.startswith("not copied: "):
            print(f"  failed: {failure.path}: {failure.reason}", file=stream)
    for item in result.rejected:
        print(f"  refused on {item['node']}: {item['path']}: {item['reason']}", file=stream)
    for item in result.missing:
        print(f"  note: {item['path']} (listed in a manifest on {item['node']}) does not exist", file=stream)


def run(args: argparse.Namespace) -> int:
    with progress_bar("collect") as progress:
        result = collect(
            Path(args.to),
            address=args.address,
            progress=progress,
            session=getattr(args, "session", None),
            all_sessions=getattr(args, "all_sessions", False),
            allow_dirs=getattr(args, "allow_dir", None),
        )
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    print_summary(result)
    return result.exit_code
