"""Ray clusters for the tests, started once and shared, and the count of the clusters a run started.

The shared clusters are started by this process as `ray.cluster_utils.Cluster` heads, never by `ray.init`: the test
driver only connects to them, so it can move from one to another (`connect`) and `ray.shutdown()` never stops one.
Subprocess drivers join a shared cluster by address (`joining_env`).
"""

from __future__ import annotations

import collections
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.environment import environment_without
from helpers.standins import SYSTEM_PATH, TESTS_DIR, install_stand_ins

# Clusters started in this run, by kind; conftest prints them at the end.
STARTS: collections.Counter[str] = collections.Counter()
STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")
RAY = str(Path(sys.executable).with_name("ray"))


def count_start(kind: str) -> None:
    STARTS[kind] += 1


def short_temp_dir(prefix: str) -> Path:
    """A temp dir under /tmp with a short name: raylet socket paths are length-limited."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def start_cluster(kind: str, head: dict[str, Any], nodes: tuple[dict[str, Any], ...] = (), attempts: int = 3):
    """A `Cluster` with a head and `nodes`; started again when Ray's fixed start-up waits ran out (a loaded machine)."""
    from ray._common.utils import get_default_ray_temp_dir
    from ray.cluster_utils import Cluster

    os.makedirs(get_default_ray_temp_dir(), exist_ok=True)  # Cluster writes its address file there
    for attempt in range(1, attempts + 1):
        cluster = None
        try:
            cluster = Cluster(initialize_head=True, head_node_args={"include_dashboard": False, **head})
            for node in nodes:
                cluster.add_node(**node)
            cluster.wait_for_nodes()
            count_start(kind)
            return cluster
        except Exception as err:
            if cluster is not None:
                cluster.shutdown()
            if attempt == attempts or not any(text in str(err) for text in STARTUP_TIMEOUTS):
                raise
    raise AssertionError("unreachable")


def connected_address() -> str | None:
    import ray

    if not ray.is_initialized():
        return None
    return ray.get_runtime_context().gcs_address


def connect(address: str) -> None:
    """This process's driver on the cluster at `address`, leaving any other it was connected to (never stopping it)."""
    import ray

    if connected_address() == address:
        return
    disconnect()
    ray.init(address=address, log_to_driver=True, logging_level="WARNING")


def disconnect() -> None:
    """This process's driver off whatever cluster it is on, for a module that starts a cluster of its own."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def joining_env(address: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess driver that joins the cluster at `address` (`ray.init()` or `"auto"`): `env`
    as given, or this process's without nrlprof's settings."""
    if env is None:
        env = environment_without("NRL_", "NRLPROF_")
    return env | {"RAY_ADDRESS": address, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}


def alive_actor_ids() -> set[str]:
    """Actors alive on the connected cluster, of every job."""
    import ray

    return set(ray._private.state.state.actor_table(None, actor_state_name="ALIVE"))


def kill_actors(actor_ids: set[str], timeout_s: float = 60.0) -> list[str]:
    """Kill the actors of this driver's job among `actor_ids` and wait until the GCS has them dead.

    Returns the class names of those killed. Ray's kill is asynchronous: the GCS has the actor dead before its
    process is, and a call sent in between is still answered, so this also waits for the processes (all on this
    machine) to end; the next test would otherwise meet actors this one left.
    """
    import ray

    job = ray.get_runtime_context().get_job_id()
    killed: dict[str, str] = {}
    pids: set[int] = set()
    table = ray._private.state.state.actor_table(None, actor_state_name="ALIVE")
    core_worker = ray._private.worker.global_worker.core_worker
    for actor_id in actor_ids:
        info = table.get(actor_id)
        if info is None or info["JobID"] != job:
            continue
        with contextlib.suppress(Exception):  # an actor whose owner is another actor dies with its owner
            core_worker.kill_actor(ray.ActorID(bytes.fromhex(actor_id)), True)
            killed[actor_id] = info["ActorClassName"]
            pids.add(info["Pid"])
    deadline = time.monotonic() + timeout_s
    while (killed.keys() & alive_actor_ids() or any(map(process_runs, pids))) and time.monotonic() < deadline:
        time.sleep(0.05)
    return list(killed.values())


def process_runs(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() and int(pid) != os.getpid():
                found.append(int(pid))
    return found


def descendants(pids: list[int]) -> list[int]:
    """`pids` and every process below them."""
    parents: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(pid))
    found, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.append(pid)
            todo += parents.get(pid, [])
    return found


# How long a cluster's processes get to leave after SIGTERM. Its GCS, raylets, runtime-env agents and autoscaler
# monitor, all sent SIGTERM at once, were measured still there 10 s later; a test's cluster keeps nothing they
# would save, so they get SIGKILL soon after.
STOP_GRACE_S = 2.0


def stop_own_cluster(marker: str) -> None:
    """End the processes whose command line names this cluster's temp dir, and their children."""
    pids = descendants(processes_mentioning(marker))
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.2)


def hook_env(with_hook: bool) -> dict[str, str]:
    import json

    from nrlprof.rayfix.names import HOOK_CLASS_PATH, PLUGINS_VARIABLE

    return {PLUGINS_VARIABLE: json.dumps([{"class": HOOK_CLASS_PATH}])} if with_hook else {}


