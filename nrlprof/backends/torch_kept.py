"""slow:keep in the torch backend: one profiler session per step, started at the step's top and stopped at the next;
the stopped session is exported beside the next step where the controller's verdict says its step was slow, and dropped
unread otherwise, so a process holds at most one step's events. Past its host budget (NRL_PROFILE_MAX_HOST_MB) a process
records no more steps."""

from __future__ import annotations

from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import Trigger, WindowRecord


class KeptSessions:
    """Mixed into TorchBackend, whose session, window and budget it uses."""

    keep_stopped = ""  # why this process records no more steps for slow:keep (its host budget), if so

    def begin_kept(self, step: int) -> bool:
        if self.keep_stopped:
            return False
        self.trigger = None
        self.start_window(Window(step, step), step)
        self.keeping = True
        return True

    def end_kept(self, trigger: Trigger | None) -> WindowRecord | None:
        """The step's session stops; exported beside the next step where it was slow, else dropped unread. Past the
        host budget, this process records no more steps."""
        self.keeping = False
        grown = self.budget.grown_past() if self.profiler is not None else None
        if trigger is not None:
            self.trigger = trigger
            if self.profiler is not None:  # the verdict came while it records: its trace's nrlprof block says it
                self.profiler.add_metadata_json("nrlprof", self._nrlprof_json(self.window))
            record = self.stop_window()
        else:
            record = None
            if self.profiler is not None:
                profiler, self.profiler = self.profiler, None
                with self.guard.own_start():
                    profiler.stop()
            self.window = None
        if grown is not None:
            self.keep_stopped = (f"step {self.steps_seen[-1]} grew the process by {grown:.0f} MB, past its host budget "
                                 f"of {self.budget.budget_mb} MB (NRL_PROFILE_MAX_HOST_MB)")  # fmt: skip
            logger.warning("%s rank %s: slow:keep records no more steps: %s", self.role.worker_name, self.role.rank,
                           self.keep_stopped)  # fmt: skip
        return record
