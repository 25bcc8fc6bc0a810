"""Run a benchmark case in a fresh interpreter that profiles itself as the controller with a torch window.

The first torch profiler start of a process is the expensive one, so each case gets a new interpreter, with no
`NRL_*` or `BENCH_*` variable from the caller; `steps` (a `NRL_TORCH_PROFILE_STEP_RANGE`) plans the window, None
runs the case unprofiled. The case prints one JSON object as its last line. It runs in a temporary directory of its
own: what a driver writes by default (`step_anatomy/`) never lands where the benchmark was started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def run_case(code: str, steps: str | None, directory: str, **bench_env: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL", "BENCH_"))}
    env.update(bench_env)
    if steps:
        env.update(
            NRL_TORCH_PROFILE_WORKER_PATTERNS="*none*",
            NRL_TORCH_PROFILE_STEP_RANGE=steps,
            NRL_TORCH_PROFILE_DIR=directory,
            NRL_PROFILE_LOG_LEVEL="WARNING",
        )
    with tempfile.TemporaryDirectory(prefix="nrlprof-bench-case-") as cwd:
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=600, cwd=cwd
        )
    return json.loads(result.stdout.strip().splitlines()[-1])
