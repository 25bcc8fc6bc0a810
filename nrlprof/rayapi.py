"""Every use of Ray's private and internal API, in one place (the plugin fix, nrlprof.rayfix, keeps its own).

Imports nothing at import time; each function imports what it needs of Ray when called. tests/test_rayapi.py checks
each against the installed Ray and names the versions it was checked against (CHECKED_WITH).
"""

from __future__ import annotations

import sys
from typing import Any

# The Ray versions this module's uses were checked against (tests/test_rayapi.py).
CHECKED_WITH = ("2.60.0",)
KV_NAMESPACE = "nrlprof"


def connected() -> bool:
    """Connected to Ray now: nrlprof calls Ray only then (a call after `ray.shutdown()` would start a new Ray)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _worker() -> Any:
    from ray._private import worker

    return worker


def in_worker_process() -> bool:
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    worker = _worker()
    return getattr(worker.global_worker, "mode", None) == worker.WORKER_MODE


def session_dir_and_node_ip() -> tuple[str | None, str]:
    if not connected():
        return None, ""
    try:
        node = _worker().global_worker.node
        return node.get_session_dir_path(), node.node_ip_address
    except Exception:
        return None, ""


def session_dir() -> str:
    return _worker().global_worker.node.get_session_dir_path()


def node_session_dir() -> str:
    return _worker()._global_node.get_session_dir_path()


def node_temp_dir() -> str:
    return _worker()._global_node.get_temp_dir_path()


def gcs_address_and_cluster_id() -> tuple[str, str]:
    node = _worker().global_worker.node
    return node.gcs_address, node.cluster_id.hex()


def actor_id(handle: Any) -> str | None:
    try:
        return handle._actor_id.hex()
    except AttributeError:
        return None


def actor_key(handle: Any) -> object:
    return getattr(handle, "_actor_id", None) or id(handle)


def call_in_actor(handle: Any, function: Any, *args: Any) -> Any:
    """Run `function(actor_instance, *args)` in the actor, in order with its other calls; its ObjectRef."""
    return handle.__ray_call__.remote(function, *args)


def modified_class(actor_class: Any) -> type | None:
    return getattr(getattr(actor_class, "__ray_metadata__", None), "modified_class", None)


def actor_class_name(actor_class: Any) -> str:
    meta = actor_class.__ray_metadata__
    modified = getattr(meta, "modified_class", None)
    if modified is not None:
        return modified.__name__
    return str(meta.class_name).rsplit(".", 1)[-1]


def creation_class_name(handle: Any) -> str | None:
    try:
        return handle._ray_actor_creation_function_descriptor.class_name.rsplit(".", 1)[-1]
    except AttributeError:
        return None


def parse_runtime_env(runtime_env: dict) -> Any:
    from ray._private.utils import parse_runtime_env_for_task_or_actor

    return parse_runtime_env_for_task_or_actor(runtime_env)


def upload_py_modules(package: dict, scratch_dir: str) -> dict:
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed

    return upload_py_modules_if_needed(package, include_gitignore=False, scratch_dir=scratch_dir)


def run_setup_hook(name: str) -> str | None:
    from ray._private.runtime_env.setup_hook import load_and_execute_setup_hook

    return load_and_execute_setup_hook(name)


def actor_creation() -> tuple[type, str]:
    from ray.actor import ActorClass

    return ActorClass, "_remote"


def method_call() -> tuple[type, str]:
    from ray.actor import ActorMethod

    return ActorMethod, "_remote"


def method_executor_factory() -> tuple[type, str]:
    from ray._private.function_manager import FunctionActorManager

    return FunctionActorManager, "_make_actor_method_executor"


def compiled_graph_class() -> type | None:
    try:
        from ray.dag.compiled_dag_node import CompiledDAG
    except ImportError:
        return None
    return CompiledDAG


def graph_method_calls(compiled: Any) -> list[tuple[Any, str]]:
    from ray.dag.class_node import ClassMethodNode

    calls = []
    for task in getattr(compiled, "idx_to_task", {}).values():
        node = task.dag_node
        if isinstance(node, ClassMethodNode):
            handle = node._get_actor_handle()
            if handle is not None:
                calls.append((handle, node.get_method_name()))
    return calls


def starts_own_cluster(address: str | None, temp_dir: str | None) -> bool:
    """`ray.init(address)` starts a local cluster, by Ray's own reading (anything unread: someone else's)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address, temp_dir) is None
    except Exception:
        return False


