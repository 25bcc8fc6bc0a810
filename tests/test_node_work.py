"""How the tools' tasks work on a node (tools.remote.node_work), without Ray: priority, heartbeats, cancel."""

from __future__ import annotations

import os
import threading
import time

import pytest

from nrlprof.tools.remote.node_work import NICE, Stopped, relay


def test_the_work_runs_at_low_priority_with_heartbeats_and_its_messages_in_order():
    def work(tally):
        for index in range(3):
            tally.send({"piece": index})
        time.sleep(0.35)
        tally.files, tally.bytes = 1, 10
        return os.getpriority(os.PRIO_PROCESS, 0)

    values = list(relay(work, heartbeat_s=0.1))
    assert [v["piece"] for v in values if "piece" in v] == [0, 1, 2]
    assert sum(set(v) == {"files", "bytes"} for v in values) >= 2  # heartbeats while it slept
    last = values[-1]
    assert last["result"] >= NICE and last["nice"] == last["result"] and last["pid"] == os.getpid()
    assert (last["files"], last["bytes"]) == (1, 10)


def test_an_error_of_the_work_is_raised_by_the_task():
    def work(tally):
        raise ValueError("bad trace")

    with pytest.raises(ValueError, match="bad trace"):
        list(relay(work))


def test_a_cancelled_task_stops_its_work():
    ended = threading.Event()

    def work(tally):
        try:
            for index in range(1000):
                tally.send({"piece": index})
                tally.tick(index)
        except Stopped:
            ended.set()
            raise

    stream = relay(work, heartbeat_s=0.1)
    assert next(stream) == {"piece": 0}
    stream.close()  # what a cancel does to the generator
    assert ended.wait(5)
