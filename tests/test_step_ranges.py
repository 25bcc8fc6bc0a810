"""nrlprof.ranges.step_ranges: each step is one NVTX range `step <n>` in the `nrlprof` domain, seen through the nsys
stand-in's NVTX injection library (as nsys sees them): every range opened once and ended once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_each_step_is_one_range_ended_once(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from nsys_standin import build

    events_dir = tmp_path / "nvtx"
    events_dir.mkdir()
    env = dict(os.environ)
    env["NVTX_INJECTION64_PATH"] = str(build.library_dir() / "libnvtx_standin_injection.so")
    env["NRLPROF_STANDIN_NVTX_DIR"] = str(events_dir)
    program = Path(__file__).parent / "programs" / "step_ranges_out_of_order.py"
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for path in events_dir.glob("*.jsonl") for line in path.read_text().splitlines()]
    starts = {e["id"]: e["msg"] for e in events if e["ev"] == "start" and e["domain"] == "nrlprof"}
    ends = [e["id"] for e in events if e["ev"] == "end"]
    assert sorted(starts.values()) == ["step 1", "step 2", "step 3"]
    assert sorted(ends) == sorted(starts), "every step range ends once, and only those"
