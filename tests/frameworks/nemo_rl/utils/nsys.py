"""NeMo RL's `nemo_rl.utils.nsys` as the framework has it: the variables read at import, the range parsed with
`split(":")` and checked with `assert`, the policy's own start/stop called in range."""

import json
import os
from typing import Any, Protocol

NRL_NSYS_WORKER_PATTERNS = os.environ.get("NRL_NSYS_WORKER_PATTERNS", "")
NRL_NSYS_PROFILE_STEP_RANGE = os.environ.get("NRL_NSYS_PROFILE_STEP_RANGE", "")
NRL_NSYS_EXTRA_OPTIONS: dict[str, Any] = json.loads(os.environ.get("NRL_NSYS_EXTRA_OPTIONS") or "{}")


class ProfilablePolicy(Protocol):
    def start_gpu_profiling(self) -> None: ...

    def stop_gpu_profiling(self) -> None: ...


def maybe_gpu_profile_step(policy: ProfilablePolicy, step: int):
    assert not (bool(NRL_NSYS_WORKER_PATTERNS) ^ bool(NRL_NSYS_PROFILE_STEP_RANGE))
    if not NRL_NSYS_WORKER_PATTERNS:
        return
    start, stop = NRL_NSYS_PROFILE_STEP_RANGE.split(":")
    start, stop = int(start), int(stop)
    if start <= step < stop:
        if not getattr(policy, "__NRL_PROFILE_STARTED", False):
            policy.start_gpu_profiling()
            policy.__NRL_PROFILE_STARTED = True
    elif getattr(policy, "__NRL_PROFILE_STARTED", False):
        policy.stop_gpu_profiling()
        policy.__NRL_PROFILE_STARTED = False
