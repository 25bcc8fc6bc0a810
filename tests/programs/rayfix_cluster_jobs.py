"""Drivers on a `ray start` cluster (`address="auto"`), each printing `RESULT <json>`:
`python rayfix_cluster_jobs.py <job> [<json>]`.

- `probes <specs>`: for each spec (`env`, `prefix`, `timeout`, and `children`), a Probe actor created with that
  runtime_env (given nrlprof's py_executable prefix when `prefix`): its pid and interpreter, or `HUNG`, and those of
  the children it creates (`prefixed` or `isolated`); and whether the agent has nrlprof's fix, asked twice.
- `shared_verdicts`: the driver's verdict on the nodes, and a worker's, which must come from Ray's KV.
- `two_nodes <places>`: NRL_NSYS_WORKER_PATTERNS set; a matched PolicyWorker on the node that has each custom
  resource in `places`, where it ran and with which interpreter; each node's verdict from a task pinned to it."""

from __future__ import annotations

import json
import os
import sys

import ray

from nrlprof.rayfix import cluster_fix


@ray.remote(num_cpus=0)
class Probe:
    def where(self) -> dict:
        return {"pid": os.getpid(), "executable": sys.executable}

    def child(self, mode: str) -> dict:
        env = cluster_fix.prefixed_runtime_env({"_nsight": {"t": "nvtx", "o": "child_%p"}}) if mode == "prefixed" else (
            cluster_fix.isolation_overrides())  # fmt: skip
        child = Probe.options(runtime_env=env).remote()
        return ray.get(child.where.remote()) | {"py_executable": env.get("py_executable")}


def probes(specs: list[dict]) -> dict:
    result = {"fixed": cluster_fix.agent_has_fix(), "fixed_again": cluster_fix.agent_has_fix(), "actors": []}
    for spec in specs:
        env = cluster_fix.prefixed_runtime_env(spec["env"]) if spec["prefix"] else spec["env"]
        actor = Probe.options(runtime_env=env).remote()
        try:
            answer = ray.get(actor.where.remote(), timeout=spec["timeout"])
        except ray.exceptions.GetTimeoutError:
            answer = "HUNG"
        if spec.get("children") and answer != "HUNG":
            children = [actor.child.remote(mode) for mode in spec["children"]]
            answer["children"] = ray.get(children, timeout=spec["timeout"])
        result["actors"].append({"answer": answer, "py_executable": env.get("py_executable")})
        ray.kill(actor)
    return result


@ray.remote(num_cpus=0)
class Nested:
    def verdicts(self) -> list:
        from nrlprof.rayfix import cluster_fix

        def judged_again(node_ids, package):
            raise AssertionError(f"judged again: {node_ids}")

        cluster_fix._judge = judged_again  # agent_has_fix gives None if this runs
        return [cluster_fix.agent_has_fix(), [v.reason for v in cluster_fix._verdicts.values()]]


def shared_verdicts() -> dict:
    driver = [cluster_fix.agent_has_fix(), [v.reason for v in cluster_fix._verdicts.values()]]
    return {"driver": driver, "nested": ray.get(Nested.remote().verdicts.remote())}


@ray.remote(num_cpus=0)
class PolicyWorker:
    def where(self) -> dict:
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "interpreter": os.environ.get(cluster_fix.INTERPRETER_VARIABLE)}  # fmt: skip


def two_nodes(places: list[str]) -> dict:
    from nrlprof.launch.runtime_env import package_fragment

    alive = [n for n in ray.nodes() if n["Alive"]]
    nodes = {p: next(n["NodeID"] for n in alive if p in n["Resources"]) for p in places}
    ips = {p: next(n["NodeManagerAddress"] for n in alive if p in n["Resources"]) for p in places}
    result = {"nodes": nodes, "ips": ips, "actors": {}}
    for place in places:
        actor = PolicyWorker.options(resources={place: 1}).remote()
        try:
            result["actors"][place] = ray.get(actor.where.remote(), timeout=300)
        except ray.exceptions.GetTimeoutError:
            result["actors"][place] = "HUNG"
    result["fixed"] = cluster_fix.agent_has_fix()
    # The route for nodes whose raylet is on another machine: a task pinned to each.
    judged = cluster_fix.judge_on_nodes(list(nodes.values()), package_fragment())
    result["pinned_checks"] = {p: [judged[i].fixed, judged[i].reason] for p, i in nodes.items()}
    return result


if __name__ == "__main__":
    job, arguments = {"probes": probes, "shared_verdicts": shared_verdicts, "two_nodes": two_nodes}[sys.argv[1]], (
        [json.loads(sys.argv[2])] if len(sys.argv) > 2 else [])  # fmt: skip
    ray.init(address="auto", log_to_driver=False, logging_level="ERROR")
    print("RESULT " + json.dumps(job(*arguments)))
