"""`nsys stats` as Nsight Systems 2023+ answers it, with fixed CSV tables: it refuses what real nsys would not parse
the same way, anything but `stats --report A,B --format csv --output - <existing .nsys-rep>`.
`python nsys_stats_standin.py <tables folder> <nsys's arguments>`: the folder holds `kernels.csv` and `nvtx.csv`, the
answers to the two reports, and `reject`, a report it says it cannot find (empty: none)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

tables, args = Path(sys.argv[1]), sys.argv[2:]


def refuse(why: str) -> None:
    print("ERROR: " + why, file=sys.stderr)
    sys.exit(2)


if len(args) != 8 or args[0] != "stats":
    refuse("usage: stats --report R --format csv --output - REPORT, got " + repr(args))
options = dict(zip(args[1:7:2], args[2:7:2], strict=True))
if set(options) != {"--report", "--format", "--output"}:
    refuse("unexpected options " + repr(args))
if options["--format"] != "csv" or options["--output"] != "-":
    refuse("this stand-in writes CSV to stdout only: " + repr(options))
if not (args[7].endswith(".nsys-rep") and os.path.isfile(args[7])):
    refuse("no such report " + args[7])
reports = options["--report"]
reject = (tables / "reject").read_text()
if reject and reject in reports:
    print(f"ERROR: Report '{reject}' could not be found.", file=sys.stderr)
    sys.exit(1)
print("Generating SQLite file report.sqlite from report.nsys-rep")
print("Processing [report.sqlite] with [{}]... ".format(reports.split(",")[0]))
sys.stdout.write((tables / "kernels.csv").read_text())
print()
print("Processing [report.sqlite] with [{}]... ".format(reports.split(",")[1]))
sys.stdout.write((tables / "nvtx.csv").read_text())
