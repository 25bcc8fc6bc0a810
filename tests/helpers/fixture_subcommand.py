"""A subcommand for tests of the command line: it ends in the outcome its one argument names (returns 0, 1 or None,
or raises a tool error, a config error, an interrupt or a bug)."""

from __future__ import annotations

import argparse

from nrlprof.errors import ConfigError, ToolError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("outcome")


def run(args: argparse.Namespace) -> int | None:
    if args.outcome == "tool-error":
        raise ToolError("not a trace:\nsecond line", "/data/x.json")
    if args.outcome == "config-error":
        raise ConfigError("NRL_X", "y", "an integer")
    if args.outcome == "interrupt":
        raise KeyboardInterrupt
    if args.outcome == "value-error":
        raise ValueError("a bug, not bad input")
    return {"ok": 0, "partial": 1, "none": None}[args.outcome]
