"""Stand-in for `rocprof-sys-python`: records how it was called, then runs the wrapped command.

Like the real wrapper it runs `$PYTHON_EXECUTABLE <script> <args>` for `rocprof-sys-python [options] --
<script> <args>`; with exec, the wrapped program keeps this process's pid.
"""

from __future__ import annotations

import os
import sys

from nsys_standin.calls import record_call

VERSION = "rocprof-sys 1.0.0-fake"


def main() -> int:
    tool = os.path.basename(sys.argv[0])
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-v"]):
        print(VERSION)
        return 0
    if "--" not in argv:
        raise SystemExit(f"fake {tool}: no `--` before the command to run")
    separator = argv.index("--")
    options, command = argv[:separator], argv[separator + 1 :]
    record_call(tool, options, command, os.getpid())
    if not command:
        raise SystemExit(f"fake {tool}: no command to run")
    command = [os.environ.get("PYTHON_EXECUTABLE", sys.executable), *command]
    os.execvp(command[0], command)
