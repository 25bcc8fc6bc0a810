"""The `nrlprof` command line: one subcommand per tool, each module bringing its own arguments.

Exit codes (nrlprof.exit_codes, the same for every command): 0 done; 1 done in part (the command's `run()`
returns 1: an input skipped, or every one, a node that failed, a check that found a problem); 2 bad input
(any NrlprofError: one line `nrlprof <cmd>: <message>` on stderr); 130 interrupted. Only the chosen
subcommand's module is imported.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from nrlprof import __version__, exit_codes

# name -> (module with add_arguments/run, one-line help)
SUBCOMMANDS = {
    "doctor": ("nrlprof.tools.commands.doctor", "check every node of a running cluster for what profiling needs"),
    "plan": ("nrlprof.tools.commands.plan", "show what the current variables/config would profile, and where files go"),
    "patch-ray": ("nrlprof.rayfix.patch_ray", "fix Ray's nsight/rocprof-sys plugins on disk (--check, --revert)"),
    "collect": (
        "nrlprof.tools.commands.collect",
        "copy one job's reports, traces and manifests from every node (with no cluster: this machine) into one folder",
    ),
    "merge": (
        "nrlprof.tools.commands.merge",
        "one Chrome/Perfetto timeline of a run's traces, nsys captures and step anatomy",
    ),
    "summary": ("nrlprof.tools.commands.summary", "worker x step time, GPU, memory and step-anatomy figures"),
    "explain": (
        "nrlprof.tools.commands.explain",
        "why the steps are slow: findings ranked by impact, with the evidence, where to look and what to try",
    ),
    "diff": ("nrlprof.tools.commands.diff", "two runs' per-step time and GPU figures side by side, with the change"),
    "report": ("nrlprof.tools.commands.report", "one self-contained HTML report: timeline picture and tables"),
    "capture": (
        "nrlprof.tools.commands.capture",
        "profile the next N steps of chosen workers in a job that is already running (armed: NRL_PROFILE_ON_DEMAND=1)",
    ),
    "demo": ("nrlprof.demo.cli", "run a small bundled RL-shaped Ray job, profiled, then summarised"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only `command`'s module is imported to add its arguments (all of them when None)."""
    epilog = "exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in exit_codes.MEANINGS.items())
    parser = argparse.ArgumentParser(
        prog="nrlprof", description="Step-gated profiling of chosen Ray workers.", epilog=epilog
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module_name=module_name)
        if command is None or name == command:
            importlib.import_module(module_name).add_arguments(sub)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv`: its first word that is not an option (nrlprof's own take no value)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    from nrlprof.errors import NrlprofError

    argv = list(sys.argv[1:] if argv is None else argv)
    command = chosen_command(argv)
    try:
        # An unknown command builds nothing: argparse lists the choices and exits 2.
        args = build_parser(command or "").parse_args(argv)
        module = importlib.import_module(args.module_name)
        status = module.run(args)
    except NrlprofError as err:
        print(f"nrlprof {command}: {_one_line(err)}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except KeyboardInterrupt:
        print(f"nrlprof {command}: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    return int(status or exit_codes.OK)


def _one_line(err: BaseException) -> str:
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip()) or type(err).__name__


if __name__ == "__main__":
    sys.exit(main())
