"""NeMo RL's nsight runtime_env for a worker-type name that matches NRL_NSYS_WORKER_PATTERNS (fnmatch)."""

import fnmatch
from typing import Any

from nemo_rl.utils.nsys import NRL_NSYS_EXTRA_OPTIONS, NRL_NSYS_PROFILE_STEP_RANGE, NRL_NSYS_WORKER_PATTERNS


def get_nsight_config_if_pattern_matches(worker_name: str) -> dict[str, Any]:
    assert not (bool(NRL_NSYS_WORKER_PATTERNS) ^ bool(NRL_NSYS_PROFILE_STEP_RANGE))
    for pattern in (p.strip() for p in NRL_NSYS_WORKER_PATTERNS.split(",") if p.strip()):
        if fnmatch.fnmatch(worker_name, pattern):
            config = {"t": "cuda,nvtx", "o": f"'{worker_name}_{NRL_NSYS_PROFILE_STEP_RANGE}_%p'",
                      "stop-on-exit": "true", "s": "none", "capture-range": "cudaProfilerApi",
                      "capture-range-end": "stop", "cuda-graph-trace": "node"}  # fmt: skip
            return {"nsight": {**config, **NRL_NSYS_EXTRA_OPTIONS}}
    return {}
