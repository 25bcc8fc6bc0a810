"""A step-anatomy run's calls as columns: `tasks.jsonl` read in byte ranges, several at once, into numpy arrays.

A long job's `tasks.jsonl` holds millions of calls (1,000 workers x 5,000 steps x 3 calls: 15 million lines, 7 GB).
Each range is decoded by msgspec into the few fields read here and turned into columns at once (codes for the
actor, method and node strings, ns times), so memory holds 24 bytes a call, not a dict. Ranges are read by this
process and reader processes (`pool`), and their columns joined in file order. The clock offsets
(read.anatomy.clock_offsets) are taken in the same pass, from the driver's calls. A line that cannot be read is
counted and left out; a torn last line (a writer killed mid-line) is left out as `read_lines` does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from nrlprof.anatomy.files import ACTORS_FILE, GAPS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, read_lines
from nrlprof.tools.read.anatomy import RAY_INTERNAL_PREFIX, ProfiledNames, offsets_from_latencies, worker_names
from nrlprof.tools.read.pool import start_context, usable_cpus

if TYPE_CHECKING:
    import numpy as np

_DTYPES = {"actor": "int32", "method": "int32", "start": "int64", "end": "int64"}
BLOCK_BYTES = 16 << 20  # decoded at once: a block's records live only while its columns are made
RANGE_BYTES = 96 << 20  # one unit of work for a reader process
CHUNK_CALLS = 1 << 21


class TaskLine(msgspec.Struct, gc=False):
    actor_id: str = ""
    method: str = ""
    kind: str = "call"
    class_name: str = msgspec.field(name="class", default="")
    start_ns: int = 0
    end_ns: int = 0
    task_end_ns: int = 0
    node_id: str = ""
    pid: int | None = None
    parent_task_id: str | None = None  # None: the driver's own task (a line leaves it out)
    submitted_ns: int = 0
    running_ns: int = 0
    finished_ns: int = 0


class CallLine(msgspec.Struct, gc=False):
    """What every line is read for; the rest of a line (TaskLine) is read only where it is needed."""

    actor_id: str = ""
    method: str = ""
    kind: str = "call"
    start_ns: int = 0
    end_ns: int = 0


CALL, CREATE = "call", "create"
CLOCK_SAMPLES = 4096  # the driver's calls to a node whose latencies time its clock, per byte range
_CALLS = msgspec.json.Decoder(CallLine)  # 4x faster than reading whole lines: big integers are most of the cost
_LINES = msgspec.json.Decoder(TaskLine)
_ACTOR_ID, _METHOD, _NODE_ID, _KIND = (attrgetter(name) for name in ("actor_id", "method", "node_id", "kind"))
_START, _END = attrgetter("start_ns"), attrgetter("end_ns")
_CLOCK_FIELDS = tuple(attrgetter(name) for name in ("submitted_ns", "running_ns", "finished_ns", "task_end_ns"))


@dataclass
class RangeColumns:
    """One byte range's calls: codes into its own string tables, times in ns on each worker's node clock."""

    actors: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    columns: dict[str, Any] = field(default_factory=dict)  # actor, method, start, end
    actor_nodes: dict[str, str] = field(default_factory=dict)  # actor id -> its node (an actor lives on one)
    creations: list[dict] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)  # actor id -> the class its first call carries
    clock_samples: dict[str, int] = field(default_factory=dict)  # per node: the driver's calls read whole for it
    out_ns: dict[str, int] = field(default_factory=dict)  # per node: the least RUNNING - SUBMITTED
    back_ns: dict[str, int] = field(default_factory=dict)  # per node: the least FINISHED - end of the task
    bad_lines: int = 0
    bytes: int = 0  # the range's length


@dataclass
class RunCalls:
    """Every actor call of a run, one row each, on the driver's clock, by start; names as read.anatomy.worker_names."""

    run: Path
    meta: dict
    marks: list[dict]
    gaps: list[dict]
    workers: list[str]  # worker group names, sorted
    methods: list[str]
    actor_worker: np.ndarray  # per actor code: index into workers
    actor_rank: np.ndarray
    actor: np.ndarray  # per call: actor code
    method: np.ndarray
    start: np.ndarray  # ns, driver's clock
    end: np.ndarray
    offsets: dict[str, int]
    bounds: dict[str, int]
    group_ranks: dict[str, list[int]]  # every rank of each group the run names, called or not
    bad_lines: int = 0

    @property
    def worker(self) -> np.ndarray:
        return self.actor_worker[self.actor]

    @property
    def rank(self) -> np.ndarray:
        return self.actor_rank[self.actor]

    def keep(self, chosen: np.ndarray) -> None:
        """Only the calls `chosen` (a mask), one column at a time."""
        self.actor, self.method = self.actor[chosen], self.method[chosen]
        self.start, self.end = self.start[chosen], self.end[chosen]


