"""Simulate the step anatomy's reader on a large, long job: 1,000 workers x 5,000 steps, 3 calls a step each.

    python bench/bench_anatomy_scale.py                           # 1,000 workers, 5,000 steps
    python bench/bench_anatomy_scale.py --workers 100 --steps 500 # a quick look

No Ray cluster: the GCS is stood in for by what the reader sees of it, a buffer of serialized `TaskEvents` (Ray's
own protobuf messages, one per finished actor call, both halves of its events merged, as the GCS merges them) that
keeps the last `--capacity` (Ray's `RAY_task_events_max_num_task_in_gcs`, 100,000 by default) and lets the oldest go
first. Each simulated step of `--step-s` seconds adds workers x calls messages; the reader's pump reads the buffer
when its own schedule says (a quarter of the capacity arrived since its last read, on the simulated clock) and turns
it into records, as in a job. The records are serialized as the reader writes them to `tasks.jsonl`, and counted
rather than written (at this size the file itself is a figure: its bytes are printed).

First, one read of a full GCS both ways Ray offers them: every job's events as serialized messages (the reader's
way, `GlobalStateAccessor.get_task_events()`), against the job's alone in one gRPC reply (the GCS's
`GetTaskEvents` with a job filter, as Ray's state API asks), parsed and keyed.  Ray offers no time filter.

Printed: the reader's CPU per simulated step (its reads, measured with thread CPU time) in blocks of steps, so a
cost that grows with the job shows (target: flat within 20% from step 100 to the last); the reads made; the
reader's memory (what its sets hold, and the peak RSS of this process against one before the job); how many calls
the GCS let go before a read saw them, and how many the reader counted (the stand-in answers its count as the GCS
does: the tasks it had, held or let go); and the size `tasks.jsonl` reaches.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

JOB = bytes.fromhex("0a000000")
NODE = bytes(range(28))
METHODS = ("generate", "compute_logprobs", "train")


def call_template(worker: int, method: str) -> tuple[bytes, bytes]:
    """(the bytes before the task id, after it) of one finished call's merged events; the id goes between."""
    from ray.core.generated import gcs_pb2

    from nrlprof.anatomy.events import ACTOR_TASK, FINISHED, RUNNING, SUBMITTED_TO_WORKER, TASK_ID_BYTES

    actor = worker.to_bytes(12, "big") + JOB
    placeholder = b"\xee" * TASK_ID_BYTES
    event = gcs_pb2.TaskEvents(task_id=placeholder, job_id=JOB)
    event.task_info.type = ACTOR_TASK
    event.task_info.func_or_class_name = f"PolicyWorker.{method}"
    event.task_info.actor_id = actor
    event.task_info.parent_task_id = b"\xff" * 20 + JOB
    states = event.state_updates.state_ts_ns
    states[SUBMITTED_TO_WORKER], states[RUNNING], states[FINISHED] = 1_000, 1_200, 9_700
    event.state_updates.node_id = NODE
    event.state_updates.worker_pid = 10_000 + worker
    whole = event.profile_events.events.add()
    whole.event_name, whole.start_time, whole.end_time = f"task::PolicyWorker.{method}", 1_200, 9_400
    body = event.profile_events.events.add()
    body.event_name, body.start_time, body.end_time = "task:execute", 1_300, 9_300
    raw = event.SerializeToString()
    at = raw.index(placeholder)
    return raw[:at], raw[at + TASK_ID_BYTES :]


