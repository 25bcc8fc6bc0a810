"""The `nrlprof` command line: one subcommand per tool, each module bringing its own arguments."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module with add_arguments/run, one-line help)
SUBCOMMANDS = {
    "doctor": ("nrlprof.tools.doctor", "check every node of a running cluster for what profiling needs"),
    "plan": ("nrlprof.tools.plan", "show what the current variables/config would profile, and where files go"),
    "patch-ray": ("nrlprof.rayfix.patch_ray", "fix Ray's nsight/rocprof-sys plugins on disk (--check, --revert)"),
    "collect": ("nrlprof.tools.collect", "copy every report, trace and manifest from every node into one directory"),
    "merge": ("nrlprof.tools.merge", "merge torch traces into one Chrome/Perfetto timeline"),
    "summary": ("nrlprof.tools.summary", "worker x step table of times, ranges, operators and kernels"),
    "report": ("nrlprof.tools.report", "one self-contained HTML report: timeline picture and tables"),
    "demo": ("nrlprof.demo.cli", "run a small bundled RL-shaped Ray job, profiled, then summarised"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nrlprof", description="Step-gated profiling of chosen Ray workers.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module_name=module_name)
        importlib.import_module(module_name).add_arguments(sub)
    return parser


def _version() -> str:
    from nrlprof import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    from nrlprof.errors import ConfigError

    args = build_parser().parse_args(argv)
    module = importlib.import_module(args.module_name)
    try:
        return int(module.run(args) or 0)
    except ConfigError as err:
        print(f"nrlprof {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
