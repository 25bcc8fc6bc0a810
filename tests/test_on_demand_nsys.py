"""nsys on demand on a real local Ray cluster with the nsys stand-in: workers launched under nsys at their start
(NRL_NSYS_PROFILE_STEP_RANGE=on-demand) capture nothing until a window is asked for; each window asked for is its own
report, finalised when it closes, while the worker runs on; nsys on a worker not launched under it is refused."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.on_demand import ask
from nsys_standin.report import read_report

from nrlprof.config.requests import REFUSED, Request

WORKER = "dtensor_policy_worker"


def session_dir(ray) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


def test_each_window_asked_for_is_its_own_report_written_when_it_closes(ray_cluster, activate, calls, nrlprof_log):
    from workload import DTensorPolicyWorker, RewardWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="on-demand",
                       NRL_NSYS_EXTRA_OPTIONS='{"cuda-memory-usage": true}')  # fmt: skip
    policy, reward = DTensorPolicyWorker.remote(), RewardWorker.remote()
    pid = ray_cluster.get(policy.pid.remote(), timeout=180)
    (launch,) = [r for r in calls() if r["pid"] == pid]
    assert launch["subcommand"] == "launch" and "-t" in launch["options"], "a session of its own, collecting nothing"
    (session,) = [o.partition("=")[2] for o in launch["options"] if o.startswith("--session-new=nrlprof-")]
    assert not any("cuda-memory-usage" in o for o in launch["options"]), "the collection's options go to nsys start"
    nrlprof.step(1)
    job = ray_cluster.get_runtime_context().get_job_id()
    nsight = session_dir(ray_cluster) / "logs" / "nsight"
    base = f"{WORKER}_on-demand_{pid}"
    assert not list(nsight.glob(base + ".*")), "armed, nothing captured yet"

    def train(step: int) -> None:
        ray_cluster.get(policy.train.remote(step), timeout=300)

    refused, step = ask(nrlprof, train, Request(job, "nsys", ("*reward*",), 2), 2)
    assert refused.state == REFUSED and "reward_worker (rank 0) did not start under nsys" in refused.message
    assert "NRL_NSYS_PROFILE_STEP_RANGE=on-demand" in refused.message

    first, step = ask(nrlprof, train, Request(job, "nsys", ("*policy*",), 2), step)
    second, step = ask(nrlprof, train, Request(job, "nsys", ("*policy*",), 1), step)
    assert ray_cluster.get(policy.pid.remote()) == pid, "the reports were written while the worker kept running"
    assert ray_cluster.get(reward.pid.remote()) > 0
    reports = [f"{base}.1.nsys-rep", f"{base}.2.nsys-rep"]
    for reply, report, count in ((first, reports[0], 2), (second, reports[1], 1)):
        (record,) = [r.as_dict() for r in reply.records]
        steps = list(range(reply.first, reply.last + 1))
        assert len(steps) == count and record["steps"] == steps and record["status"] == "ok"
        assert record["files"] == [str(nsight / report)] and record["asked"]
        ranges = sorted(r["message"] for r in read_report(nsight / report)["nvtx_ranges"] if r["domain"] == "nrlprof")
        assert [r for r in ranges if r.startswith("step ")] == [f"step {s}" for s in steps]
    manifests = (session_dir(ray_cluster) / "logs" / "nrlprof").glob("manifest-*.jsonl")
    asked = [json.loads(line) for m in manifests for line in m.read_text().splitlines() if '"nsys"' in line]
    request_ids = {reply.records[0].asked for reply in (first, second)}
    assert {r["asked"] for r in asked if r["pid"] == pid} == request_ids
    starts = [r for r in calls() if r.get("subcommand") == "start"]
    assert [r["pid"] for r in starts] == [pid, pid], "one collection started by the worker itself per window"
    assert all(f"--session={session}" in r["options"] and "--cuda-memory-usage=true" in r["options"] for r in starts)
    assert [r["options"][r["options"].index("-o") + 1] for r in starts] == [str(nsight / f"{base}.{k}") for k in (1, 2)]
    started = [m for m in nrlprof_log if "nsys window" in m and "started in" in m]
    assert len(started) == 2 and not any("controller" in m for m in started), "the controller takes no part"
