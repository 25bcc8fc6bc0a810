"""`dcgmi` stand-in, as DCGM 3.x/4.x's command line behaves against a running host engine: `dcgmi modules -l` (the
modules table, the Profiling module `Loaded` once profiling fields are watched), `dcgmi dmon -e <field ids> -c N`
(watches the fields; a profiling field, 1001-1012, loads the Profiling module, which stays loaded in the host engine
as dcgm-exporter's DCGM_FI_PROF_* watches keep it), `dcgmi profile --pause` / `--resume`. The host engine's state is a
file shared by every call (`state_path()`); `dcgmi --version`."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

VERSION = "dcgmi  version: 4.2.3-fake"
MODULES = ("Core", "NvSwitch", "VGPU", "Introspection", "Health", "Policy", "Config", "Diag", "Profiling", "SysMon")
PROFILING_FIELDS = range(1001, 1013)
RULE = "+-----------+--------------------+--------------------------------------------------+"


def state_path() -> Path:
    return Path(tempfile.gettempdir()) / f"nrlprof-dcgm-standin-{os.getuid()}" / "hostengine.json"


def _state() -> dict:
    try:
        return json.loads(state_path().read_text())
    except (OSError, ValueError):
        return {"loaded": ["Core", "NvSwitch"], "paused": False}


def _save(state: dict) -> None:
    state_path().parent.mkdir(parents=True, exist_ok=True)
    state_path().write_text(json.dumps(state))


def modules() -> int:
    loaded = set(_state()["loaded"])
    print(RULE)
    print("| List Modules                                                                      |")
    print("| Status: Success                                                                   |")
    print(RULE.replace("-", "="))
    print("| Module ID | Name               | State                                            |")
    print(RULE)
    for index, name in enumerate(MODULES):
        print(f"| {index:<9} | {name:<18} | {'Loaded' if name in loaded else 'Not loaded':<48} |")
    print(RULE)
    return 0


def dmon(argv: list[str]) -> int:
    fields = argv[argv.index("-e") + 1].split(",") if "-e" in argv else []
    state = _state()
    if any(int(f) in PROFILING_FIELDS for f in fields if f.isdigit()) and "Profiling" not in state["loaded"]:
        state["loaded"].append("Profiling")
        _save(state)
    print("#Entity   " + "  ".join(f"F{f}" for f in fields))
    print("GPU 0     " + "  ".join("0.000" for _ in fields))
    return 0


def profile(argv: list[str]) -> int:
    state = _state()
    if "--pause" in argv:
        state["paused"] = True
        _save(state)
        print("Successfully paused profiling.")
        return 0
    if "--resume" in argv:
        state["paused"] = False
        _save(state)
        print("Successfully resumed profiling.")
        return 0
    print("dcgmi stand-in: profile supports --pause and --resume", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--version"], ["-v"]):
        print(VERSION)
        return 0
    if argv[:2] in (["modules", "-l"], ["modules", "--list"]):
        return modules()
    if argv[:1] == ["dmon"]:
        return dmon(argv[1:])
    if argv[:1] == ["profile"]:
        return profile(argv[1:])
    print(f"dcgmi stand-in: {' '.join(argv[:2]) or 'no command'} is not supported", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
