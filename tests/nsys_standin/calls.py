"""The record every stand-in tool writes of how it was called: `$NRLPROF_FAKE_TOOL_LOG/<tool>-<pid>.json` (nsys's
`subcommand`: profile, launch, start or stop; `pid`: the launched process, or for start/stop the one that ran it)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from nsys_standin.report import write_atomically

RECORDED_ENV_PREFIXES = ("ROCPROFSYS_", "NRLPROF_WORKER", "PYTHON_EXECUTABLE")


def record_call(tool: str, options: list[str], command: list[str], pid: int, **fields: Any) -> None:
    """Options, command, the pid of the process that runs the command, `fields`, the time and the tool's env."""
    log_dir = os.environ.get("NRLPROF_FAKE_TOOL_LOG")
    if not log_dir:
        return
    os.makedirs(log_dir, exist_ok=True)
    record = {
        "tool": tool,
        "options": options,
        "command": command,
        "pid": pid,
        **fields,
        "time": time.time(),
        "env": {k: v for k, v in os.environ.items() if k.startswith(RECORDED_ENV_PREFIXES)},
    }
    write_atomically(Path(log_dir) / f"{tool}-{os.getpid()}.json", json.dumps(record))
