"""Runs in a matched worker process at start, through Ray's worker setup hook."""

from __future__ import annotations

import contextlib
import os

from nrlprof.workers.runtime_env import USER_SETUP_HOOK_VARIABLE


def setup() -> None:
    from nrlprof.runtime import session as activation
    state = activation.activate_worker()
    if state is not None and "torch" in state.targets:
        # Paid at worker start, not when the first window opens: torch's trace preparation
        # imports inductor, over a second on the first profile.
        with contextlib.suppress(ImportError):
            pass
    earlier_hook = os.environ.get(USER_SETUP_HOOK_VARIABLE)
    if earlier_hook:
        from ray._private.runtime_env.setup_hook import load_and_execute_setup_hook

        error = load_and_execute_setup_hook(earlier_hook)
        if error is not None:
            raise RuntimeError(error)
