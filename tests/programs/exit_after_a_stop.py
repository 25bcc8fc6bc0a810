"""A process that exits right after a torch window's stop, its trace taking a second to finish: prints the trace's
path (`python exit_after_a_stop.py <torch dir>`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers.torch_windows import torch_process, window

from nrlprof.backends import torch_profiler

written = torch_profiler._write_valid
torch_profiler._write_valid = lambda *args: (time.sleep(1.0), written(*args))[1]
(answered,) = window(torch_process(Path(sys.argv[1])))
print(answered["files"][0], flush=True)
