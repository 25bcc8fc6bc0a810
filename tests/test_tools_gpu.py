"""GPU time per worker x rank x step: GPU-shaped torch traces (figures worked out by hand), a real nsys export."""

from __future__ import annotations

import copy
import io
import json
import sqlite3
from pathlib import Path

import pytest
from helpers.nsys import FIXTURE, copy_nsys_export, nsys_running
from helpers.traces import ELEMENTWISE, NCCL, gpu_step_trace, write_json

from nrlprof.tools.figures.kernel_names import short_kernel_name
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.render.console import render_summary

GPU_KEYS = ("gpu_kernel_ms", "gpu_busy_pct", "gpu_idle_ms", "comm_ms", "memcpy_ms", "gpu_kernels",
            "comm_union_ms", "exposed_comm_ms")  # fmt: skip


def without_correlation(trace: dict) -> dict:
    """The same trace with no correlation ids (an older or filtered trace)."""
    trace = copy.deepcopy(trace)
    for event in trace["traceEvents"]:
        event.get("args", {}).pop("correlation", None)
    return trace


def step_figures(data: dict, worker: str, rank: int | None, step: int) -> dict:
    entry = next(w for w in data["workers"] if w["worker"] == worker and w["rank"] == rank)
    figures = entry["steps"][str(step)]
    return {key: figures[key] for key in ("wall_ms", *GPU_KEYS)}


def test_kernels_belong_to_the_step_that_launched_them(tmp_path):
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_step_trace())
    data = summarize(tmp_path, nsys="").to_json()
    # step 3: kernels 200 + 300 + 100 (NCCL) + 50 (launched in step 3, run in step 4's window) us;
    # busy inside 1000-2000: 1100-1500, 1600-1700, 1700-1750, 1750-1760 = 560 us; NCCL 1600-1700 under no kernel
    assert step_figures(data, "policy", 0, 3) == {
        "wall_ms": 1.0, "gpu_kernel_ms": 0.65, "gpu_busy_pct": 56.0, "gpu_idle_ms": 0.44, "comm_ms": 0.1,
        "memcpy_ms": 0.06, "gpu_kernels": 4, "comm_union_ms": 0.1, "exposed_comm_ms": 0.1,
    }  # fmt: skip
    assert step_figures(data, "policy", 0, 4) == {
        "wall_ms": 1.0, "gpu_kernel_ms": 0.1, "gpu_busy_pct": 10.0, "gpu_idle_ms": 0.9, "comm_ms": 0.0,
        "memcpy_ms": 0.0, "gpu_kernels": 1, "comm_union_ms": 0.0, "exposed_comm_ms": 0.0,
    }  # fmt: skip


def test_without_correlation_kernels_belong_to_the_step_they_start_in(tmp_path):
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", without_correlation(gpu_step_trace()))
    data = summarize(tmp_path, nsys="").to_json()
    assert step_figures(data, "policy", 0, 3)["gpu_kernel_ms"] == 0.6
    # the kernel at 2120-2170 now counts in step 4: 50 + 100 us busy
    assert step_figures(data, "policy", 0, 4) == {
        "wall_ms": 1.0, "gpu_kernel_ms": 0.15, "gpu_busy_pct": 15.0, "gpu_idle_ms": 0.85, "comm_ms": 0.0,
        "memcpy_ms": 0.0, "gpu_kernels": 2, "comm_union_ms": 0.0, "exposed_comm_ms": 0.0,
    }  # fmt: skip


def test_cpu_only_traces_claim_no_gpu_figures(tmp_path):
    trace = gpu_step_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e["cat"] == "user_annotation"]
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", trace)
    steps = summarize(tmp_path, nsys="").to_json()["workers"][0]["steps"]
    assert steps["3"]["wall_ms"] == 1.0 and "gpu_kernel_ms" not in steps["3"]


def test_slowest_rank_per_step_is_one_line(tmp_path):
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_step_trace())
    write_json(tmp_path / "policy.rank1.steps3-4.1001.pt.trace.json", gpu_step_trace(1, 1001, step3_us=1500.0))
    write_json(tmp_path / "policy.rank2.steps3-4.1002.pt.trace.json", gpu_step_trace(2, 1002, step3_us=1100.0))
    summary = summarize(tmp_path, nsys="")
    (row,) = summary.to_json()["stragglers"]["3"]
    # walls 1.0, 1.5 and 1.1 ms: the median is 1.1
    assert row["worker"] == "policy" and row["slowest_rank"] == 1 and row["ranks"] == 3
    assert (row["wall_ms"], row["median_ms"], row["spread"]) == (1.5, 1.1, round(1.5 / 1.1, 3))
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120)
    render_summary(summary, console)
    lines = [line for line in console.file.getvalue().splitlines() if line.startswith("step 3:")]
    assert len(lines) == 1 and "policy rank 1" in lines[0] and "1.36x" in lines[0]


