"""Ray's task events as they reach the GCS, in two halves (the caller's and the worker's), at any distance apart.

The messages are Ray's own protobufs (`gcs_pb2.TaskEvents`), laid out as Ray's owner and worker send them.
"""

from __future__ import annotations

import json
import time

import pytest
from ray.core.generated import gcs_pb2

from nrlprof.anatomy.events import (
    ACTOR_TASK,
    FAILED,
    FINISHED,
    PROFILE_GRACE_S,
    RUNNING,
    SUBMITTED_TO_WORKER,
    TaskEventReader,
)
from nrlprof.anatomy.pump import TaskEventPump

JOB = bytes.fromhex("0a000000")
ACTOR = bytes(12) + JOB
TASK = bytes.fromhex("0102030405060708") + ACTOR
NODE = bytes(range(28))
DRIVER_TASK = b"\xff" * 20 + JOB
SUBMITTED, RUN, BODY, BODY_END, END, SEEN_END = 1_000, 1_200, 1_300, 9_300, 9_400, 9_700


def owner_half(finished: bool = True, failed: bool = False) -> gcs_pb2.TaskEvents:
    """What the caller sends: the task info, the submission and, once it has the result, the end."""
    event = gcs_pb2.TaskEvents(task_id=TASK, job_id=JOB)
    event.task_info.type = ACTOR_TASK
    event.task_info.func_or_class_name = "Policy.train"
    event.task_info.actor_id = ACTOR
    event.task_info.parent_task_id = DRIVER_TASK
    event.state_updates.state_ts_ns[SUBMITTED_TO_WORKER] = SUBMITTED
    if finished:
        event.state_updates.state_ts_ns[FINISHED] = SEEN_END
    if failed:
        event.state_updates.state_ts_ns[FAILED] = SEEN_END
    return event


def worker_half() -> gcs_pb2.TaskEvents:
    """What the worker that ran it sends: its node and pid, RUNNING, and its spans."""
    event = gcs_pb2.TaskEvents(task_id=TASK, job_id=JOB)
    event.state_updates.node_id = NODE
    event.state_updates.worker_pid = 4242
    event.state_updates.state_ts_ns[RUNNING] = RUN
    whole = event.profile_events.events.add()
    whole.event_name, whole.start_time, whole.end_time = "task::Policy.train", RUN, END
    body = event.profile_events.events.add()
    body.event_name, body.start_time, body.end_time = "task:execute", BODY, BODY_END
    return event


def both_halves() -> gcs_pb2.TaskEvents:
    event = owner_half()
    event.MergeFrom(worker_half())
    return event


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_worker_half_later_than_three_quick_reads_still_gives_the_workers_span(clock):
    """The job's last reads come twice a second; a worker's events may reach the GCS 2 s after its caller's."""
    reader = TaskEventReader(JOB, clock=clock)
    for _ in range(4):
        assert reader.read([owner_half().SerializeToString()]) == []
        assert reader.pending == 1
        clock.now += 0.5
    [record] = reader.read([both_halves().SerializeToString()])
    assert (record["start_ns"], record["end_ns"]) == (BODY, BODY_END)
    assert (record["node_id"], record["pid"], record["method"]) == (NODE.hex(), 4242, "train")
    assert "timed_by" not in record
    assert reader.owner_timed == 0


def test_a_finished_call_whose_worker_half_never_comes_is_kept_timed_by_its_caller(clock):
    reader = TaskEventReader(JOB, clock=clock)
    assert reader.read([owner_half().SerializeToString()]) == []
    clock.now += PROFILE_GRACE_S / 2
    assert reader.read([owner_half().SerializeToString()]) == []
    clock.now += PROFILE_GRACE_S / 2
    [record] = reader.read([owner_half().SerializeToString()])
    assert (record["start_ns"], record["end_ns"], record["timed_by"]) == (SUBMITTED, SEEN_END, "owner")
    assert record["node_id"] == ""  # so the tools keep it on the caller's clock, moved by no node's offset
    assert reader.owner_timed == 1 and reader.pending == 0


def test_the_final_read_keeps_a_finished_call_it_has_waited_for_only_once(clock):
    reader = TaskEventReader(JOB, clock=clock)
    [record] = reader.read([owner_half().SerializeToString()], final=True)
    assert record["timed_by"] == "owner"


def test_a_call_that_failed_before_any_worker_ran_it_is_no_call(clock):
    reader = TaskEventReader(JOB, clock=clock)
    assert reader.read([owner_half(finished=False, failed=True).SerializeToString()]) == []
    clock.now += PROFILE_GRACE_S
    assert reader.read([owner_half(finished=False, failed=True).SerializeToString()]) == []
    assert reader.pending == 0 and reader.owner_timed == 0


def test_a_worker_half_first_is_completed_by_its_callers_half(clock):
    reader = TaskEventReader(JOB, clock=clock)
    assert reader.read([worker_half().SerializeToString()]) == []
    clock.now += 1.0
    [record] = reader.read([both_halves().SerializeToString()])
    assert (record["class"], record["method"]) == ("Policy", "train")
    assert "parent_task_id" not in record, "the driver's own task is the parent a line leaves out"
    assert "task_id" not in record and "failed" not in record


def test_a_call_the_gcs_let_go_of_is_no_longer_waited_for(clock):
    reader = TaskEventReader(JOB, clock=clock)
    reader.read([owner_half().SerializeToString()])
    assert reader.waiting
    reader.read([])
    assert not reader.waiting and reader.pending == 0


