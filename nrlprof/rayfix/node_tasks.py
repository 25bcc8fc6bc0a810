"""Ray task options that run a task on one given node: for the checks and tools that ask every node in turn."""

from __future__ import annotations

from typing import Any


def pinned(node_id: str) -> dict[str, Any]:
    """Task options that run it on `node_id` only, without taking a CPU."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}
