"""A driver joining a `ray start` cluster started without nrlprof's fix: detected, and profiled through py_executable.

Also a two-node cluster whose head has the fix and whose second node has not: every alive node is judged, and a
matched actor starts profiled on either node. The clusters run with no `python` on their PATH and the stand-in
tools, on free ports with their own temp dir and token; only their own processes are stopped.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.clusters import RAY, free_ports, hook_env, ray_start_cluster

from nrlprof.rayfix.names import HOOK_CLASS_PATH

JOBS = Path(__file__).parent / "programs" / "rayfix_cluster_jobs.py"


def join_node(cluster: dict, with_hook: bool, resources: str) -> None:
    """A second node on this machine, joined with `ray start --address`; stopped with the cluster (same temp dir)."""
    agent, metrics = free_ports(2)
    start = [RAY, "start", f"--address={cluster['address']}", f"--temp-dir={cluster['base']}/ray", "--num-cpus=1",
             f"--resources={resources}", f"--dashboard-agent-listen-port={agent}",
             f"--metrics-export-port={metrics}", "--disable-usage-stats"]  # fmt: skip
    env = {**cluster["env"], "RAY_AUTH_MODE": "token", **hook_env(with_hook)}
    done = subprocess.run(start, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


def drive(cluster: dict, specs: list | None, job: str = "probes", env: dict | None = None) -> dict:
    """tests/programs/rayfix_cluster_jobs.py's `job` on `cluster`, given `specs`: what it printed as RESULT."""
    done = subprocess.run(
        [sys.executable, str(JOBS), job, *([] if specs is None else [json.dumps(specs)])],
        env={**cluster["env"], **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cluster["calls"],
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT ") :]) | {"stderr": done.stderr}


def nsys_record(cluster: dict, pid: int) -> dict:
    records = [json.loads(p.read_text()) for p in (cluster["calls"] / "calls").glob("nsys-*.json")]
    matching = [r for r in records if r["pid"] == pid]
    assert len(matching) == 1, records
    return matching[0]


def rocprof_record(cluster: dict, pid: int) -> dict:
    records = [json.loads(p.read_text()) for p in (cluster["calls"] / "calls").glob("rocprof-sys-python-*.json")]
    matching = [r for r in records if r["pid"] == pid]
    assert len(matching) == 1, records
    return matching[0]


def option(record: dict, name: str) -> str:
    options = record["options"]
    return options[options.index(name) + 1]


@pytest.fixture(scope="module")
def unfixed_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    with ray_start_cluster(tmp_path_factory.mktemp("unfixed"), with_hook=False) as cluster:
        yield cluster


def test_cluster_without_the_fix_is_detected_and_profiled_through_py_executable(unfixed_cluster: dict) -> None:
    hostile = "it's a $(touch pwned) name_%p"
    specs = [
        # Control: Ray's own plugin runs `nsys ... python` and there is no `python` on the workers' PATH. nsys says
        # so at once (below); Ray then waits for the worker for ever, so a short wait shows it.
        {"env": {"_nsight": {"t": "cuda"}}, "prefix": False, "timeout": 8},
        {"env": {"_nsight": {"t": "cuda,nvtx", "o": "policy_%p"}}, "prefix": True, "timeout": 300},
        {"env": {"_nsight": {"t": "cuda", "o": hostile}, "py_executable": sys.executable}, "prefix": True,
         "timeout": 300},
        {"env": {"_rocprof_sys": "default"}, "prefix": True, "timeout": 300},
    ]  # fmt: skip
    cluster = unfixed_cluster
    result = drive(cluster, specs)
    nsight_dir = cluster["session"] / "logs" / "nsight"

    assert result["fixed"] is False and result["fixed_again"] is False
    control, default_python, own_python, rocprof = result["actors"]
    assert control["answer"] == "HUNG"
    assert "nsys stand-in: cannot launch 'python'" in (cluster["session"] / "logs" / "raylet.err").read_text()

    record = nsys_record(cluster, default_python["answer"]["pid"])
    assert default_python["answer"]["executable"] == sys.executable
    assert record["command"][0] == sys.executable
    assert record["command"][1].endswith("default_worker.py")
    assert option(record, "-t") == "cuda,nvtx"
    assert option(record, "-o") == str(nsight_dir / "policy_%p")

    record = nsys_record(cluster, own_python["answer"]["pid"])
    assert record["command"][0] == sys.executable
    assert option(record, "-o") == str(nsight_dir / hostile)
    assert not (cluster["calls"] / "pwned").exists() and not (nsight_dir / "pwned").exists()

    record = rocprof_record(cluster, rocprof["answer"]["pid"])
    assert record["options"] == ["-F", "true"]
    assert record["command"][0].endswith("default_worker.py")
    assert record["env"]["PYTHON_EXECUTABLE"] == sys.executable
    assert record["env"]["ROCPROFSYS_OUTPUT_PATH"] == str(cluster["session"] / "logs" / "rocprof_sys")
    assert record["env"]["ROCPROFSYS_OUTPUT_PREFIX"] == "worker_process_%p"


def test_a_worker_takes_the_verdicts_the_driver_shared(unfixed_cluster: dict) -> None:
    """Nodes are judged once for the cluster: a worker creating matched actors reads the verdicts from Ray's KV."""
    result = drive(unfixed_cluster, None, "shared_verdicts")
    (driver_fixed, driver_reasons), (nested_fixed, nested_reasons) = result["driver"], result["nested"]
    assert driver_fixed is False and nested_fixed is False
    [reason] = nested_reasons
    assert reason.startswith(driver_reasons[0].split(" (judged by pid")[0]) and "(judged by pid " in reason


def test_cluster_with_the_agent_hook_is_detected_as_fixed(ray_start_head: dict) -> None:
    specs = [{"env": {"_nsight": {"t": "cuda", "o": "plain_%p"}}, "prefix": False, "timeout": 300}]
    result = drive(ray_start_head, specs)
    assert result["fixed"] is True
    [plain] = result["actors"]
    record = nsys_record(ray_start_head, plain["answer"]["pid"])
    assert record["command"][0] == sys.executable
    assert option(record, "-o") == str(ray_start_head["session"] / "logs" / "nsight" / "plain_%p")


def test_prefixed_worker_without_the_tool_starts_unprofiled(unfixed_cluster: dict) -> None:
    nsys = unfixed_cluster["calls"] / "bin" / "nsys"
    hidden = nsys.with_name("nsys.hidden")
    nsys.rename(hidden)
    try:
        result = drive(unfixed_cluster, [{"env": {"_nsight": {"t": "cuda"}}, "prefix": True, "timeout": 300}])
    finally:
        hidden.rename(nsys)
    [actor] = result["actors"]
    pid = actor["answer"]["pid"]
    assert actor["answer"]["executable"] == sys.executable
    records = [json.loads(p.read_text()) for p in (unfixed_cluster["calls"] / "calls").glob("nsys-*.json")]
    assert pid not in [r["pid"] for r in records]
    # The launcher writes before the worker redirects its output: the setup process shares the raylet's stderr.
    raylet_err = (unfixed_cluster["session"] / "logs" / "raylet.err").read_text(errors="replace")
    assert f"worker pid {pid} runs without profiling: nsys is not on PATH" in raylet_err


def test_children_of_a_prefixed_worker_get_one_prefix_or_none(unfixed_cluster: dict) -> None:
    """Ray merges the parent's py_executable into a child's: a profiled child is not wrapped twice, an opted-out
    child runs the plain interpreter."""
    spec = {"env": {"_nsight": {"t": "cuda", "o": "parent_%p"}}, "prefix": True, "timeout": 300}
    [parent] = drive(unfixed_cluster, [{**spec, "children": ["prefixed", "isolated"]}])["actors"]
    profiled, isolated = parent["answer"]["children"]
    nsight_dir = unfixed_cluster["session"] / "logs" / "nsight"

    record = nsys_record(unfixed_cluster, profiled["pid"])
    assert record["command"][0] == sys.executable
    assert option(record, "-o") == str(nsight_dir / "child_%p")
    assert option(record, "-t") == "nvtx"

    assert isolated["executable"] == sys.executable
    assert "nsys" not in shlex.split(isolated["py_executable"])[2]
    records = [json.loads(p.read_text()) for p in (unfixed_cluster["calls"] / "calls").glob("nsys-*.json")]
    assert isolated["pid"] not in [r["pid"] for r in records]


@pytest.mark.fresh_cluster  # two nodes, one fixed and one not: the cluster is the subject
def test_fixed_head_with_an_unfixed_node_profiles_matched_actors_on_both(tmp_path: Path) -> None:
    """Head started with the agent hook, a second node joined without it: the driver judges every alive node, and
    a matched actor placed on either node starts under nsys (through py_executable), not hanging in Ray's plugin."""
    with ray_start_cluster(tmp_path, with_hook=True, num_cpus=1, resources='{"fixed_node": 1}') as cluster:
        join_node(cluster, with_hook=False, resources='{"unfixed_node": 1}')
        env = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "2"}
        result = drive(cluster, ["unfixed_node", "fixed_node"], "two_nodes", env)

        nodes, nsight_dir = result["nodes"], cluster["session"] / "logs" / "nsight"
        assert nodes["fixed_node"] != nodes["unfixed_node"]
        for place in ("unfixed_node", "fixed_node"):
            actor = result["actors"][place]
            assert actor != "HUNG", place
            assert actor["node"] == nodes[place]
            assert actor["interpreter"] == ""  # started through nrlprof's py_executable prefix, default Python
            record = nsys_record(cluster, actor["pid"])
            assert record["command"][0] == sys.executable
            assert record["command"][1].endswith("default_worker.py")
            assert option(record, "-o").startswith(str(nsight_dir) + "/")
        assert result["fixed"] is False
        assert result["pinned_checks"]["fixed_node"][0] is True
        assert HOOK_CLASS_PATH in result["pinned_checks"]["fixed_node"][1]
        assert result["pinned_checks"]["unfixed_node"][0] is False

        warnings = [line for line in result["stderr"].splitlines() if "unfixed profiler plugins" in line]
        assert len(warnings) == 1, result["stderr"][-4000:]  # judged once, though two actors were created
        unfixed = f"node {nodes['unfixed_node']} ({result['ips']['unfixed_node']})"
        assert unfixed in warnings[0] and nodes["fixed_node"] not in warnings[0]
        assert "`nrlprof patch-ray`" in warnings[0] and "before `ray start`" in warnings[0]
