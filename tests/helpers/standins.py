"""The stand-in profiler tools (`tests/nsys_standin/`) put on a PATH, and the records of their calls."""

from __future__ import annotations

import json
import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
# No `python` here: Ray's unfixed plugin, which runs `nsys ... python`, cannot start a worker.
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
STAND_IN_BODY = """\
import sys
sys.path.insert(0, {tests!r})
from nsys_standin.{module} import main
sys.exit(main())
"""


def install_stand_ins(bin_dir: Path) -> Path:
    """The stand-in `nsys` (its libraries built now) and `rocprof-sys-python`, run by this interpreter."""
    if str(TESTS_DIR) not in sys.path:
        sys.path.insert(0, str(TESTS_DIR))
    from nsys_standin import build

    build.library_dir()
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool, module in (("nsys", "cli"), ("rocprof-sys-python", "rocprof")):
        path = bin_dir / tool
        path.write_text(f"#!{sys.executable}\n" + STAND_IN_BODY.format(tests=str(TESTS_DIR), module=module))
        path.chmod(0o755)
    return bin_dir


def tool_records(log_dir: Path, tool: str = "nsys") -> list[dict]:
    """Every call of `tool` logged in `log_dir`, but the plugins' dry runs (`... python -c ""`)."""
    records = [json.loads(p.read_text()) for p in sorted(log_dir.glob(f"{tool}-*.json"))]
    return [r for r in records if r["command"][1:3] != ["-c", ""]]