def read_range(path: str, begin: int, end: int, driver_task: str, driver_node: str = "") -> RangeColumns:
    """The calls in bytes [begin, end) of `tasks.jsonl` (both at line starts, or `end` at the file's end)."""
    import numpy as np

    found = RangeColumns()
    codes: dict[str, dict[str, int]] = {"actor": {}, "method": {}}
    parts: dict[str, list] = {"actor": [], "method": [], "start": [], "end": []}
    with open(path, "rb") as handle:
        handle.seek(begin)
        at = begin
        while at < end:
            block = handle.read(min(BLOCK_BYTES, end - at))
            if not block:
                break
            if not block.endswith(b"\n"):
                block += handle.readline()  # the block's last line, whole (a torn one at the file's end stays torn)
            at += len(block)
            whole = block if block.endswith(b"\n") else block[: block.rfind(b"\n") + 1]
            if whole:
                records, lines = _decode(whole, found)
                _add_block(Block(records, lines, whole), found, codes, parts, driver_task, driver_node)
    found.actors, found.methods = list(codes["actor"]), list(codes["method"])
    found.columns = {k: np.concatenate(v) if v else np.zeros(0, _DTYPES[k]) for k, v in parts.items()}
    found.bytes = end - begin
    return found


@dataclass
class Block:
    """A block's records as `CallLine`s, and its lines, split only where a line is read whole."""

    records: list[CallLine]
    given_lines: list[bytes] | None
    text: bytes

    @cached_property
    def lines(self) -> list[bytes]:
        if self.given_lines is not None:
            return self.given_lines
        lines = self.text.split(b"\n")
        if len(lines) - 1 != len(self.records):  # blank lines, which no record stands for
            lines = [line for line in lines if line.strip()]
        return lines

    def whole(self, indices: list[int]) -> list[TaskLine]:
        """The lines at `indices` read whole."""
        lines = self.lines
        return _LINES.decode_lines(b"\n".join(lines[i] for i in indices) + b"\n") if indices else []


def _decode(block: bytes, found: RangeColumns) -> tuple[list[CallLine], list[bytes] | None]:
    """Every line's call fields, and the lines where some had to be left out (else None: the block's own)."""
    try:
        return _CALLS.decode_lines(block), None
    except (msgspec.DecodeError, ValueError):
        records, lines = [], []
        for line in block.splitlines():
            try:
                _LINES.decode(line)  # whole: a line read in part now is read whole later
                records.append(_CALLS.decode(line))
                lines.append(line)
            except (msgspec.DecodeError, ValueError):
                found.bad_lines += bool(line.strip())
        return records, lines


