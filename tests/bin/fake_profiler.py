#!/usr/bin/env python3
"""Stand-in for `rocprof-sys-python`: records how it was called, then runs the wrapped command.

The record (one JSON line) goes to $NRLPROF_FAKE_TOOL_LOG/<tool>-<pid>.json. With exec, the
wrapped program keeps this process's pid. The `nsys` stand-in is tests/nsys_standin.
"""

import json
import os
import sys
import time

VERSIONS = {"rocprof-sys-python": "rocprof-sys 1.0.0-fake"}


def split_rocprof(argv):
    separator = argv.index("--")
    return argv[:separator], argv[separator + 1 :]


def main():
    tool = os.path.basename(sys.argv[0])
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-v"]):
        print(VERSIONS.get(tool, f"{tool} fake"))
        return 0
    options, command = split_rocprof(argv)
    log_dir = os.environ.get("NRLPROF_FAKE_TOOL_LOG")
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        record = {
            "tool": tool,
            "options": options,
            "command": command,
            "pid": os.getpid(),
            "time": time.time(),
            "env": {
                k: v
                for k, v in os.environ.items()
                if k.startswith(("ROCPROFSYS_", "NRLPROF_WORKER", "PYTHON_EXECUTABLE"))
            },
        }
        with open(os.path.join(log_dir, f"{tool}-{os.getpid()}.json"), "w") as handle:
            json.dump(record, handle)
    if not command:
        raise SystemExit(f"fake {tool}: no command to run")
    # Like the real wrapper: `$PYTHON_EXECUTABLE -m rocprofsys ... -- <script> <args>`.
    command = [os.environ.get("PYTHON_EXECUTABLE", sys.executable), *command]
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
