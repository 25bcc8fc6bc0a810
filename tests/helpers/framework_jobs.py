"""Drivers of framework jobs, run as their own processes that join the test session's Ray cluster by address.

nrlprof activates in them at start-up from the NRL_* variables given (the job never imports nrlprof). Ray kills
a driver's actors when the driver exits, so nothing a job creates outlives it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.environment import environment_without

TESTS = Path(__file__).parent.parent
FRAMEWORKS = TESTS / "frameworks"


def job_env(**variables: str) -> dict[str, str]:
    """This environment without nrlprof's or Ray's own settings, plus the variables given."""
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    env.update(
        PYTHONPATH=os.pathsep.join([str(FRAMEWORKS), str(TESTS)]),
        RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "token"),
        NRL_STEP_ANATOMY="0",
    )
    env.update(variables)
    return env


def run_job(
    ray_cluster, directory: Path, program: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess:
    """The job's driver `program` run in `directory`, its first argument the cluster's address, then `args`."""
    address = ray_cluster.get_runtime_context().gcs_address
    return subprocess.run([sys.executable, str(program), address, *args], env=env, capture_output=True, text=True,
                          timeout=600, cwd=directory)  # fmt: skip


def readme_block_variables(readme: Path, heading: str) -> dict[str, str]:
    """The `export NAME=value ...` variables of the first shell block after the paragraph starting `heading`."""
    import shlex

    text = readme.read_text()
    start = text.index(heading)
    block = text[text.index("```bash", start) + len("```bash") : text.index("```", text.index("```bash", start) + 7)]
    variables: dict[str, str] = {}
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            variables.update(word.split("=", 1) for word in words[1:])
    return variables


def readme_log_lines(readme: Path, heading: str) -> list[str]:
    """The `[nrlprof] ...` lines of the first plain (not `bash`) block after the paragraph starting `heading`."""
    lines = readme.read_text()[readme.read_text().index(heading) :].splitlines()
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    opening, closing = next((o, c) for o, c in zip(fences[::2], fences[1::2], strict=False) if lines[o] == "```")
    return [line[line.index("[nrlprof]") :] for line in lines[opening + 1 : closing] if "[nrlprof]" in line]