def test_the_last_reads_go_on_while_a_call_waits_for_its_worker_half(tmp_path):
    """The pump's final reads (every 0.5 s) wait for a worker's events that come 2 s after the caller's."""
    began = time.monotonic()

    def fetch() -> list[bytes]:
        late = time.monotonic() - began >= 2.0
        return [(both_halves() if late else owner_half()).SerializeToString()]

    pump = TaskEventPump(JOB, tmp_path, capacity=1000, fetch=fetch)
    pump.final_reads()
    [line] = (tmp_path / "tasks.jsonl").read_text().splitlines()
    assert f'"start_ns":{BODY}' in line.replace(" ", "") and "timed_by" not in line


def finished_call(index: int) -> bytes:
    """A whole finished call of its own task id."""
    event = both_halves()
    event.task_id = index.to_bytes(8, "big") + ACTOR
    return event.SerializeToString()


def test_a_read_that_finds_the_gcs_full_of_calls_it_never_saw_writes_a_gap(tmp_path):
    held: list[bytes] = []
    pump = TaskEventPump(JOB, tmp_path, capacity=4, fetch=lambda: held)
    held[:] = [finished_call(i) for i in range(1, 4)]  # not full: nothing could have been let go
    pump.read()
    held[:] = [finished_call(i) for i in range(3, 7)]  # full, and call 3 (read before) still held
    pump.read()
    assert not (tmp_path / "gaps.jsonl").exists() and pump.gaps == 0
    held[:] = [finished_call(i) for i in range(20, 24)]  # full of calls it never saw: 7-19 may be lost
    before = time.time_ns()
    pump.read()
    [gap] = [json.loads(line) for line in (tmp_path / "gaps.jsonl").read_text().splitlines()]
    assert pump.gaps == 1 and gap["held"] == 4 and 0 < gap["since_ns"] <= before <= gap["at_ns"]
    assert len((tmp_path / "tasks.jsonl").read_text().splitlines()) == 10


def test_a_first_read_that_finds_the_gcs_full_may_have_come_too_late(tmp_path):
    pump = TaskEventPump(JOB, tmp_path, capacity=2, fetch=lambda: [finished_call(1), finished_call(2)])
    pump.read()
    [gap] = [json.loads(line) for line in (tmp_path / "gaps.jsonl").read_text().splitlines()]
    assert gap["since_ns"] == 0  # since the job's start


def other_jobs_call(index: int) -> bytes:
    event = gcs_pb2.TaskEvents.FromString(finished_call(index))
    event.task_id = event.task_id[:-4] + bytes.fromhex("0b000000")
    event.job_id = bytes.fromhex("0b000000")
    return event.SerializeToString()


def test_calls_the_gcs_let_go_before_a_read_are_counted_exactly_once(tmp_path):
    """The GCS's count of the job's tasks (held + let go) against the tasks the reads saw: the difference is lost."""
    held: list[bytes] = []
    made = [0]
    pump = TaskEventPump(JOB, tmp_path, capacity=4, fetch=lambda: held, count_tasks=lambda: made[0])
    held[:], made[0] = [finished_call(i) for i in range(1, 4)] + [other_jobs_call(1)], 3
    pump.read()
    held[:], made[0] = [finished_call(i) for i in range(3, 7)], 6  # 4-6 new, nothing let go unseen
    pump.read()
    assert (pump.lost, pump.counted, pump.reader.tasks_seen) == (0, True, 6)
    assert not (tmp_path / "gaps.jsonl").exists()
    held[:], made[0] = [finished_call(i) for i in range(20, 24)], 23  # 7-19 came and went between two reads
    before = time.time_ns()
    pump.read()
    pump.read()  # the same holdings: nothing more lost, no second line
    [gap] = [json.loads(line) for line in (tmp_path / "gaps.jsonl").read_text().splitlines()]
    assert gap["lost"] == 13 and pump.lost == 13 and pump.gaps == 1
    assert 0 < gap["since_ns"] <= before <= gap["at_ns"]
    held[:], made[0] = [finished_call(i) for i in range(30, 34)], 33  # 24-29 lost too
    pump.read()
    assert [json.loads(line)["lost"] for line in (tmp_path / "gaps.jsonl").read_text().splitlines()] == [13, 6]
    assert pump.lost == 19 and len((tmp_path / "tasks.jsonl").read_text().splitlines()) == 33 - 19


def test_a_count_made_before_a_read_never_counts_as_lost_what_arrived_after_it(tmp_path):
    """Tasks that reach the GCS between its count and the fetch are seen, not lost, and not lost later either."""
    held = [finished_call(i) for i in range(1, 5)]
    counts = iter([2, 4])  # asked before the fetch: two of the four had not yet arrived
    pump = TaskEventPump(JOB, tmp_path, capacity=100, fetch=lambda: held, count_tasks=lambda: next(counts))
    pump.read()
    pump.read()
    assert pump.lost == 0 and not (tmp_path / "gaps.jsonl").exists()


def test_a_gcs_that_cannot_count_leaves_the_reads_to_say_calls_may_be_lost(tmp_path):
    calls = []

    def refuse() -> int:
        calls.append(1)
        raise RuntimeError("the GCS refused the task-event count")

    held = [finished_call(1), finished_call(2)]
    pump = TaskEventPump(JOB, tmp_path, capacity=2, fetch=lambda: held, count_tasks=refuse)
    pump.read()
    pump.read()
    assert len(calls) == 1 and pump.count_tasks is None and not pump.counted  # asked once: a read must not wait
    [gap] = [json.loads(line) for line in (tmp_path / "gaps.jsonl").read_text().splitlines()]
    assert "lost" not in gap and pump.gaps == 1
