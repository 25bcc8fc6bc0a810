"""DCGM's profiling metrics on a node: while its host engine collects them (DCGM_FI_PROF_*, dcgm-exporter's default
counters), the Profiling module holds the driver's profiling lock for the whole node, and CUPTI's and Nsight's
counters cannot be had there (DCGM #56); `dcgmi profile --pause` lets them go for the profiling run."""

from __future__ import annotations

import shutil
import subprocess

TIMEOUT_S = 10.0
PROFILING_MODULE = "Profiling"
PAUSE = "dcgmi profile --pause"
RESUME = "dcgmi profile --resume"


def profiling_check() -> tuple[bool | None, str]:
    """Whether DCGM's Profiling module is loaded here (`dcgmi modules -l`), and what was found; None where dcgmi is
    not installed or its host engine does not answer."""
    dcgmi = shutil.which("dcgmi")
    if dcgmi is None:
        return None, "dcgmi not found: no DCGM host engine to ask"
    try:
        done = subprocess.run([dcgmi, "modules", "-l"], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"`dcgmi modules -l` failed: {err}"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return None, f"`dcgmi modules -l` exited {done.returncode}: {said[-1] if said else 'no message'}"
    for line in done.stdout.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1] == PROFILING_MODULE:
            loaded = cells[2].lower() == "loaded"
            return loaded, f"DCGM's {PROFILING_MODULE} module: {cells[2]} ({dcgmi})"
    return False, f"no {PROFILING_MODULE} module listed by `dcgmi modules -l` ({dcgmi})"