def _add_block(block: Block, found: RangeColumns, codes: dict, parts: dict, driver_task: str, driver_node: str) -> None:
    """Columns of the block's calls. Every call gives its actor a code in file order (as worker_names ranks
    actors), also one of Ray's own methods, whose rows are then left out. Fields are taken with `map` and
    `attrgetter`, not a Python loop: at millions of lines, the loop would cost three times the decoding."""
    import numpy as np

    records = block.records
    kinds = list(map(_KIND, records))
    if kinds.count(CALL) == len(kinds):
        calls, at = records, None
    else:
        at = [i for i, kind in enumerate(kinds) if kind == CALL]
        calls = [records[i] for i in at]
        found.creations += [_creation(r) for r in block.whole([i for i, k in enumerate(kinds) if k == CREATE])]
    count = len(calls)
    actor_ids = list(map(_ACTOR_ID, calls))
    known = len(codes["actor"])
    columns = {
        "actor": _codes(actor_ids, codes["actor"]),
        "method": _codes(list(map(_METHOD, calls)), codes["method"]),
        "start": np.fromiter(map(_START, calls), np.int64, count),
        "end": np.fromiter(map(_END, calls), np.int64, count),
    }
    if len(codes["actor"]) > known:  # actors first seen here: their node, pid and class, from their first call
        seen, first = np.unique(columns["actor"][np.flatnonzero(columns["actor"] >= known)], return_index=True)
        firsts = np.flatnonzero(columns["actor"] >= known)[first].tolist()
        for line in block.whole([firsts[i] if at is None else at[firsts[i]] for i in range(len(seen))]):
            found.actor_nodes[line.actor_id] = line.node_id
            if line.pid.__class__ is int:
                found.pids[line.actor_id] = line.pid
            if line.class_name:
                found.classes[line.actor_id] = line.class_name
    _sample_clocks(block, columns["actor"], at, codes["actor"], found, driver_task, driver_node)
    internal = [code for name, code in codes["method"].items() if name.startswith(RAY_INTERNAL_PREFIX)]
    keep = ~np.isin(columns["method"], internal) if internal else slice(None)
    for name, column in columns.items():
        parts[name].append(column[keep])


def _sample_clocks(block: Block, actors, at: list[int] | None, actor_code: dict[str, int], found: RangeColumns,
                   driver_task: str, driver_node: str) -> None:  # fmt: skip
    """The driver's calls to other nodes time those nodes' clocks: up to CLOCK_SAMPLES a node in each byte range
    (the least latency of thousands of calls is the least there is, and reading every line whole would cost
    the reading three times over). The driver's own node is the reference."""
    import numpy as np

    nodes = [found.actor_nodes.get(actor, "") for actor in actor_code]
    remote = sorted({n for n in nodes if n and n != driver_node and found.clock_samples.get(n, 0) < CLOCK_SAMPLES})
    if not remote:
        return
    node_of_actor = np.array([remote.index(n) if n in remote else -1 for n in nodes], dtype=np.int32)
    on_node = node_of_actor[actors]
    chosen: list[int] = []
    for index, node in enumerate(remote):
        budget = CLOCK_SAMPLES - found.clock_samples.get(node, 0)
        picked = np.flatnonzero(on_node == index)[:budget].tolist()
        found.clock_samples[node] = found.clock_samples.get(node, 0) + len(picked)
        chosen += picked
    lines = block.whole(sorted(i if at is None else at[i] for i in chosen))
    _time_nodes([r for r in lines if _by_driver(r, driver_task)], found)


def _codes(names: list[str], table: dict[str, int]):
    """Each name's code in `table`, new names given the next codes in order of first appearance."""
    import numpy as np

    for name in dict.fromkeys(names):
        if name not in table:
            table[name] = len(table)
    return np.fromiter(map(table.__getitem__, names), np.int32, len(names))


def _by_driver(record: TaskLine, driver_task: str) -> bool:
    return record.parent_task_id is None or record.parent_task_id == driver_task


