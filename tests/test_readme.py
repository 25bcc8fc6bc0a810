"""The README for users says what the code does: its command table is the command line's own, and it names every
variable nrlprof reads."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from nrlprof.config.misspelled import known_variables

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
sys.path.insert(0, str(ROOT / "scripts"))

from command_table import END, START, command_table  # noqa: E402


def test_the_command_table_is_the_command_lines_own():
    table = README.partition(START + "\n")[2].partition(END)[0]
    assert table == command_table(), "run `python scripts/command_table.py --write`"


def test_every_variable_nrlprof_reads_is_in_the_variables_table():
    rows = [line for line in README.splitlines() if line.startswith("| `NRL_")]
    # Every backend's selection reads a discrete switch; only nsys's and torch's have a meaning.
    meaningless = {f"{family}_{switch}" for family in ("NRL_MEMORY_PROFILE", "NRL_ROCPROF")
                   for switch in ("DISCRETE", "DISCRETE_METHODS")}  # fmt: skip
    missing = []
    for name in sorted(known_variables() - meaningless):
        named = any(_names(row, name) for row in rows)
        if not named:
            missing.append(name)
    assert missing == []


def _names(row: str, name: str) -> bool:
    """`NRL_X_Y` itself, or `..._Y` / `_Y` in a row that names a variable of the same family."""
    cell = row.split("|")[1]
    if f"`{name}`" in cell:
        return True
    families = re.findall(r"`(NRL_[A-Z]+(?:_PROFILE)?)_", cell)
    return any(name.startswith(family + "_") and (f"`...{name[len(family):]}`" in cell or
               f"`{name[len(family):]}`" in cell) for family in families)  # fmt: skip


def test_the_picture_of_the_report_is_there():
    assert (ROOT / "docs" / "report.png").is_file()
    assert "](docs/report.png)" in README