class SimulatedClock:
    """`time` as the pump reads it: perf_counter from the simulation, the rest from the real module."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


def compare_full_reads(templates: list[tuple[bytes, bytes]], capacity: int, repeat: int = 3) -> None:
    """One read of a full GCS both ways Ray offers: every job's events as serialized messages (what the reader
    uses), or the job's alone in one `GetTaskEventsReply` (gRPC, job filter), parsed and keyed by task id."""
    from ray.core.generated import gcs_pb2, gcs_service_pb2

    from nrlprof.anatomy.events import TASK_ID_BYTES, task_key

    raws = [head + n.to_bytes(TASK_ID_BYTES - len(JOB), "big") + JOB + tail
            for n, (head, tail) in zip(range(capacity), itertools.cycle(templates))]  # fmt: skip
    reply = gcs_service_pb2.GetTaskEventsReply()
    reply.events_by_task.extend(gcs_pb2.TaskEvents.FromString(raw) for raw in raws)
    wire = reply.SerializeToString()
    messages_s = reply_s = float("inf")
    for _ in range(repeat):
        cpu = time.thread_time()
        {task_key(raw) for raw in raws}
        messages_s = min(messages_s, time.thread_time() - cpu)
        cpu = time.thread_time()
        {event.task_id for event in gcs_service_pb2.GetTaskEventsReply.FromString(wire).events_by_task}
        reply_s = min(reply_s, time.thread_time() - cpu)
    print(f"one read of a full GCS ({capacity:,} calls, one job; transfer not counted): serialized messages "
          f"keyed {messages_s * 1000:.0f} ms, the job-filtered reply parsed and keyed {reply_s * 1000:.0f} ms "
          f"({reply_s / messages_s:.1f}x)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=3, help="calls per worker per step")
    parser.add_argument("--step-s", type=float, default=1.0, help="simulated seconds per step")
    parser.add_argument("--capacity", type=int, default=100_000, help="task events the GCS keeps")
    parser.add_argument("--blocks", type=int, default=10, help="blocks of steps the CPU per step is shown in")
    args = parser.parse_args()

    from nrlprof.anatomy import pump as pump_module
    from nrlprof.anatomy.events import TASK_ID_BYTES
    from nrlprof.anatomy.files import TASKS_FILE
    from nrlprof.anatomy.pump import TaskEventPump
    from nrlprof.compact_json import dumps

    clock = SimulatedClock()
    pump_module.time = clock
    written = {"records": 0, "bytes": 0}

    def count_lines(path: Path, records: list[dict]) -> None:  # serialized as the reader writes them, not kept
        if path.name != TASKS_FILE:
            return
        written["records"] += len(records)
        written["bytes"] += sum(len(dumps(r)) + 1 for r in records)

    pump_module.append_lines = count_lines
    templates = [call_template(w, METHODS[c % len(METHODS)]) for w in range(args.workers) for c in range(args.calls)]
    compare_full_reads(templates, args.capacity)
    gcs: collections.deque[bytes] = collections.deque(maxlen=args.capacity)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tmp = tempfile.mkdtemp(prefix="nrlprof-bench-anatomy-scale-")
    made = {"tasks": 0}  # what the GCS had for the job: held, or let go (what `gcs_count` asks it)
    pump = TaskEventPump(JOB, Path(tmp), args.capacity, lambda: list(gcs), lambda: made["tasks"])
    block = max(1, args.steps // args.blocks)
    # Per block of steps: the reader's CPU of the reads made in it and the steps those reads covered (each read
    # covers the steps since the one before), so a block without a read does not read as free.
    block_cpu = [0.0] * (args.steps // block + 1)
    block_steps = [0] * len(block_cpu)
    block_reads = [0] * len(block_cpu)
    next_read, last_read_step, serial, generated = 0.0, 0, 0, 0
    print(f"{args.workers} workers x {args.calls} calls x {args.steps} steps; the GCS keeps {args.capacity:,} calls")
    began = time.perf_counter()
    for step in range(1, args.steps + 1):
        for head, tail in templates:
            gcs.append(head + serial.to_bytes(TASK_ID_BYTES - len(JOB), "big") + JOB + tail)
            serial += 1
        generated += len(templates)
        made["tasks"] = generated
        clock.now = step * args.step_s
        if clock.now >= next_read:
            cpu = time.thread_time()
            pump.read()
            index = (step - 1) // block
            block_cpu[index] += time.thread_time() - cpu
            block_steps[index] += step - last_read_step
            block_reads[index] += 1
            last_read_step, next_read = step, clock.now + pump.interval_s
    cpu = time.thread_time()
    pump.read(final=True)
    final_cpu = time.thread_time() - cpu
    elapsed = time.perf_counter() - began
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    lost = generated - written["records"]
    print(f"simulated in {elapsed:.0f} s; {pump.reads} reads, every {pump.interval_s:.1f} simulated s at the end")
    print("reader CPU per step (ms), by block of steps (its reads' CPU over the steps they covered):")
    per_step = []
    for index in range(len(block_cpu)):
        if not block_reads[index]:
            continue
        first, last = index * block + 1, min((index + 1) * block, args.steps)
        per_step.append(block_cpu[index] / block_steps[index])
        print(f"  steps {first:>5}-{last:<5} {per_step[-1] * 1000:8.2f} ms/step  ({block_reads[index]} reads)")
    steady = per_step[1:] or per_step
    print(f"from the second block to the last: max/min {max(steady) / min(steady):.2f} (target: within 1.20)")
    print(f"final read {final_cpu * 1000:.0f} ms; the reader's sets: done {len(pump.reader.done):,}, "
          f"held {len(pump.reader.held):,}")  # fmt: skip
    print(f"peak RSS {rss_after / 1024:.0f} MB (before the job {rss_before / 1024:.0f} MB; the GCS stand-in's "
          f"{args.capacity:,} messages are in it)")  # fmt: skip
    print(f"calls: {generated:,} made, {written['records']:,} recorded, {lost:,} let go by the GCS before a read; "
          f"the reader counted {pump.lost:,} lost in {pump.gaps} read(s)")  # fmt: skip
    per_call = written["bytes"] / max(1, generated)
    print(f"tasks.jsonl would hold {written['bytes'] / 1e9:.2f} GB ({per_call:.0f} B a call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
