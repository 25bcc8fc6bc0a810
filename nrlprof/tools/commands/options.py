"""The options several commands share, declared once: `--json`, `-o/--output`, `--address` and `-j/--jobs`.

Each command adds the ones it takes with its own help text (and default, for `-o`); spelling, type and checks
are the table's.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def positive_int(text: str) -> int:
    """A count of at least 1; argparse turns the error into a usage message and exit code 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
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
