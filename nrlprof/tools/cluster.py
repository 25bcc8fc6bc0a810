"""Tools that work on a running Ray cluster: connecting, one task pinned to each node, and node failures.

Connecting goes through `ray.init(address="auto")` (or the address the user gave, unchanged), never an address
resolved here: Ray turns on its token authentication (Ray >= 2.60, `RAY_AUTH_MODE`, `~/.ray/auth_token`) only
when it finds the cluster itself. For an address given (`--address 10.0.0.5:6379`), with RAY_AUTH_MODE unset, a token
found where Ray keeps it turns token authentication on as Ray does for `auto`; with none, a cluster that refuses calls
without a token is said in one line, instead of Ray's 20 s of retries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from nrlprof.errors import NrlprofError
from nrlprof.layout import file_safe
from nrlprof.rayfix.node_tasks import pinned

CONNECT_TIMEOUT_S = 5.0
AUTO_ADDRESS = "auto"
CLIENT_PREFIX = "ray://"
AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"
TOKEN_HINT = (
    "the cluster may use token authentication (Ray >= 2.60 turns it on for every cluster `ray.init()` starts): set "
    f"{AUTH_MODE_VARIABLE}=token and the cluster's token, in RAY_AUTH_TOKEN or ~/.ray/auth_token"
)


class ClusterError(NrlprofError):
    """A failure of a cluster tool; the message names the node, file or input."""


class BadInput(ClusterError):
    """Input the command cannot work with (no cluster, unwritable directory, a bad option value)."""


class NoClusterFound(BadInput):
    """No running cluster where one was looked for: none recorded or running here, or none answering there."""


class NodeLost(ClusterError):
    """The node stopped answering (died, was removed, timed out)."""


class FileFailed(ClusterError):
    """One file (or one node's task) failed; the others can go on."""


@dataclass(frozen=True)
class NodeError:
    """A node whose work did not finish, as reported in a tool's result."""

    node: str
    node_id: str
    reason: str


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    hostname: str
    ip: str
    label: str  # unique among the alive nodes and safe as one directory name

    def describe(self) -> str:
        return f"node {self.label} (id {self.node_id[:12]}, {self.ip})"


# --------------------------------------------------------------------------- connecting


def locate(address: str | None) -> str:
    """The `host:port` Ray would join for `address` (None/"auto": RAY_ADDRESS or the local cluster)."""
    from nrlprof import rayapi

    try:
        return rayapi.bootstrap_address(address or AUTO_ADDRESS)
    except (ConnectionError, ValueError) as err:
        where = f"--address {address!r}" if address else "RAY_ADDRESS / the local Ray instance"
        raise NoClusterFound(f"no Ray cluster found from {where}: {err}") from None


def probe_address(address: str, given: str | None = None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast where `ray.init` would hang: nothing listening at the cluster's `host:port`."""
    host, _, port = address.rpartition(":")
    name = repr(given or address) + ("" if given in (None, address) else f" ({address})")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except ValueError:
        raise BadInput(f"address {name} is not of the form host:port") from None
    except OSError as err:
        raise NoClusterFound(f"no Ray cluster reachable at {name}: {err.strerror or err}") from None


def connect(address: str | None = None) -> bool:
    """Join a running cluster as `ray.init` does (token auth included); True when this call initialised Ray.

    `address`: None or "auto" (RAY_ADDRESS, else the local cluster), `host:port` or `ray://host:port`, passed to
    `ray.init` as given. Never starts a cluster. Raises BadInput naming the address when none can be joined.
    """
    import ray

    if ray.is_initialized():
        _same_cluster_as_joined(address)
        return False
    given = address or AUTO_ADDRESS
    if not given.startswith(CLIENT_PREFIX):
        located = locate(address)
        probe_address(located, address)
        if given != AUTO_ADDRESS:
            _token_for_an_address(located, given)
    try:
        ray.init(address=given, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as err:
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        hint = f" ({TOKEN_HINT})" if "token" in first_line.lower() or "auth" in first_line.lower() else ""
        raise BadInput(f"could not connect to the Ray cluster at {given!r}: {first_line}{hint}") from None
    return True


def _token_for_an_address(gcs_address: str, given: str) -> None:
    """An address given, RAY_AUTH_MODE unset: a token where Ray keeps one turns token authentication on (as Ray does
    for `auto`); with none, a cluster that refuses a call without a token is said now, in one line."""
    from nrlprof import rayapi

    if os.environ.get(AUTH_MODE_VARIABLE) is not None:
        return
    if rayapi.token_found():
        rayapi.enable_token_auth()
        return
    try:
        refused = rayapi.gcs_refuses_without_token(gcs_address, CONNECT_TIMEOUT_S)
    except Exception:  # no answer to tell: ray.init says what it finds
        return
    if refused:
        raise BadInput(f"could not connect to the Ray cluster at {given!r}: it refused a call without a token; "
                       f"{TOKEN_HINT}")  # fmt: skip


def _same_cluster_as_joined(address: str | None) -> None:
    """A process already on a cluster stays on it: an address that names another one is refused, not ignored."""
    import ray

    if address in (None, AUTO_ADDRESS) or address.startswith(CLIENT_PREFIX):
        return
    joined = ray.get_runtime_context().gcs_address
    if locate(address) != joined:
        raise BadInput(f"this process is already connected to the Ray cluster at {joined}; --address {address!r} "
                       "names another")  # fmt: skip


@contextlib.contextmanager
def connected(address: str | None = None) -> Iterator[None]:
    """Ray joined for the block; shut down afterwards only when this block joined it."""
    import ray

    initialised = connect(address)
    try:
        yield
    finally:
        if initialised:
            ray.shutdown()


# --------------------------------------------------------------------------- nodes


def node_dir_name(label: str) -> str:
    """A single, safe directory name for a node label (`..` or `/` can never leave the target dir)."""
    safe = file_safe(label)
    return safe if label.strip("._") and safe not in (".", "..") else "node"


def label_nodes(nodes: Iterable[tuple[str, str, str]]) -> list[NodeInfo]:
    """(node id, hostname, ip) -> NodeInfo with a directory label that is unique among `nodes`."""
    nodes = list(nodes)
    hosts = Counter(host for _, host, _ in nodes)
    host_ips = Counter((host, ip) for _, host, ip in nodes)
    infos = []
    for node_id, host, ip in nodes:
        if hosts[host] == 1:
            label = host
        elif host_ips[(host, ip)] == 1:
            label = f"{host}-{ip}"
        else:
            label = f"{host}-{ip}-{node_id[:8]}"
        infos.append(NodeInfo(node_id, host, ip, node_dir_name(label)))
    taken = Counter(info.label for info in infos)
    return [
        NodeInfo(i.node_id, i.hostname, i.ip, f"{i.label}-{i.node_id[:8]}") if taken[i.label] > 1 else i for i in infos
    ]


def alive_nodes() -> list[NodeInfo]:
    import ray

    rows = [n for n in ray.nodes() if n.get("Alive")]
    return label_nodes((n["NodeID"], n.get("NodeManagerHostname", ""), n.get("NodeManagerAddress", "")) for n in rows)


def cause_of(err: Exception) -> str:
    cause = getattr(err, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err).splitlines()[0]


def get_from_node(ref: Any, timeout_s: float, node: NodeInfo, what: str) -> Any:
    """`ray.get` of a task pinned to `node`: FileFailed when the task raised, NodeLost when the node went."""
    import ray

    try:
        return ray.get(ref, timeout=timeout_s)
    except ray.exceptions.RayTaskError as err:
        raise FileFailed(f"{what}: {cause_of(err)}") from None
    except ray.exceptions.GetTimeoutError:
        raise NodeLost(f"{node.describe()} did not answer within {timeout_s:.0f}s while {what}") from None
    except ray.exceptions.RayError as err:
        raise NodeLost(f"{node.describe()} died or left the cluster while {what}: {type(err).__name__}") from None


@dataclass
class NodeAnswer:
    """One node's answer to `run_on_nodes`: its value, or why there is none."""

    node: NodeInfo
    value: Any = None
    error: str | None = None


def run_on_nodes(
    function: Callable[..., Any],
    nodes: list[NodeInfo],
    args_for: Callable[[NodeInfo], tuple[Any, ...]],
    timeout_s: float,
    what: str,
) -> list[NodeAnswer]:
    """One task per node, all at once, each pinned to its node; a node that fails gets its error, not an exception."""
    import ray

    remote = ray.remote(max_retries=0)(function)
    refs = [remote.options(**pinned(n.node_id)).remote(*args_for(n)) for n in nodes]
    deadline = time.monotonic() + timeout_s
    answers = []
    for node, ref in zip(nodes, refs, strict=True):
        try:
            answers.append(NodeAnswer(node, get_from_node(ref, max(0.1, deadline - time.monotonic()), node, what)))
        except NodeLost as err:
            answers.append(NodeAnswer(node, error=str(err)))
        except FileFailed as err:
            answers.append(NodeAnswer(node, error=f"{node.describe()}: {err}"))
        else:
            continue
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
    return answers


def stream_from_node(
    function: Callable[..., Iterator[Any]],
    node: NodeInfo,
    args: tuple[Any, ...],
    timeout_s: float,
    what: str,
    ahead: int = 8,
) -> Iterator[Any]:
    """The values a streaming task pinned to `node` yields, as they come (at most `ahead` not yet taken).

    NodeLost when the node goes, or sends nothing for `timeout_s` (a task that works long sends heartbeats);
    FileFailed when the task raises. The task is cancelled when the caller stops early.
    """
    import ray

    remote = ray.remote(max_retries=0, num_returns="streaming")(function)
    options = {**pinned(node.node_id), "_generator_backpressure_num_objects": ahead}
    stream = remote.options(**options).remote(*args)
    finished = False
    try:
        while True:
            ready, _ = ray.wait([stream], timeout=timeout_s)
            if not ready:
                raise NodeLost(f"{node.describe()} sent nothing for {timeout_s:.0f}s while {what}")
            try:
                ref = next(stream)
            except StopIteration:
                finished = True
                return
            yield get_from_node(ref, timeout_s, node, what)
    finally:
        if not finished:  # a forced cancel would end the worker process, and the next task Ray gave it
            with contextlib.suppress(Exception):
                ray.cancel(stream)


def is_address(text: str) -> bool:
    """Whether `text` reads as a cluster address: `auto`, `ray://host:port` or `host:port` (a path does not)."""
    if text == AUTO_ADDRESS or text.startswith(CLIENT_PREFIX):
        return True
    host, colon, port = text.rpartition(":")
    return bool(colon and host and port.isdigit() and "/" not in host)
