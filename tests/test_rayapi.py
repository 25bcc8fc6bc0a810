"""nrlprof's one seam into Ray's private and internal API (nrlprof/rayapi.py): every name it uses is there in the
installed Ray, the Ray versions it was checked against are named, and no other module reaches past it (the plugin
fix, nrlprof/rayfix/, keeps its own)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import ray

from nrlprof import rayapi

PACKAGE = Path(rayapi.__file__).parent
# What only nrlprof/rayapi.py (and nrlprof/rayfix/) may write.
PRIVATE = re.compile(
    r"ray\._private|ray\._raylet|ray\._common|ray\.core\.generated|ray\.experimental|ray\.dag|internal_kv|"
    r"\._actor_id\b|__ray_metadata__|__ray_call__\.remote|_ray_actor_creation_function_descriptor|_global_node|"
    r"global_worker"
)
# (module, attribute path) for each private or internal name rayapi uses.
USED = [
    ("ray._private.worker", "global_worker"),
    ("ray._private.worker", "WORKER_MODE"),
    ("ray._private.worker", "_global_node"),
    ("ray._private.utils", "parse_runtime_env_for_task_or_actor"),
    ("ray._private.runtime_env.py_modules", "upload_py_modules_if_needed"),
    ("ray._private.runtime_env.setup_hook", "load_and_execute_setup_hook"),
    ("ray._private.function_manager", "FunctionActorManager._make_actor_method_executor"),
    ("ray._private.services", "canonicalize_bootstrap_address"),
    ("ray._private.services", "canonicalize_bootstrap_address_or_die"),
    ("ray._private.state", "state._connect_and_get_accessor"),
    ("ray._private.grpc_utils", "init_grpc_channel"),
    ("ray._raylet", "GcsClientOptions.create"),
    ("ray._raylet", "GlobalStateAccessor"),
    ("ray.core.generated.gcs_pb2", "TaskEvents"),
    ("ray.core.generated.gcs_pb2", "ActorTableData"),
    ("ray.core.generated.gcs_service_pb2", "GetTaskEventsRequest.Filters.JobIdFilter"),
    ("ray.core.generated.gcs_service_pb2_grpc", "TaskInfoGcsServiceStub"),
    ("ray.experimental.internal_kv", "_internal_kv_get"),
    ("ray.experimental.internal_kv", "_internal_kv_put"),
    ("ray.experimental.internal_kv", "_internal_kv_del"),
    ("ray.experimental.internal_kv", "_internal_kv_list"),
    ("ray.actor", "ActorClass._remote"),
    ("ray.actor", "ActorMethod._remote"),
    ("ray.dag.class_node", "ClassMethodNode.get_method_name"),
    ("ray.dag.class_node", "ClassMethodNode._get_actor_handle"),
    ("ray.dag.compiled_dag_node", "CompiledDAG.execute"),
]


def test_the_installed_ray_is_one_the_seam_was_checked_against():
    assert ray.__version__ in rayapi.CHECKED_WITH, (
        f"Ray {ray.__version__}: check nrlprof/rayapi.py against it (this test, then the suite), then add it to "
        "CHECKED_WITH"
    )


@pytest.mark.parametrize(("module", "path"), USED, ids=[f"{m}:{p}" for m, p in USED])
def test_every_private_name_the_seam_uses_is_there(module, path):
    found = importlib.import_module(module)
    for name in path.split("."):
        found = getattr(found, name)


def test_an_actor_class_has_the_call_the_seam_runs_functions_in_actors_with():
    class Plain:
        pass

    assert callable(rayapi.modified_class(ray.remote(Plain)).__ray_call__)


def code_of(line: str) -> str:
    """A line without its comment and the text of its string literals (names in messages are no use of Ray's)."""
    return re.sub(r"\"[^\"]*\"|'[^']*'", "''", line.split("#")[0])


def test_no_module_but_the_seam_and_the_plugin_fix_reaches_into_ray():
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "rayapi.py" and "rayfix" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(code_of(line)) and not line.lstrip().startswith(('"', "`"))
    ]
    assert wrong == []


def test_the_scan_sees_a_use_and_not_a_name_in_a_message():
    assert PRIVATE.search(code_of("node = ray._private.worker.global_worker.node  # the node"))
    assert not PRIVATE.search(code_of('patches.install(f"ray.dag.CompiledDAG.{name}", CompiledDAG)'))


def test_the_seam_imports_no_ray_until_a_function_is_called():
    import subprocess
    import sys

    loaded = subprocess.run([sys.executable, "-c", "import sys, nrlprof.rayapi; print('ray' in sys.modules)"],
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert loaded == "False"
    assert not rayapi.connected() or ray.is_initialized()
