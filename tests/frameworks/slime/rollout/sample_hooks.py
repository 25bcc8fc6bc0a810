"""slime.rollout.sample_hooks: the rollout id the RolloutManager sets at the top of each generation and evaluation."""

from __future__ import annotations

_current_rollout_id: int | None = None


def set_current_rollout_id(rollout_id: int | None) -> None:
    global _current_rollout_id
    _current_rollout_id = rollout_id