@pytest.mark.parametrize(
    ("name", "short"),
    [
        (ELEMENTWISE, "vectorized_elementwise_kernel"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(T1::Params)", "cutlass::Kernel2"),
        ("cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>", "cutlass::Kernel2"),
        (NCCL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
        (
            "void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4>(long, T3)",
            "distribution_elementwise_grid_stride_kernel",
        ),
        ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float>>(T3)", "reduce_kernel"),
        ("void foo::bar<std::less<int>, operator<>(int)", "bar"),
    ],
)
def test_kernel_names_are_shortened_the_way_nsys_does(name, short):
    assert short_kernel_name(name) == short


def nsys_expected(path: Path) -> dict:
    """Figures of the real capture's `step 3` worked out with plain SQL (and a plain interval union)."""
    db = sqlite3.connect(path)
    step = "SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value = 'step 3'"
    lo, hi = db.execute(step).fetchone()
    launched = "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId) WHERE r.start BETWEEN ? AND ?"
    kernels = f"SELECT count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k {launched}"
    count, kernel_ns = db.execute(kernels, (lo, hi)).fetchone()
    copies_ns = 0
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        copies_ns += db.execute(
            f"SELECT coalesce(sum(k.end - k.start), 0) FROM {table} k {launched}", (lo, hi)
        ).fetchone()[0]
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
    union = " UNION ALL ".join(f"SELECT k.start, k.end FROM {t} k {launched}" for t in tables) + " ORDER BY 1"
    busy, reach = 0, lo
    for start, end in db.execute(union, (lo, hi) * 3):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            busy, reach = busy + end - start, end
    wall = hi - lo
    return {
        "wall_ms": round(wall / 1e6, 3),
        "gpu_kernel_ms": round(kernel_ns / 1e6, 3),
        "gpu_busy_pct": round(100 * busy / wall, 2),
        "gpu_idle_ms": round((wall - busy) / 1e6, 3),
        "comm_ms": 0.0,
        "memcpy_ms": round(copies_ns / 1e6, 3),
        "gpu_kernels": count,
        "comm_union_ms": 0.0,  # no NCCL kernel in this capture
        "exposed_comm_ms": 0.0,
    }


@pytest.fixture
def nsys_export(tmp_path) -> Path:
    return copy_nsys_export(tmp_path)


def test_a_real_nsys_export_gives_per_step_gpu_time(nsys_export):
    expected = nsys_expected(nsys_export)
    assert expected["gpu_kernels"] == 82 and expected["wall_ms"] > 0
    data = summarize(nsys_export.parent, nsys="").to_json()
    (entry,) = data["workers"]
    assert (entry["worker"], entry["source"], list(entry["steps"])) == ("vllm_generation_worker", "nsys", ["3"])
    assert step_figures(data, "vllm_generation_worker", None, 3) == expected
    names = {k["short_name"] for k in entry["top_kernels"]}
    assert {"vectorized_elementwise_kernel", "reduce_kernel", "distribution_elementwise_grid_stride_kernel"} <= names
    assert "vllm_generation_worker.generate" in entry["steps"]["3"]["ranges_ms"]  # its `[step 3]` left out


def test_the_rank_of_an_nsys_capture_comes_from_its_manifest(nsys_export):
    manifest = nsys_export.parent / ".nrlprof" / "manifest-h-1.jsonl"
    manifest.parent.mkdir()
    record = {"backend": "nsys", "worker": "vllm_generation_worker", "rank": 2, "window": "3-5", "status": "ok",
              "host": "h", "pid": 4242, "start_ms": 150.0, "stop_ms": 3012.5,
              "files": ["/tmp/ray/logs/nsight/vllm_generation_worker_3_5_4242.1.nsys-rep"]}  # fmt: skip
    manifest.write_text(json.dumps(record) + "\n")
    data = summarize(nsys_export.parent, nsys="").to_json()
    assert data["workers"][0]["rank"] == 2
    assert data["profiler_overhead"] == [{"worker": "vllm_generation_worker", "rank": 2, "window": "3-5",
                                          "backend": "nsys", "host": "h", "pid": 4242, "status": "ok",
                                          "start_ms": 150.0, "stop_ms": 3012.5, "finish_ms": 0.0}]  # fmt: skip


def test_a_report_without_export_is_exported_with_nsys(nsys_export, tmp_path):
    report = nsys_export.with_name("vllm_generation_worker_3_5_4242.1.nsys-rep")
    report.write_bytes(b"report")
    nsys_export.unlink()
    nsys = nsys_running(tmp_path, "nsys_export_standin.py", str(FIXTURE))  # copies the fixture as its export
    data = summarize(report.parent, nsys=nsys).to_json()
    nsys_workers = [w for w in data["workers"] if w["source"] == "nsys"]
    assert len(nsys_workers) == 1 and nsys_workers[0]["steps"]["3"]["gpu_kernels"] == 82
    assert nsys_workers[0]["files"] == [str(report)]
    assert not list(report.parent.glob("*.sqlite"))  # the export went to a temporary directory


def test_a_sqlite_file_that_is_not_an_export_is_a_note(tmp_path):
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_step_trace())
    sqlite3.connect(tmp_path / "other.sqlite").execute("CREATE TABLE t (x)").connection.commit()
    (tmp_path / "broken.sqlite").write_bytes(b"not a database at all" * 100)
    notes = summarize(tmp_path, nsys="").notes
    assert any("other.sqlite" in n and "NVTX_EVENTS" in n for n in notes)
    assert any("broken.sqlite" in n and "not a readable" in n for n in notes)


def test_traces_read_in_parallel_give_the_same_summary(tmp_path):
    for rank in (0, 1, 2):
        trace = gpu_step_trace(rank, 1000 + rank, step3_us=1000.0 + 100 * rank)
        write_json(tmp_path / f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json", trace)
    (tmp_path / "policy.rank3.steps3-4.1003.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "ts": ')
    one, two = summarize(tmp_path, nsys="", jobs=1), summarize(tmp_path, nsys="", jobs=2)
    assert one.to_json() == two.to_json()
    assert [p.name for p, _ in two.skipped] == ["policy.rank3.steps3-4.1003.pt.trace.json"]
    assert [w.rank for w in two.workers] == [0, 1, 2]


@pytest.mark.filterwarnings("ignore")
def test_hta_figures_are_an_optional_extra(tmp_path, capsys):
    pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed")
    for rank in (0, 1):
        write_json(tmp_path / "policy" / str(rank) / f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json",
                   gpu_step_trace(rank, 1000 + rank))  # fmt: skip
    write_json(tmp_path / "reference" / "0" / "reference.rank0.steps3-4.2000.pt.trace.json",
               gpu_step_trace(0, 2000, worker="reference"))  # fmt: skip
    from nrlprof.cli import main

    assert main(["summary", str(tmp_path), "--json"]) == 0
    assert "hta" not in json.loads(capsys.readouterr().out)
    assert main(["summary", str(tmp_path), "--json", "--hta"]) == 0
    rows = json.loads(capsys.readouterr().out)["hta"]
    # every role's rank 0 is analysed on its own: two policy ranks and the reference's rank 0
    assert sorted((r["worker"], r["rank"]) for r in rows) == [("policy", 0), ("policy", 1), ("reference", 0)]
    for row in rows:
        assert row["window"] == "3-4" and row["kernel_ms"] > 0
        assert abs(row["idle_pct"] + row["compute_pct"] + row["non_compute_pct"] - 100) < 0.1
        assert row["comm_comp_overlap_pct"] is not None


def test_hta_times_are_in_ms_like_every_other_time():
    from nrlprof.tools.figures.hta import _analyse

    class Frame(list):
        def to_dict(self, orient):
            return list(self)

    class Analysis:
        def __init__(self, trace_dir):
            pass

        def get_temporal_breakdown(self, visualize):
            times = {"idle_time(us)": 1500.0, "compute_time(us)": 2500.0, "non_compute_time(us)": 1000.0,
                     "kernel_time(us)": 3500.0}  # fmt: skip
            percents = {"idle_time_pctg": 30.0, "compute_time_pctg": 50.0, "non_compute_time_pctg": 20.0}
            return Frame([{"rank": 0, **times, **percents}])

        def get_comm_comp_overlap(self, visualize):
            return Frame([{"rank": 0, "comp_comm_overlap_pctg": 12.5}])

    (row,) = _analyse(Analysis, "unused", "policy", "3-4")
    assert row == {"worker": "policy", "window": "3-4", "rank": 0, "idle_ms": 1.5, "compute_ms": 2.5,
                   "non_compute_ms": 1.0, "kernel_ms": 3.5, "idle_pct": 30.0, "compute_pct": 50.0,
                   "non_compute_pct": 20.0, "comm_comp_overlap_pct": 12.5}  # fmt: skip


def test_nsys_export_without_runtime_calls_and_with_nccl(nsys_export):
    db = sqlite3.connect(nsys_export)
    (name_id,) = db.execute("SELECT id FROM StringIds WHERE value LIKE 'void at::native::vectorized%'").fetchone()
    db.execute("UPDATE StringIds SET value = 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)' WHERE id = ?", (name_id,))
    db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    db.commit()
    step = "SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value = 'step 3'"
    lo, hi = db.execute(step).fetchone()
    in_step = "FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start BETWEEN ? AND ?"
    count, kernel_ns = db.execute(f"SELECT count(*), sum(end - start) {in_step}", (lo, hi)).fetchone()
    (comm_ns,) = db.execute(f"SELECT sum(end - start) {in_step} AND demangledName = ?", (lo, hi, name_id)).fetchone()
    db.close()
    figures = step_figures(summarize(nsys_export.parent, nsys="").to_json(), "vllm_generation_worker", None, 3)
    # without runtime calls, each kernel belongs to the step its own start falls in
    assert (figures["gpu_kernels"], figures["gpu_kernel_ms"]) == (count, round(kernel_ns / 1e6, 3))
    assert figures["comm_ms"] == round(comm_ns / 1e6, 3) > 0
