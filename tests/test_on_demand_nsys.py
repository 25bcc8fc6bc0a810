"""nsys on demand on a real local Ray cluster with the nsys stand-in: workers launched under nsys at their start
(NRL_NSYS_PROFILE_STEP_RANGE=on-demand) capture nothing until a window is asked for; each window asked for is its own
report, finalised when it closes, while the worker runs on; nsys on a worker not launched under it is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import ray
from helpers.on_demand import ask
from nsys_standin.report import read_report

from nrlprof.config.requests import REFUSED, Request
from nrlprof.tools.capture import client

WORKER = "dtensor_policy_worker"


def session_dir(ray) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


class ArmedPolicy(NamedTuple):
    """A policy worker launched under nsys on demand, and the job's driver stepped to step 1."""

    nrlprof: Any
    policy: Any
    pid: int
    launch: dict
    job: str
    nsight: Path
    base: str  # its reports' name, before `.<window>.nsys-rep`

    def train(self, step: int) -> None:
        ray.get(self.policy.train.remote(step), timeout=300)


def armed_policy(ray_cluster, activate, calls) -> ArmedPolicy:
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="on-demand",
                       NRL_NSYS_EXTRA_OPTIONS='{"cuda-memory-usage": true}')  # fmt: skip
    policy = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(policy.pid.remote(), timeout=180)
    (launch,) = [r for r in calls() if r["pid"] == pid]
    nrlprof.step(1)
    job = ray_cluster.get_runtime_context().get_job_id()
    assert job in {card.job for card in client.armed_jobs()}, "armed once its first step returns, as its log line says"
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    return ArmedPolicy(nrlprof, policy, pid, launch, job, nsight, f"{WORKER}_on-demand_{pid}")


def test_a_worker_launched_under_nsys_on_demand_has_a_session_of_its_own_and_captures_nothing(
    ray_cluster, activate, calls
):
    armed = armed_policy(ray_cluster, activate, calls)
    options = armed.launch["options"]
    assert armed.launch["subcommand"] == "launch" and "-t" in options, "a session of its own, collecting nothing"
    assert len([o for o in options if o.startswith("--session-new=nrlprof-")]) == 1, "one session, named by nrlprof"
    assert not any("cuda-memory-usage" in o for o in options), "the collection's options go to nsys start"
    assert not list(armed.nsight.glob(armed.base + ".*")), "armed, nothing captured yet"


def test_nsys_asked_for_in_a_worker_not_launched_under_it_is_refused(ray_cluster, activate, calls):
    from workload import RewardWorker

    armed = armed_policy(ray_cluster, activate, calls)
    reward = RewardWorker.remote()
    refused, _ = ask(armed.nrlprof, armed.train, Request(armed.job, "nsys", ("*reward*",), 2), 2)
    assert refused.state == REFUSED and "reward_worker (rank 0) did not start under nsys" in refused.message
    assert "NRL_NSYS_PROFILE_STEP_RANGE=on-demand" in refused.message
    assert ray_cluster.get(reward.pid.remote()) > 0


def test_each_window_asked_for_is_its_own_report_written_when_it_closes(ray_cluster, activate, calls):
    armed = armed_policy(ray_cluster, activate, calls)
    first, step = ask(armed.nrlprof, armed.train, Request(armed.job, "nsys", ("*policy*",), 2), 2)
    second, step = ask(armed.nrlprof, armed.train, Request(armed.job, "nsys", ("*policy*",), 1), step)
    assert ray_cluster.get(armed.policy.pid.remote()) == armed.pid, "the reports were written while it kept running"
    reports = [f"{armed.base}.1.nsys-rep", f"{armed.base}.2.nsys-rep"]
    for reply, report, count in ((first, reports[0], 2), (second, reports[1], 1)):
        (record,) = [r.as_dict() for r in reply.records]
        steps = list(range(reply.first, reply.last + 1))
        assert len(steps) == count and record["steps"] == steps and record["status"] == "ok"
        assert record["files"] == [str(armed.nsight / report)] and record["asked"]
        ranges = sorted(r["message"] for r in read_report(armed.nsight / report)["nvtx_ranges"]
                        if r["domain"] == "nrlprof")  # fmt: skip
        assert [r for r in ranges if r.startswith("step ")] == [f"step {s}" for s in steps]
    manifests = (session_dir(ray_cluster) / "logs" / "nrlprof").glob("manifest-*.jsonl")
    asked = [json.loads(line) for m in manifests for line in m.read_text().splitlines() if '"nsys"' in line]
    request_ids = {reply.records[0].asked for reply in (first, second)}
    assert {r["asked"] for r in asked if r["pid"] == armed.pid} == request_ids


def test_a_window_asked_for_is_a_collection_the_worker_starts_in_its_session_with_the_jobs_options(
    ray_cluster, activate, calls, nrlprof_log
):
    armed = armed_policy(ray_cluster, activate, calls)
    (session,) = [o.partition("=")[2] for o in armed.launch["options"] if o.startswith("--session-new=nrlprof-")]
    ask(armed.nrlprof, armed.train, Request(armed.job, "nsys", ("*policy*",), 1), 2)
    starts = [r for r in calls() if r.get("subcommand") == "start"]
    assert [r["pid"] for r in starts] == [armed.pid], "one collection, started by the worker itself"
    (options,) = [r["options"] for r in starts]
    assert f"--session={session}" in options and "--cuda-memory-usage=true" in options
    assert options[options.index("-o") + 1] == str(armed.nsight / f"{armed.base}.1")
    started = [m for m in nrlprof_log if "nsys window" in m and "started in" in m]
    assert len(started) == 1 and not any("controller" in m for m in started), "the controller takes no part"