@contextlib.contextmanager
def ray_start_cluster(
    tmp_path: Path, with_hook: bool, num_cpus: int = 2, resources: str = "", dashboard: bool = False
) -> Iterator[dict]:
    """A head started with `ray start` and token auth on free ports, its own temp dir and token, the stand-in tools
    on a PATH with no `python`; only its own processes are stopped at the end.

    Yields `env` (a client on this node: `RAY_TMPDIR` makes `auto` find this cluster), `session`, `calls` (the
    stand-ins' log is `calls/calls`), `address` and `base`.
    """
    base = tempfile.mkdtemp(prefix="nrlf", dir="/tmp")
    bin_dir = install_stand_ins(tmp_path / "bin")
    env = environment_without("RAY_", "NRL_", "NRLPROF_", "PYTHONPATH")
    env.update(RAY_TMPDIR=base, RAY_AUTH_TOKEN=secrets.token_hex(32), NRLPROF_FAKE_TOOL_LOG=str(tmp_path / "calls"))
    env.update(PATH=f"{bin_dir}:{SYSTEM_PATH}", PYTHONPATH=str(TESTS_DIR))
    extra = [f"--resources={resources}"] if resources else []
    for attempt in (1, 2, 3):  # Ray gives a raylet 30 s to register; a loaded machine sometimes needs another try
        gcs, client, agent, dashboard_port = free_ports(4)
        web = ["--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}"] if dashboard else []
        start = [RAY, "start", "--head", f"--port={gcs}", f"--temp-dir={base}/ray", f"--num-cpus={num_cpus}",
                 f"--include-dashboard={str(dashboard).lower()}", *web, f"--ray-client-server-port={client}",
                 f"--dashboard-agent-listen-port={agent}", "--disable-usage-stats", *extra]  # fmt: skip
        start_env = {**env, "RAY_AUTH_MODE": "token", **hook_env(with_hook)}
        done = subprocess.run(start, env=start_env, capture_output=True, text=True, timeout=300)
        if done.returncode == 0 or attempt == 3:
            break
        stop_own_cluster(f"{base}/ray")
        shutil.rmtree(f"{base}/ray", ignore_errors=True)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        count_start("ray start")
        session = next(p for p in (Path(base) / "ray").glob("session_2*") if not p.is_symlink())
        yield {"env": env, "session": session, "calls": tmp_path, "address": f"127.0.0.1:{gcs}", "base": base}
    finally:
        stop_own_cluster(f"{base}/ray")
        shutil.rmtree(base, ignore_errors=True)


# What `nrlprof collect` and the summary on the nodes read in a session dir: the multi-node modules plant files there.
COLLECTED_LOG_DIRS = ("nsight", "rocprof_sys", "nrlprof")


class MultiNode:
    """One `Cluster` of three raylets on this machine, each with a temp dir of its own, shared by the multi-node test
    modules: a head (resource `head`), `workers[0]` (resource `other`) and `workers[1]`.

    A module joins it with `join()` (a driver job of its own) and `clear()`s what it planted when it leaves. A test that
    kills a node kills one it added (`add_node`), so the three nodes stay for the next module.
    """

    def __init__(self, cluster, base: Path, node_env: dict[str, str]) -> None:
        self.cluster = cluster
        self.base = base
        self.node_env = node_env
        self.head = cluster.head_node.node_id
        by_dir = sorted(cluster.worker_nodes, key=lambda node: node.get_temp_dir_path())  # w1, w2
        self.workers = [node.node_id for node in by_dir]
        self.temp_dirs = {node.node_id: real_temp_dir(node) for node in cluster.list_all_nodes()}

    @property
    def address(self) -> str:
        return self.cluster.address

    @property
    def session(self) -> str:
        """The session dir name, the same on every node of the cluster."""
        return Path(self.cluster.head_node.get_session_dir_path()).name

    def join(self) -> None:
        """This process's driver on the cluster as a job of its own: a module sees none of another's calls."""
        import ray

        disconnect()
        ray.init(address=self.address, log_to_driver=False, logging_level="WARNING")

    def add_node(self, **resources: float):
        """A node of the caller's own (to kill), with its own temp dir; returns the `ray` node."""
        from nrlprof.runtime.job_env import inherited

        with inherited(self.node_env):
            node = self.cluster.add_node(num_cpus=1, resources=resources, temp_dir=str(short_temp_dir("nrlx")))
        self.cluster.wait_for_nodes()
        self.temp_dirs[node.node_id] = real_temp_dir(node)
        return node

    def clear(self) -> None:
        """Every planted file gone from every node: other session dirs, and the collected logs of the current one."""
        for temp_dir in self.temp_dirs.values():
            for session in temp_dir.glob("session_*"):
                if session.is_symlink() or not session.is_dir():
                    continue
                if session.name != self.session:
                    shutil.rmtree(session, ignore_errors=True)
                    continue
                for name in COLLECTED_LOG_DIRS:
                    shutil.rmtree(session / "logs" / name, ignore_errors=True)

    def shutdown(self) -> None:
        self.cluster.shutdown()
        shutil.rmtree(self.base, ignore_errors=True)
        for temp_dir in self.temp_dirs.values():
            shutil.rmtree(temp_dir, ignore_errors=True)


def real_temp_dir(node) -> Path:
    return Path(os.path.realpath(node.get_temp_dir_path()))


def start_multi_node(node_env: dict[str, str]) -> MultiNode:
    """The shared multi-node cluster; its raylets (and the nodes added later) run with `node_env` on top."""
    base = short_temp_dir("nrlm")  # short: raylet socket paths are length-limited
    head = {"num_cpus": 1, "resources": {"head": 8}, "temp_dir": f"{base}/h"}
    nodes = (
        {"num_cpus": 1, "resources": {"other": 8}, "temp_dir": f"{base}/w1"},
        {"num_cpus": 1, "temp_dir": f"{base}/w2"},
    )
    from nrlprof.runtime.job_env import inherited

    with inherited(node_env):
        cluster = start_cluster("multi-node shared", head, nodes)
    return MultiNode(cluster, base, node_env)
