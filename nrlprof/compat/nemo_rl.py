"""Drop-ins for NeMo RL's profiling helpers, backed by nrlprof's plan."""

from __future__ import annotations

from typing import Any

import nrlprof


def get_nsight_config_if_pattern_matches(worker_name: str) -> dict[str, Any]:
    """NeMo RL's shape: `{"nsight": {...nsys options...}}` when an NRL_NSYS pattern matches, else `{}`."""
    fragment = nrlprof.runtime_env_for(worker_name)
    nsight = fragment.get("_nsight")
    return {"nsight": nsight} if nsight else {}


def maybe_gpu_profile_step(policy: Any, step: int) -> None:
    """Open or close the windows at `step`; `policy` is accepted for NeMo RL's signature.

    nrlprof reaches every matched worker itself, so the policy's own start/stop methods are not needed.
    """
    nrlprof.step(step)
