from typing import Any

from nemo_rl.distributed.worker_group_utils import get_nsight_config_if_pattern_matches


def get_runtime_env_for_policy_worker(policy_worker_name: str) -> dict[str, Any]:
    return {**get_nsight_config_if_pattern_matches(policy_worker_name)}
