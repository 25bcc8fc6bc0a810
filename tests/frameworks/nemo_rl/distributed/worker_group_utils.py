"""NeMo RL's nsight runtime_env for a worker whose name matches NRL_NSYS_WORKER_PATTERNS."""

import fnmatch
from typing import Any

from nemo_rl.utils.nsys import NRL_NSYS_EXTRA_OPTIONS, NRL_NSYS_PROFILE_STEP_RANGE, NRL_NSYS_WORKER_PATTERNS


def get_nsight_config_if_pattern_matches(worker_name: str) -> dict[str, Any]:
    assert not (bool(NRL_NSYS_WORKER_PATTERNS) ^ bool(NRL_NSYS_PROFILE_STEP_RANGE))
    for pattern in (p.strip() for p in NRL_NSYS_WORKER_PATTERNS.split(",") if p.strip()):
        if fnmatch.fnmatch(worker_name, pattern):
            config = {"t": "cuda,nvtx", "o": f"'{worker_name}_{NRL_NSYS_PROFILE_STEP_RANGE}_%p'",
                      "capture-range": "cudaProfilerApi", "capture-range-end": "stop"}  # fmt: skip
            return {"nsight": {**config, **NRL_NSYS_EXTRA_OPTIONS}}
    return {}
