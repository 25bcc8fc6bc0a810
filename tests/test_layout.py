"""nrlprof.layout: the file names README promises, stated here and compared with what nrlprof writes and reads back."""

from __future__ import annotations

from pathlib import Path

from nrlprof import layout


def touch(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"x")


def test_nsys_output_name_has_no_colon_and_ends_with_the_pid_placeholder():
    assert layout.nsys_output_name("dtensor_policy_worker", "3-4") == "dtensor_policy_worker_3-4_%p"
    assert layout.nsys_output_name("dtensor_policy_worker", "3-4_10") == "dtensor_policy_worker_3-4_10_%p"


def test_nsys_reports_single_report_of_stop(tmp_path):
    touch(tmp_path, "w_3-4_77.nsys-rep", "w_3-4_78.nsys-rep", "w_3-4_77.qdstrm")
    assert layout.nsys_reports(tmp_path / "w_3-4_%p", 77) == [tmp_path / "w_3-4_77.nsys-rep"]


def test_nsys_reports_numbered_in_capture_order_not_text_order(tmp_path):
    names = [f"w_1-2_5_77.{k}.nsys-rep" for k in (10, 2, 1)]
    touch(tmp_path, *names, "w_1-2_5_770.1.nsys-rep", "w_1-2_5_77.x.nsys-rep", "w_1-2_5_77.3.nsys-rep.tmp")
    (tmp_path / "w_1-2_5_77.4.nsys-rep").mkdir()
    found = layout.nsys_reports(tmp_path / "w_1-2_5_%p", 77)
    assert [p.name for p in found] == [f"w_1-2_5_77.{k}.nsys-rep" for k in (1, 2, 10)]


def test_nsys_reports_in_a_missing_folder_is_empty(tmp_path):
    assert layout.nsys_reports(tmp_path / "gone" / "w_3_%p", 1) == []
    assert layout.nsys_unfinished(tmp_path / "gone" / "w_3_%p", 1) == []


def test_nsys_unfinished_lists_only_this_capture_s_raw_files(tmp_path):
    touch(tmp_path, "w_3_77.qdstrm", "w_3_77.2.qdstrm", "w_3_78.qdstrm", "w_3_77.nsys-rep")
    found = layout.nsys_unfinished(tmp_path / "w_3_%p", 77)
    assert [p.name for p in found] == ["w_3_77.2.qdstrm", "w_3_77.qdstrm"]


def test_parse_nsys_name():
    parsed = layout.parse_nsys_name("dtensor_policy_worker_3-4_10_4121.2")
    assert (parsed.worker, parsed.window, parsed.pid) == ("dtensor_policy_worker", "3-4_10", 4121)
    parsed = layout.parse_nsys_name("w_3_9")
    assert (parsed.worker, parsed.window, parsed.pid) == ("w", "3", 9)
    assert layout.parse_nsys_name("notes") is None


def test_torch_trace_names_and_folders():
    assert layout.trace_file_name("w", 1, "steps3-4", 42, False) == "w.rank1.steps3-4.42.pt.trace.json"
    assert layout.trace_file_name("w", 0, "steps3", 42, True) == "w.rank0.steps3.42.pt.trace.json.gz"
    assert layout.trace_file_name("controller", None, "steps3-4", 42, False) == "controller.steps3-4.42.pt.trace.json"
    assert layout.trace_directory("/t", "w", 2) == Path("/t/w/2")
    assert layout.trace_directory("/t", "w", None) == Path("/t/w/0")
    assert layout.trace_directory("/t", None, None) == Path("/t")
    assert layout.memory_file_name("w", 1, "oom", 42, ".pickle") == "w.rank1.oom.42.pickle"
    assert layout.memory_file_name("w", None, "steps2", 42, ".memory.json") == "w.steps2.42.memory.json"


def test_parse_trace_name_round_trips():
    parsed = layout.parse_trace_name("dtensor_policy_worker.rank3.steps3-4.4121.pt.trace.json.gz")
    assert parsed == layout.TraceName("dtensor_policy_worker", 3, "3-4", 4121)
    parsed = layout.parse_trace_name("w.rank0.step3.update_actor.77.1.pt.trace.json")
    assert parsed == layout.TraceName("w", 0, "3", 77)
    controller = layout.parse_trace_name("controller.steps10.9.pt.trace.json")
    assert controller == layout.TraceName("controller", None, "10", 9)
    assert layout.parse_trace_name("summary.json") is None


