"""How much a process has grown by since its torch window (or slow:keep step) began, against its host budget
(NRL_PROFILE_MAX_HOST_MB).

The profiler's buffers are not measured apart from the job's own memory: the growth of the process's RSS across
the window stands for them (a training step's own memory comes back at its end; a profiler's stays until the
trace is written).
"""

from __future__ import annotations

import os

from nrlprof.config.host_budget import host_budget_mb

MB = 1 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def host_rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as handle:
        return int(handle.read().split()[1]) * _PAGE


class HostBudget:
    def __init__(self, setting: int | None) -> None:
        self.budget_mb = host_budget_mb(setting)
        self.baseline: int | None = None

    def begin(self) -> None:
        """The window begins, its profiler started: growth is counted from here."""
        self.baseline = host_rss_bytes() if self.budget_mb else None

    def grown_past(self) -> float | None:
        """MB grown since `begin`, when past the budget; None while within it (or with no budget)."""
        if self.baseline is None or self.budget_mb is None:
            return None
        grown = (host_rss_bytes() - self.baseline) / MB
        return grown if grown > self.budget_mb else None
