"""`nrlprof collect --to DIR`: one job's files from every node (tools.collect), and what was copied.

With no running cluster (the job started Ray itself and has ended), or with `--local`, the job's files are read
from this machine's Ray session dirs instead (tools.collect.local), by the same rules.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nrlprof.tools.collect.collector import CollectResult
from nrlprof.tools.commands.options import UsageError, add_job_options, add_option
from nrlprof.tools.progress import progress_bar

NO_CLUSTER = "no Ray cluster is running here"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", required=True, metavar="DIR", help="directory to copy the outputs into")
    address = "Ray cluster address (default: RAY_ADDRESS or the local one; with none running, this machine's files)"
    add_option(parser, "address", address)
    local = "read this machine's Ray session dirs without joining a cluster (also what happens when none is running)"
    parser.add_argument("--local", action="store_true", help=local)
    temp = "with no cluster: Ray's temp dir here (default: $RAY_TMPDIR/ray, else $TMPDIR/ray, else /tmp/ray)"
    parser.add_argument("--temp-dir", type=Path, default=None, metavar="DIR", help=temp)
    add_job_options(parser)
    add_option(parser, "json", "print the result as JSON")


def _mb(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def print_summary(result: CollectResult, stream: Any = sys.stderr) -> None:
    which = "all session dirs" if result.sessions is None else ", ".join(result.sessions) or "no session dir"
    where = f"from this machine only ({result.temp_dir})" if result.local else f"from {len(result.nodes)} node(s)"
    print(
        f"nrlprof collect: {len(result.copied)} copied ({_mb(result.bytes_copied)}), "
        f"{len(result.skipped)} unchanged, {len(result.failed)} failed, {len(result.rejected)} refused, "
        f"{where}, {which}, into {result.to} in {result.seconds:.1f}s",
        file=stream,
    )
    for note in result.notes:
        print(f"  note: {note}", file=stream)
    if result.found_nothing and result.ok and not result.notes:
        print("  note: nothing to collect: the chosen session dirs hold no nrlprof file", file=stream)
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
    """OK: collected; PARTIAL: a file, node or input failed or was refused, or nothing was there to take."""
    local, temp_dir = getattr(args, "local", False), getattr(args, "temp_dir", None)
    if local and args.address is not None:
        raise UsageError("--local reads this machine without a cluster: it takes no --address")
    if temp_dir is not None and args.address is not None:
        raise UsageError("--temp-dir names this machine's Ray temp dir: it goes with --local, not --address")
    options = {"session": getattr(args, "session", None), "all_sessions": getattr(args, "all_sessions", False),
               "allow_dirs": getattr(args, "allow_dir", None)}  # fmt: skip
    with progress_bar("collect") as progress:
        result = _from_cluster(args, options, progress) if not local and temp_dir is None else None
        if result is None:
            from nrlprof.tools.collect.local import collect_local

            result = collect_local(Path(args.to), progress, temp_dir=temp_dir, **options)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    print_summary(result)
    return result.exit_code


def _from_cluster(args: argparse.Namespace, options: dict[str, Any], progress: Any) -> CollectResult | None:
    """The job from every node of the running cluster; None when none runs here and no address was given."""
    from nrlprof.tools.cluster import NoClusterFound
    from nrlprof.tools.collect.collector import collect

    try:
        return collect(Path(args.to), address=args.address, progress=progress, **options)
    except NoClusterFound:
        if args.address is not None:
            raise
        print(f"nrlprof collect: {NO_CLUSTER}: reading this machine's Ray session dirs only", file=sys.stderr)
        return None
