"""A `ray.cluster_utils.Cluster` of N raylets on this machine for the benchmarks, each node with its own temp dir."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import ray
from ray._common.utils import get_default_ray_temp_dir
from ray.cluster_utils import Cluster


@contextlib.contextmanager
def local_cluster(nodes: int, prefix: str, dashboard: bool = True) -> Iterator[tuple[Path, Path, str]]:
    """(base, work, address): one temp dir per node under `base` (short: raylet socket paths are length-limited),
    a scratch dir, the cluster's address. This driver is joined to the cluster; all of it is removed afterwards."""
    os.makedirs(get_default_ray_temp_dir(), exist_ok=True)  # Cluster writes its address file there
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="nrlprof-bench-"))
    cluster = None
    try:
        head = {"num_cpus": 1, "temp_dir": str(base / "n0")}
        cluster = Cluster(
            initialize_head=True, head_node_args=head if dashboard else {**head, "include_dashboard": False}
        )
        for index in range(1, nodes):
            cluster.add_node(num_cpus=1, temp_dir=str(base / f"n{index}"))
        ray.init(address=cluster.address, log_to_driver=False)
        yield base, work, cluster.address
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def node_sessions(base: Path) -> list[Path]:
    """Each node's current session dir, in the nodes' order."""
    return [next(p for p in node_dir.glob("session_2*") if not p.is_symlink()) for node_dir in sorted(base.iterdir())]