def test_a_later_window_never_overwrites(tmp_path):
    first = tmp_path / "w.rank0.steps2.5.pt.trace.json"
    assert layout.unused_path(first) == first
    first.write_text("{}")
    assert layout.unused_path(first).name == "w.rank0.steps2.5.1.pt.trace.json"
    (tmp_path / "w.rank0.steps2.5.1.pt.trace.json").write_text("{}")
    assert layout.unused_path(first).name == "w.rank0.steps2.5.2.pt.trace.json"
    gz = tmp_path / "w.rank0.steps2.5.pt.trace.json.gz"
    gz.write_text("")
    assert layout.unused_path(gz).name == "w.rank0.steps2.5.1.pt.trace.json.gz"


def test_manifest_and_session_paths():
    assert layout.manifest_path("/s/logs/nrlprof", "node7", 4121) == Path("/s/logs/nrlprof/manifest-node7-4121.jsonl")
    assert layout.manifest_dir("/tmp/ray/session_1", "/t") == Path("/tmp/ray/session_1/logs/nrlprof")
    assert layout.manifest_dir(None, "/t") == Path("/t/.nrlprof")
    assert layout.nsight_dir("/tmp/ray/session_1") == Path("/tmp/ray/session_1/logs/nsight")


def test_file_safe_names():
    assert layout.file_safe("DTensor Policy:worker/1") == "DTensor_Policy_worker_1"
    assert layout.file_safe("..") == "worker"
    assert layout.file_safe(".hidden.") == "hidden"


def test_step_names_parse_in_one_place():
    torch, nvtx = layout.PROFILER_STEP_PREFIX, layout.NVTX_STEP_PREFIX
    assert layout.step_number("ProfilerStep#3", torch) == 3
    assert layout.step_number("step 12", nvtx) == 12
    assert layout.step_number("ProfilerStep#" + "9" * 18, torch) == 10**18 - 1
    for name in ("ProfilerStep#", "ProfilerStep#3.5", "ProfilerStep#٣", "ProfilerStep# 3", "ProfilerStep#" + "9" * 19,
                 "step 3", "Step#3"):  # fmt: skip
        assert layout.step_number(name, torch) is None, name
    assert layout.step_number("ProfilerStep#3", nvtx) is None


def test_the_writers_step_names_read_back():
    from nrlprof.backends.torch_profiler import STEP_MARKER
    from nrlprof.ranges.nvtx import DOMAIN

    assert layout.step_number(STEP_MARKER.format(7), layout.PROFILER_STEP_PREFIX) == 7
    # the NVTX side: tests/test_step_ranges.py sees the ranges `step <n>` in the domain `nrlprof`
    assert DOMAIN == layout.NVTX_DOMAIN == "nrlprof" and layout.NVTX_STEP_PREFIX + "1" == "step 1"


def test_nsys_stem_is_the_name_a_report_and_its_export_share():
    for name in ("w_3-4_77.nsys-rep", "w_3-4_77.qdrep", "w_3-4_77.sqlite", "w_3-4_77.nsys-rep.sqlite", "w_3-4_77"):
        assert layout.nsys_stem(name) == "w_3-4_77", name
    assert layout.nsys_stem("w_3-4_77.1.nsys-rep") == "w_3-4_77.1"


def test_snapshot_names_read_back_as_written():
    from nrlprof.tools.read.memory_snapshot import SnapshotName, parse_snapshot_name

    name = layout.memory_file_name("policy", 3, "steps4-5", 77, layout.MEMORY_SNAPSHOT_SUFFIX)
    assert parse_snapshot_name(name) == SnapshotName("policy", 3, "steps4-5", 77)
    controller = layout.memory_file_name("controller", None, "oom", 9, layout.MEMORY_SNAPSHOT_SUFFIX)
    assert parse_snapshot_name(controller) == SnapshotName("controller", None, "oom", 9)
    assert parse_snapshot_name("policy.rank3.steps4-5.77.memory.json") is None
