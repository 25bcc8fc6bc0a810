"""A child process that does nothing but wait for a line on its stdin (`python waiting_child.py`): what it does at
start-up is what nrlprof's start-up hook does."""

from __future__ import annotations

import sys

sys.stdin.readline()
