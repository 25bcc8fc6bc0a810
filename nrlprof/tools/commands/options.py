"""The options several commands share, declared once: `--json`, `-o/--output`, `--address` and `-j/--jobs`; the
job's choice on a cluster (`--session`, `--all-sessions`, `--allow-dir`); reading where the files live.

Each command adds the ones it takes with its own help text (and default, for `-o`); spelling, type and checks
are the table's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrlprof.errors import NrlprofError

if TYPE_CHECKING:
    from nrlprof.tools.figures.model import Summary
    from nrlprof.tools.remote.job import ClusterJob

ANATOMY_HELP = "with --address: the step-anatomy dir to read here (default: $NRL_STEP_ANATOMY_DIR or ./step_anatomy)"


def positive_int(text: str) -> int:
    """A count of at least 1; argparse turns the error into a usage message and exit code 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds, above 0; argparse turns the error into a usage message and exit code 2."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{value:g} is not a positive number of seconds")
    return value


OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "json": (("--json",), {"action": "store_true"}),
    "output": (("-o", "--output"), {"type": Path, "metavar": "FILE"}),
    "address": (("--address",), {"default": None, "metavar": "ADDRESS"}),
    "jobs": (("-j", "--jobs"), {"type": positive_int, "default": None, "metavar": "N"}),
}


def add_option(parser: argparse.ArgumentParser, name: str, help: str, **settings: Any) -> None:
    """Add the shared option `name` ("json", "output", "address" or "jobs") with this command's help text."""
    flags, shared = OPTIONS[name]
    parser.add_argument(*flags, **{**shared, **settings}, help=help)


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """`--session`, `--all-sessions`, `--allow-dir`: which files of which job, as `collect` takes them."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--session", default=None, metavar="NAME", help="the Ray session dir to take (session_...)")
    which.add_argument("--all-sessions", action="store_true", help="take every session dir, not only the job's")
    parser.add_argument(
        "--allow-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="also take files that manifests name under DIR (repeatable; the torch output dir is always allowed)",
    )


def add_cluster_reading(parser: argparse.ArgumentParser, what: str) -> None:
    """`--address` and the options of reading a job's files on the nodes that hold them (`--anatomy`: the step
    anatomy read here), for `what`."""
    add_option(parser, "address", f"{what} the job's files on the nodes of this Ray cluster ('auto': the local one)")
    add_job_options(parser)
    parser.add_argument(
        "--jobs-per-node",
        type=positive_int,
        default=1,
        metavar="N",
        help="with --address: processes reading on each node, at low priority (default: %(default)s)",
    )
    parser.add_argument("--anatomy", type=Path, default=None, metavar="DIR", help=ANATOMY_HELP)


def add_summary_input(parser: argparse.ArgumentParser, held: str = "traces and reports") -> None:
    """DIR holding `held` (else `--address`, from `add_cluster_reading`) and `-j/--jobs`: what `summarise` reads."""
    directory = f"directory holding {held} (searched recursively); or --address"
    parser.add_argument("directory", type=Path, nargs="?", default=None, help=directory)
    add_option(parser, "jobs", "processes reading traces (default: one per CPU, at most one per trace and per 32 MiB)")


def cluster_job(args: argparse.Namespace, address: str | None = None) -> ClusterJob:
    """The job on the cluster that the parsed options choose (at `address`, else `--address`)."""
    from nrlprof.tools.remote.job import ClusterJob

    return ClusterJob(
        address=address if address is not None else args.address,
        session=args.session,
        all_sessions=args.all_sessions,
        allow_dirs=tuple(args.allow_dir),
        jobs_per_node=args.jobs_per_node,
        anatomy_dir=getattr(args, "anatomy", None),
    )


def one_source(args: argparse.Namespace, name: str = "directory") -> bool:
    """True to read on the cluster (`--address`), False for the positional input; UsageError unless exactly one."""
    given = getattr(args, name) is not None
    if given == (args.address is not None):
        raise UsageError(f"expected a {name.upper()} or --address ADDRESS{', not both' if given else ''}")
    if not given:
        return True
    for option, value in (("--session", args.session), ("--all-sessions", args.all_sessions or None),
                          ("--allow-dir", args.allow_dir or None)):  # fmt: skip
        if value is not None:
            raise UsageError(f"{option} chooses files on a cluster: it needs --address, not a {name.upper()}")
    if getattr(args, "anatomy", None) is not None:
        raise UsageError(
            f"--anatomy is for reading with --address; the step anatomy under {name.upper()} is found there"
        )
    return False


class UsageError(NrlprofError):
    """Options that do not go together: exit 2 with the message."""


def summarise(args: argparse.Namespace, command: str, anatomy_view: bool = True) -> Summary:
    """The summary of DIR, or of the job on the cluster at --address (what reading it said, on stderr).

    `anatomy_view`: False keeps the step anatomy as tables only (`explain`)."""
    from nrlprof.tools.progress import progress_bar

    if not one_source(args):
        from nrlprof.tools.figures.summarize import summarize

        with progress_bar("reading traces") as progress:
            return summarize(args.directory, progress=progress, jobs=args.jobs, anatomy_view=anatomy_view)
    from nrlprof.tools.remote.summary import summarize_cluster

    with progress_bar("reading on the nodes") as progress:
        summary, reading = summarize_cluster(cluster_job(args), progress=progress, anatomy_view=anatomy_view)
    for line in reading.lines():
        print(f"nrlprof {command}: {line}", file=sys.stderr)
    return summary
