"""slime.utils.misc: the helpers the stand-in uses, as slime has them."""

from __future__ import annotations

import socket


def should_run_periodic_action(
    rollout_id: int, interval: int | None, num_rollout_per_epoch: int | None = None, num_rollout: int | None = None
) -> bool:
    if interval is None:
        return False
    if num_rollout is not None and rollout_id == num_rollout - 1:
        return True
    step = rollout_id + 1
    return (step % interval == 0) or (num_rollout_per_epoch is not None and step % num_rollout_per_epoch == 0)


def get_current_node_ip() -> str:
    return "127.0.0.1"


def get_free_port(start_port: int = 10000, consecutive: int = 1) -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]
