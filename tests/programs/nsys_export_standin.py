"""`nsys export --type sqlite --force-overwrite true --output <file> <report>.nsys-rep` that writes a copy of a real
capture's SQLite export; it refuses any other arguments (`python nsys_export_standin.py <export to copy> <nsys's
arguments>`)."""

from __future__ import annotations

import shutil
import sys

export, args = sys.argv[1], sys.argv[2:]
options = dict(zip(args[1:-1:2], args[2:-1:2], strict=False))
expected = {"--type": "sqlite", "--force-overwrite": "true", "--output": options.get("--output")}
if args[0] != "export" or options != expected:
    print("ERROR: unexpected arguments " + repr(args), file=sys.stderr)
    sys.exit(2)
if not args[-1].endswith(".nsys-rep"):
    sys.exit(3)
shutil.copyfile(export, options["--output"])
