"""`nemo_rl.utils.nsys` (NeMo RL 7ea279a): the variables read at import, the range parsed with `split(":")` and
checked with `assert`; in range, the policy's own `start_gpu_profiling()` is called once."""

import json
import os
from typing import Any, Protocol

NRL_NSYS_WORKER_PATTERNS = os.environ.get("NRL_NSYS_WORKER_PATTERNS", "")
NRL_NSYS_PROFILE_STEP_RANGE = os.environ.get("NRL_NSYS_PROFILE_STEP_RANGE", "")


def _parse_extra_options(raw: str) -> dict[str, Any]:
    parsed = json.loads(raw) if raw else {}
    if not isinstance(parsed, dict):
        raise ValueError(f"NRL_NSYS_EXTRA_OPTIONS must be a JSON object, got {type(parsed).__name__}.")
    return parsed


NRL_NSYS_EXTRA_OPTIONS: dict[str, Any] = _parse_extra_options(os.environ.get("NRL_NSYS_EXTRA_OPTIONS", ""))


class ProfilablePolicy(Protocol):
    def start_gpu_profiling(self) -> None: ...

    def stop_gpu_profiling(self) -> None: ...


def maybe_gpu_profile_step(policy: ProfilablePolicy, step: int):
    assert not (bool(NRL_NSYS_WORKER_PATTERNS) ^ bool(NRL_NSYS_PROFILE_STEP_RANGE))
    if not NRL_NSYS_WORKER_PATTERNS:
        return
    start, stop = (int(part) for part in NRL_NSYS_PROFILE_STEP_RANGE.split(":"))
    assert start < stop and start >= 1
    if start <= step < stop:
        if not getattr(policy, "__NRL_PROFILE_STARTED", False):
            policy.start_gpu_profiling()
            policy.__NRL_PROFILE_STARTED = True
    elif getattr(policy, "__NRL_PROFILE_STARTED", False):
        policy.stop_gpu_profiling()
        policy.__NRL_PROFILE_STARTED = False
