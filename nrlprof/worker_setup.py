"""Runs in a matched worker process at start, through Ray's worker setup hook."""

from __future__ import annotations

import os

from nrlprof.runtime_env import USER_SETUP_HOOK_VARIABLE


def setup() -> None:
    from nrlprof import activation

    state = activation.activate_worker()
    if state is not None and "torch" in state.targets:
        import torch.profiler  # noqa: F401 - paid at worker start, not when the first window opens
    earlier_hook = os.environ.get(USER_SETUP_HOOK_VARIABLE)
    if earlier_hook:
        from ray._private.runtime_env.setup_hook import load_and_execute_setup_hook

        error = load_and_execute_setup_hook(earlier_hook)
        if error is not None:
            raise RuntimeError(error)
