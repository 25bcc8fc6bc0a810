"""The README's command table, made from the command line's own parsers, so the two never disagree.

    python scripts/command_table.py            print the table
    python scripts/command_table.py --write    put it in README.md between its markers
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- command table: scripts/command_table.py --write -->", "<!-- end of command table -->"


def command_table() -> str:
    from nrlprof.cli import SUBCOMMANDS, build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    rows = ["| command | what it does |", "| --- | --- |"]
    for name, (_, help_text) in SUBCOMMANDS.items():
        usage = subparsers.choices[name].format_usage().strip()
        usage = re.sub(r"\s+", " ", usage.removeprefix("usage: ")).replace(" [-h]", "").replace("|", "\\|")
        rows.append(f"| `{usage}` | {help_text} |")
    return "\n".join(rows) + "\n"


def readme_with_table(text: str, table: str) -> str:
    before, _, rest = text.partition(START + "\n")
    _, _, after = rest.partition(END)
    return f"{before}{START}\n{table}{END}{after}"


def main() -> int:
    write = "--write" in sys.argv[1:]
    table = command_table()
    if not write:
        sys.stdout.write(table)
        return 0
    text = README.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{README}: no command table markers ({START} ... {END})")
    README.write_text(readme_with_table(text, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