def bootstrap_address(address: str) -> str:
    from ray._private.services import canonicalize_bootstrap_address_or_die

    return canonicalize_bootstrap_address_or_die(address)


def alive_actor_rows() -> list:
    from ray._private.state import state
    from ray.core.generated import gcs_pb2

    table = state._connect_and_get_accessor().get_actor_table(None, "ALIVE")
    return [gcs_pb2.ActorTableData.FromString(raw) for raw in table]


def raw_task_events() -> list[bytes]:
    from ray._private.state import state

    return state._connect_and_get_accessor().get_task_events()


def gcs_state_accessor(gcs_address: str, cluster_id: str) -> Any:
    from ray._raylet import GcsClientOptions, GlobalStateAccessor

    options = GcsClientOptions.create(gcs_address, cluster_id, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False)
    accessor = GlobalStateAccessor(options)
    if not accessor.connect():
        raise RuntimeError(f"could not connect to the GCS at {gcs_address}")
    return accessor


def task_events_message() -> type:
    from ray.core.generated import gcs_pb2

    return gcs_pb2.TaskEvents


def job_task_events_query(channel: Any, job_id: bytes, limit: int) -> tuple[Any, Any]:
    """The GCS's task-info stub, and a request for at most `limit` task events of one job."""
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    filters = gcs_service_pb2.GetTaskEventsRequest.Filters
    job_filter = filters.JobIdFilter(job_id=job_id)  # predicate EQUAL, the enum's default
    request = gcs_service_pb2.GetTaskEventsRequest(limit=limit, filters=filters(job_filters=[job_filter]))
    return gcs_service_pb2_grpc.TaskInfoGcsServiceStub(channel), request


def gcs_channel(gcs_address: str) -> Any:
    from ray._private.grpc_utils import init_grpc_channel

    return init_grpc_channel(gcs_address)


def auth_environment() -> dict[str, str]:
    """RAY_AUTH_MODE and RAY_AUTH_TOKEN, where the cluster uses token authentication."""
    try:
        from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, get_authentication_mode
    except ImportError:
        return {}
    if get_authentication_mode() != AuthenticationMode.TOKEN:
        return {}
    token = AuthenticationTokenLoader.instance().get_raw_token()
    return {"RAY_AUTH_MODE": "token", **({"RAY_AUTH_TOKEN": token} if token else {})}


def token_found() -> bool:
    """A token is where Ray looks for one (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token), whatever the
    mode."""
    try:
        from ray._raylet import AuthenticationTokenLoader
    except ImportError:
        return False
    return AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)


def enable_token_auth() -> None:
    """Token authentication on for this process and those it starts, as `ray.init` does for a cluster it finds."""
    from ray._private.authentication.authentication_token_setup import _enable_token_auth

    _enable_token_auth()


def gcs_refuses_without_token(gcs_address: str, timeout_s: float) -> bool:
    """Whether the GCS at `gcs_address` answers a call with no token by refusing it (UNAUTHENTICATED)."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = grpc.insecure_channel(gcs_address)
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)
    except grpc.RpcError as err:
        return err.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()
    return False


def _kv() -> Any:
    from ray.experimental import internal_kv

    return internal_kv


def kv_get(key: str | bytes) -> bytes | None:
    return _kv()._internal_kv_get(key, namespace=KV_NAMESPACE)


def kv_put(key: str | bytes, value: str | bytes) -> None:
    _kv()._internal_kv_put(key, value, namespace=KV_NAMESPACE)


def kv_delete(key: str | bytes) -> None:
    _kv()._internal_kv_del(key, namespace=KV_NAMESPACE)


def kv_keys(prefix: str) -> list[bytes]:
    return _kv()._internal_kv_list(prefix, namespace=KV_NAMESPACE)