def _time_nodes(driver_calls: list[TaskLine], found: RangeColumns) -> None:
    """The least RUNNING - SUBMITTED and FINISHED - end of the task per node, over the driver's calls."""
    import numpy as np

    if not driver_calls:
        return
    count = len(driver_calls)
    table: dict[str, int] = {}
    nodes = _codes(list(map(_NODE_ID, driver_calls)), table)
    submitted, running, finished, ended = (
        np.fromiter(map(getter, driver_calls), np.int64, count) for getter in _CLOCK_FIELDS
    )
    for gaps, known, into in (
        (running - submitted, (submitted != 0) & (running != 0), found.out_ns),
        (finished - ended, (finished != 0) & (ended != 0), found.back_ns),
    ):
        least = np.full(len(table), np.iinfo(np.int64).max)
        np.minimum.at(least, nodes[known], gaps[known])
        for node, code in table.items():
            if least[code] != np.iinfo(np.int64).max:
                into[node] = min(into.get(node, int(least[code])), int(least[code]))


def _creation(record: TaskLine) -> dict:
    return {
        "actor_id": record.actor_id,
        "kind": "create",
        "class": record.class_name,
        "method": record.method,
        "start_ns": record.start_ns,
        "parent_task_id": record.parent_task_id if record.parent_task_id is not None else "",
        "pid": record.pid,
        "node_id": record.node_id,
    }


def byte_ranges(path: Path, size: int, target: int = RANGE_BYTES) -> list[tuple[int, int]]:
    """[begin, end) ranges of about `target` bytes, each beginning at a line start."""
    cuts = [0]
    with path.open("rb") as handle:
        while cuts[-1] + target < size:
            handle.seek(cuts[-1] + target)
            handle.readline()
            where = handle.tell()
            if where >= size:
                break
            cuts.append(where)
    cuts.append(size)
    return list(itertools.pairwise(cuts))


def read_ranges(path: Path, driver_task: str, driver_node: str, jobs: int | None = None) -> Iterator[RangeColumns]:
    """Every range's columns, in file order: read here alone, or with up to `jobs` - 1 reader processes."""
    size = path.stat().st_size if path.is_file() else 0
    ranges = byte_ranges(path, size) if size else []
    jobs = min(usable_cpus() if jobs is None else jobs, len(ranges))
    if jobs <= 1:
        for begin, end in ranges:
            yield read_range(str(path), begin, end, driver_task, driver_node)
        return
    with ProcessPoolExecutor(jobs, mp_context=start_context(__name__)) as pool:
        futures = [pool.submit(read_range, str(path), begin, end, driver_task, driver_node) for begin, end in ranges]
        futures.reverse()
        while futures:
            yield futures.pop().result()  # let go of each range's columns once taken


