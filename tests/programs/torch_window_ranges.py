"""A fresh process's torch window (steps 2 and 3, with_stack) in which one of nrlprof's annotate ranges runs:
`python torch_window_ranges.py <trace directory>`. Prints, as JSON, whether nvtx was imported, the trace's nvtx
frames and its ranges."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers.torch_windows import torch_backend

import nrlprof
from nrlprof.config.steps import Window
from nrlprof.process import state
from nrlprof.process.finishing import FINISHER
from nrlprof.process.state import OpenWindows


@nrlprof.annotate("rollout")
def rollout() -> int:
    return 1


backend = torch_backend(Path(sys.argv[1]), with_stack=True)
windows = OpenWindows()
state.session = SimpleNamespace(windows=windows)
backend.start_window(Window(2, 3), 2)
windows.opened("torch", 2)
rollout()  # nrlprof's annotate range in a torch window, as its method ranges open them
backend.mark_step(3)
(path,) = backend.stop_window().files
FINISHER.settle()
names = [e.get("name", "") for e in json.loads(Path(path).read_text())["traceEvents"]]
print(json.dumps({"nvtx_imported": "nvtx" in sys.modules, "nvtx_frames": [n for n in names if n.startswith("nvtx/")],
                  "ranges": [n for n in names if n.startswith("rollout")]}))  # fmt: skip
