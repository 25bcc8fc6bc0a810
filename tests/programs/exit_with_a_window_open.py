"""A gate with a window open when the interpreter exits, closed by the process's lifecycle as a session's gate is:
prints the actions the controller's profiler got, after the lifecycle's exit hook ran."""

from __future__ import annotations

import atexit
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers.gates import gate_for, nsys

from nrlprof.process.lifecycle import GATE, LIFECYCLE

gate, log = gate_for(**nsys("2:5"))
atexit.register(lambda: print("actions at exit:", log.actions))  # registered first, so it runs last
LIFECYCLE.add(GATE, gate.finish)
gate.step(2)