def read_run_calls(run: Path, profiled: ProfiledNames | None = None, jobs: int | None = None) -> RunCalls:
    """The run's calls as columns, named as read.anatomy names them and moved onto the driver's clock."""
    meta = (read_lines(run / META_FILE) or [{}])[0]
    driver_task = "ff" * 20 + str(meta.get("job_id", ""))
    driver_node = str(meta.get("driver_node_id", ""))
    actor_code: dict[str, int] = {}
    method_code: dict[str, int] = {}
    columns: GrowingColumns | None = None
    size = (run / TASKS_FILE).stat().st_size if (run / TASKS_FILE).is_file() else 0
    creations: list[dict] = []
    pids: dict[str, int] = {}
    classes: dict[str, str] = {}
    nodes: dict[str, str] = {}
    out_ns: dict[str, int] = {}
    back_ns: dict[str, int] = {}
    bad = 0
    for found in read_ranges(run / TASKS_FILE, driver_task, driver_node, jobs):
        import numpy as np  # after the readers started: numpy's own threads would rule out forking them

        for column, names, table in (("actor", found.actors, actor_code), ("method", found.methods, method_code)):
            recode = np.fromiter((table.setdefault(n, len(table)) for n in names), np.int32, len(names))
            if len(names):
                found.columns[column] = recode[found.columns[column]]
        if columns is None:  # sized from the first range's calls per byte: the file's calls, and a tenth more
            calls_per_byte = len(found.columns["start"]) / max(1, found.bytes)
            columns = GrowingColumns(int(1.1 * calls_per_byte * size) + 1024)
        columns.append(found.columns)
        creations += found.creations
        for into, values in ((pids, found.pids), (classes, found.classes), (nodes, found.actor_nodes)):
            for actor, value in values.items():
                into.setdefault(actor, value)
        for least, gaps in ((out_ns, found.out_ns), (back_ns, found.back_ns)):
            for node, gap in gaps.items():
                least[node] = min(least.get(node, gap), gap)
        bad += found.bad_lines
    import numpy as np

    columns = (columns or GrowingColumns(0)).finish()
    offsets, bounds = offsets_from_latencies(out_ns, back_ns, driver_node)
    if driver_node in nodes.values():
        offsets[driver_node], bounds[driver_node] = 0, 0
    shift = np.fromiter((offsets.get(nodes.get(a, ""), 0) for a in actor_code), np.int64, len(actor_code))
    if len(shift) and shift.any():
        for lo in range(0, len(columns["actor"]), CHUNK_CALLS):  # no copy of every call's shift
            call_shift = shift[columns["actor"][lo : lo + CHUNK_CALLS]]
            columns["start"][lo : lo + CHUNK_CALLS] -= call_shift
            columns["end"][lo : lo + CHUNK_CALLS] -= call_shift
    if len(columns["start"]) > 1 and not (columns["start"][1:] >= columns["start"][:-1]).all():
        order = np.argsort(columns["start"], kind="stable")
        if len(order) < 2**31:
            order = order.astype(np.int32)  # half the memory while the columns are put in order, one at a time
        for name in ("actor", "method", "start", "end"):
            columns[name] = columns[name][order]
        del order
    # Every actor the calls name, in first-call order, so worker_names ranks them as it does from the tasks.
    named = [{"actor_id": a, "kind": "call", "pid": pids.get(a), "class": classes.get(a, "")} for a in actor_code]
    names = worker_names(read_lines(run / ACTORS_FILE), creations + named, profiled)
    groups = sorted({name for name, _ in names.values()})
    group_index = {g: i for i, g in enumerate(groups)}
    actor_worker = np.fromiter((group_index[names[a][0]] for a in actor_code), np.int32, len(actor_code))
    actor_rank = np.fromiter((names[a][1] for a in actor_code), np.int32, len(actor_code))
    return RunCalls(
        run=run,
        meta=meta,
        marks=read_lines(run / STEPS_FILE),
        gaps=read_lines(run / GAPS_FILE),
        workers=groups,
        methods=list(method_code),
        actor_worker=actor_worker,
        actor_rank=actor_rank,
        actor=columns["actor"],
        method=columns["method"],
        start=columns["start"],
        end=columns["end"],
        offsets=dict(sorted(offsets.items())),
        bounds=dict(sorted(bounds.items())),
        group_ranks={g: sorted({rank for name, rank in names.values() if name == g}) for g in groups},
        bad_lines=bad,
    )


class GrowingColumns:
    """The run's columns filled range by range into arrays sized once (grown by half should the guess fall short):
    no list of every range's columns beside their concatenation."""

    def __init__(self, capacity: int) -> None:
        import numpy as np

        self.size = 0
        self.arrays = {name: np.empty(capacity, dtype) for name, dtype in _DTYPES.items()}

    def append(self, parts: dict) -> None:
        import numpy as np

        count = len(parts["start"])
        if self.size + count > len(self.arrays["start"]):
            capacity = max(self.size + count, int(1.5 * len(self.arrays["start"])))
            for name, array in self.arrays.items():
                grown = np.empty(capacity, array.dtype)
                grown[: self.size] = array[: self.size]
                self.arrays[name] = grown
        for name, array in self.arrays.items():
            array[self.size : self.size + count] = parts[name]
        self.size += count

    def finish(self) -> dict:
        return {name: array[: self.size] for name, array in self.arrays.items()}
