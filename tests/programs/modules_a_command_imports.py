"""`nrlprof <argv>` run by its `main`, its output swallowed: prints, as JSON, its exit status and the nrlprof, ray
and torch modules it imported (`python modules_a_command_imports.py merge missing -o t.json`)."""

from __future__ import annotations

import contextlib
import io
import json
import sys

from nrlprof.cli import main

with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        status = main(sys.argv[1:])
    except SystemExit as exit:
        status = exit.code
names = [m for m in sys.modules if m.startswith(("nrlprof.", "ray", "torch"))]
print(json.dumps([status, names]))
