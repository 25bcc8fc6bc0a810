"""The nsys stand-in on its own (no Ray): child launch, capture ranges, report names, NVTX, failures, export."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nsys_standin.report import read_report

NSYS = Path(__file__).parent / "nsys_standin" / "nsys"
UNDER_NSYS = Path(__file__).parent / "programs" / "under_nsys.py"


def profile(tmp_path: Path, options: list[str], application: str, *, env: dict | None = None, wrapper=None, **kwargs):
    """Run `nsys profile OPTIONS python under_nsys.py APPLICATION` in tmp_path; the application's EMIT lines come
    back parsed."""
    command = [sys.executable, str(UNDER_NSYS), application]
    if wrapper is not None:
        command = wrapper(command)
    result = subprocess.run(
        [sys.executable, str(NSYS), "profile", *options, *command],
        cwd=tmp_path, env={**os.environ, **(env or {})}, capture_output=True, text=True, check=False, **kwargs,
    )  # fmt: skip
    result.emitted = [json.loads(line[5:]) for line in result.stdout.splitlines() if line.startswith("EMIT ")]
    return result


def names(directory: Path, suffix: str = "") -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def test_cli_example_repeat_2_writes_two_numbered_reports_named_after_the_child(tmp_path):
    # As documented: the script itself on the command line, `python` found on PATH.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run(
        [str(NSYS), "profile", "-o", "cap_%p", "--capture-range=cudaProfilerApi", "--capture-range-end=repeat:2",
         "python", str(UNDER_NSYS), "cycles"],
        cwd=tmp_path, env={**os.environ, "PATH": path}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    emitted = [json.loads(line[5:]) for line in result.stdout.splitlines() if line.startswith("EMIT ")]
    pid = emitted[0]["pid"]
    assert pid != os.getpid()
    assert names(tmp_path) == [f"cap_{pid}.1.nsys-rep", f"cap_{pid}.2.nsys-rep"]
    assert [e for e in emitted[1:]] == [{"start": 0}, {"stop": 0}] * 3, "every call succeeds, the third does nothing"
    reports = [read_report(tmp_path / f"cap_{pid}.{k}.nsys-rep") for k in (1, 2)]
    assert [r["range_index"] for r in reports] == [1, 2]
    assert [[m["message"] for m in r["nvtx_marks"]] for r in reports] == [["inside 1"], ["inside 2"]]
    assert all(r["launched_pid"] == pid and r["start_caller"]["pid"] == pid for r in reports)
    assert reports[0]["stop_ns"] < reports[1]["start_ns"]


@pytest.mark.parametrize(
    ("range_end", "suffixes"),
    [("stop", [""]), ("repeat", [".1", ".2", ".3"]), ("repeat:2", [".1", ".2"]), ("repeat:1", [".1"])],
)
def test_report_names_for_stop_and_repeat(tmp_path, range_end, suffixes):
    result = profile(tmp_path, ["-o", "out_%p", "--capture-range=cudaProfilerApi", f"--capture-range-end={range_end}"],
                     "cycles")  # fmt: skip
    assert result.returncode == 0, result.stderr
    pid = result.emitted[0]["pid"]
    assert names(tmp_path) == [f"out_{pid}{s}.nsys-rep" for s in suffixes]
    assert len(result.emitted) == 7, "the application keeps running after its ranges"


@pytest.mark.parametrize("range_end", ["stop-shutdown", "repeat-shutdown:2"])
def test_shutdown_ends_the_application_after_its_last_range(tmp_path, range_end):
    result = profile(tmp_path, ["-o", "out", "--capture-range=cudaProfilerApi", f"--capture-range-end={range_end}"],
                     "cycles_then_wait")  # fmt: skip
    expected = ["out.nsys-rep"] if range_end == "stop-shutdown" else ["out.1.nsys-rep", "out.2.nsys-rep"]
    assert names(tmp_path) == expected
    assert {"finished": True} not in result.emitted
    assert result.returncode == 128 + signal.SIGTERM


def test_call_record_names_the_launched_process_and_nsys(tmp_path):
    log = tmp_path / "calls"
    result = profile(tmp_path, ["-t", "cuda,nvtx", "--cpuctxsw=none", "--python-backtrace", "-o", "r_%p"],
                     "pid", env={"NRLPROF_FAKE_TOOL_LOG": str(log)})  # fmt: skip
    (record_file,) = log.glob("nsys-*.json")
    record = json.loads(record_file.read_text())
    assert record["options"] == ["-t", "cuda,nvtx", "--cpuctxsw=none", "--python-backtrace", "-o", "r_%p"]
    assert record["command"] == [sys.executable, str(UNDER_NSYS), "pid"]
    assert record["pid"] == result.emitted[0]["pid"] != record["nsys_pid"]
    assert record_file.name == f"nsys-{record['nsys_pid']}.json"
    assert record["time"] <= time.time() and isinstance(record["env"], dict)


def test_percent_p_is_the_pid_nsys_launched_also_through_a_wrapper(tmp_path):
    options = ["-o", "w_%p", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    # A wrapper that stays (as `uv run` does): the report is named after the wrapper, not the python under it.
    forked = profile(tmp_path, options, "one_range", wrapper=lambda cmd: ["/bin/sh", "-c", " ".join(cmd) + "; exit $?"])
    python_pid, wrapper_pid = forked.emitted[0]["pid"], forked.emitted[0]["parent"]
    assert wrapper_pid != python_pid
    assert names(tmp_path) == [f"w_{wrapper_pid}.nsys-rep"]
    report = read_report(tmp_path / f"w_{wrapper_pid}.nsys-rep")
    assert report["launched_pid"] == wrapper_pid and report["start_caller"]["pid"] == python_pid
    # A wrapper that execs the program: one process, one pid.
    for path in tmp_path.glob("w_*"):
        path.unlink()
    execed = profile(tmp_path, options, "one_range", wrapper=lambda cmd: ["/bin/sh", "-c", "exec " + " ".join(cmd)])
    assert names(tmp_path) == [f"w_{execed.emitted[0]['pid']}.nsys-rep"]


def test_stop_blocks_until_the_report_is_written(tmp_path):
    options = ["-o", "slow_%p", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    fast = profile(tmp_path, options, "timed_stop")
    assert fast.emitted[0]["code"] == 0 and fast.emitted[0]["exists"] is True
    for path in tmp_path.glob("slow_*"):
        path.unlink()
    slow = profile(tmp_path, options, "timed_stop", env={"NRLPROF_STANDIN_STOP_DELAY_S": "1.5"})
    assert slow.emitted[0]["exists"] is True
    assert slow.emitted[0]["blocked_s"] >= 1.5


def test_nvtx_ranges_of_the_real_nvtx_package_inside_the_range_are_in_the_report(tmp_path):
    result = profile(tmp_path, ["-o", "n", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"],
                     "nvtx_ranges")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = read_report(tmp_path / "n.nsys-rep")
    other_tid, main_tid = result.emitted[0]["tid"], result.emitted[1]["tid"]
    ranges = {r["message"]: r for r in report["nvtx_ranges"]}
    assert sorted(ranges) == ["on another thread", "open at stop", "policy.train [step 3]", "step 3"]
    assert ranges["step 3"]["domain"] == "nrlprof" and ranges["step 3"]["kind"] == "start_end"
    assert ranges["policy.train [step 3]"]["kind"] == "push_pop"
    assert ranges["on another thread"]["domain"] == "other" and ranges["on another thread"]["tid"] == other_tid
    assert ranges["step 3"]["tid"] == main_tid
    assert report["start_ns"] < ranges["step 3"]["start_ns"] < ranges["step 3"]["end_ns"] < report["stop_ns"]
    assert ranges["open at stop"]["end_ns"] is None
    assert {d["name"] for d in report["nvtx_domains"]} == {"nrlprof", "other"}


def test_without_nvtx_in_the_traces_no_ranges_are_recorded(tmp_path):
    profile(tmp_path, ["-t", "cuda", "-o", "n", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"],
            "nvtx_ranges")  # fmt: skip
    assert read_report(tmp_path / "n.nsys-rep")["nvtx_ranges"] == []


def test_importer_failure_leaves_only_the_qdstrm(tmp_path):
    result = profile(tmp_path, ["-o", "f_%p", "--capture-range=cudaProfilerApi", "--capture-range-end=repeat:2"],
                     "cycles", env={"NRLPROF_STANDIN_IMPORT_FAIL": "1"})  # fmt: skip
    pid = result.emitted[0]["pid"]
    assert result.returncode == 0
    assert names(tmp_path) == [f"f_{pid}.1.qdstrm", f"f_{pid}.2.qdstrm"]
    assert "Importer error status" in result.stderr
    assert json.loads((tmp_path / f"f_{pid}.1.qdstrm").read_text())["range_index"] == 1


def test_child_killed_inside_a_range_leaves_no_report(tmp_path):
    result = profile(tmp_path, ["-o", "k", "--capture-range=cudaProfilerApi", "--capture-range-end=repeat"],
                     "killed_in_second_range")  # fmt: skip
    assert result.returncode == 128 + signal.SIGKILL
    assert names(tmp_path) == ["k.1.nsys-rep"], "the closed range is kept, the killed one is lost"
    assert "killed by signal 9" in result.stderr


def test_application_exit_inside_a_range_finishes_it_and_no_capture_range_captures_the_whole_run(tmp_path):
    exits = profile(tmp_path, ["-o", "e", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"],
                    "exit_in_range")  # fmt: skip
    assert exits.returncode == 3
    assert read_report(tmp_path / "e.nsys-rep")["stopped_by"] == "exit"
    whole = profile(tmp_path, ["-o", "whole"], "mark_and_stop")
    report = read_report(tmp_path / "whole.nsys-rep")
    assert (report["started_by"], report["stopped_by"]) == ("launch", "exit")
    assert [m["message"] for m in report["nvtx_marks"]] == ["m"] and whole.emitted == [{"code": 0}]


def test_sigterm_to_nsys_reaches_the_application(tmp_path):
    nsys = subprocess.Popen(
        [sys.executable, str(NSYS), "profile", "-o", "t", "--capture-range=cudaProfilerApi", sys.executable,
         str(UNDER_NSYS), "waits_for_sigterm"], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    while not (tmp_path / "ready").exists():
        time.sleep(0.05)
    nsys.send_signal(signal.SIGTERM)
    out, _ = nsys.communicate()
    assert 'EMIT {"got": "SIGTERM"}' in out and nsys.returncode == 0
    assert read_report(tmp_path / "t.nsys-rep")["stopped_by"] == "exit"


def test_existing_report_needs_force_overwrite(tmp_path):
    (tmp_path / "same.nsys-rep").write_text("an older report")
    refused = profile(tmp_path, ["-o", "same"], "ran")
    assert refused.returncode == 1 and refused.emitted == [] and "--force-overwrite" in refused.stderr
    assert (tmp_path / "same.nsys-rep").read_text() == "an older report"
    forced = profile(tmp_path, ["-o", "same", "-f", "true"], "ran")
    assert forced.emitted == [{"ran": True}] and read_report(tmp_path / "same.nsys-rep")["stopped_by"] == "exit"


def test_export_sqlite_reads_like_a_real_export(tmp_path):
    profile(tmp_path, ["-o", "x", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"], "nvtx_ranges")
    export = [sys.executable, str(NSYS), "export", "--type", "sqlite", "-o", str(tmp_path / "x.sqlite")]
    first = subprocess.run([*export, str(tmp_path / "x.nsys-rep")], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(tmp_path / "x.sqlite") as db:
        rows = db.execute(
            "SELECT s.value, e.eventType, e.start, e.end, d.text FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId"
            " JOIN NVTX_EVENTS d ON d.eventType = 75 AND d.domainId = e.domainId ORDER BY e.start"
        ).fetchall()
        assert db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (0,)
        assert db.execute("SELECT name FROM ENUM_NSYS_EVENT_TYPE WHERE id = 59").fetchone() == ("NvtxPushPopRange",)
    by_text = {text: (kind, start, end, domain) for text, kind, start, end, domain in rows}
    assert by_text["step 3"][0] == 60 and by_text["step 3"][3] == "nrlprof"
    assert by_text["policy.train [step 3]"][0] == 59
    assert by_text["on another thread"][3] == "other"
    assert 0 < by_text["step 3"][1] < by_text["step 3"][2]
    assert by_text["open at stop"][2] is None
    again = subprocess.run([*export, str(tmp_path / "x.nsys-rep")], capture_output=True, text=True, check=False)
    assert again.returncode == 1 and "--force-overwrite" in again.stderr
    forced = subprocess.run([*export, "--force-overwrite", "true", str(tmp_path / "x.nsys-rep")], check=False)
    assert forced.returncode == 0


def test_version_and_unsupported_commands():
    version = subprocess.run([sys.executable, str(NSYS), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("NVIDIA Nsight Systems version ")
    stats = subprocess.run([sys.executable, str(NSYS), "stats", "x.nsys-rep"], capture_output=True, text=True)
    assert stats.returncode == 1 and "not supported" in stats.stderr


def test_output_name_patterns_host_environment_and_percent(tmp_path):
    result = profile(tmp_path, ["--output", "p_%h_%q{STANDIN_TAG}_%%_%p"], "pid",
                     env={"STANDIN_TAG": "tagged"})  # fmt: skip
    host = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()
    assert names(tmp_path) == [f"p_{host}_tagged_%_{result.emitted[0]['pid']}.nsys-rep"]


def test_without_output_reports_are_numbered_report1_report2(tmp_path):
    for _ in range(2):
        profile(tmp_path, [], "nothing")
    assert names(tmp_path) == ["report1.nsys-rep", "report2.nsys-rep"]


def test_libraries_built_concurrently_into_one_cache(tmp_path):
    build = "import sys; sys.path.insert(0, sys.argv[1]); from nsys_standin import build; print(build.library_dir())"
    env = {**os.environ, "NRLPROF_STANDIN_CACHE": str(tmp_path / "cache")}
    builders = [
        subprocess.Popen([sys.executable, "-c", build, str(NSYS.parent.parent)], env=env, stdout=subprocess.PIPE,
                         text=True)
        for _ in range(4)
    ]  # fmt: skip
    outputs = {b.communicate()[0].strip() for b in builders}
    assert [b.returncode for b in builders] == [0] * 4 and len(outputs) == 1
    (directory,) = outputs
    assert sorted(os.listdir(directory)) == [
        "libcudart.so", "libcudart.so.12", "libcudart.so.13", "libnvtx_standin_injection.so"
    ]  # fmt: skip
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [Path(directory).name], "no build left behind"


def test_bad_command_lines_are_refused_with_a_message(tmp_path):
    for options, expected in (
        (["--capture-range-end=repeat-shutdown"], "repeat-shutdown needs a count"),
        (["--capture-range-end=repeat:0"], "positive integer"),
        (["--capture-range=nvtx"], "--capture-range=nvtx"),
        (["-f", "maybe"], "expected true or false"),
    ):
        result = profile(tmp_path, options, "ran")
        assert result.returncode == 1 and expected in result.stderr and result.emitted == []
    not_a_report = tmp_path / "plain.nsys-rep"
    not_a_report.write_text("{}")
    export = subprocess.run([sys.executable, str(NSYS), "export", "--type=sqlite", str(not_a_report)],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert export.returncode == 1 and "not an nsys stand-in report" in export.stderr


def test_start_while_open_and_stop_with_none_open_succeed_and_do_nothing(tmp_path):
    result = profile(tmp_path, ["-o", "o", "--capture-range=cudaProfilerApi", "--capture-range-end=repeat"],
                     "unpaired_calls")  # fmt: skip
    assert result.emitted == [{"codes": [0, 0, 0, 0, 0]}]
    assert names(tmp_path) == ["o.1.nsys-rep"]
    report = read_report(tmp_path / "o.1.nsys-rep")
    assert report["stop_ns"] - report["start_ns"] >= 200_000_000, "the range runs from the first start"


def test_work_dirs_are_removed_also_those_of_killed_stand_ins(tmp_path):
    import tempfile

    # Above the kernel's largest pid (2**22): a stand-in that no longer runs.
    stale = Path(tempfile.gettempdir()) / f"nsys-standin-{2**22 + 12345}-left"
    stale.mkdir(exist_ok=True)
    (tmp_path / "same.nsys-rep").write_text("old")
    refused = profile(tmp_path, ["-o", "same", "--capture-range=cudaProfilerApi"], "nothing")
    assert refused.returncode == 1 and not stale.exists()
    owners = [p.name.split("-")[2] for p in Path(tempfile.gettempdir()).glob("nsys-standin-*-*")]
    assert [o for o in owners if not Path(f"/proc/{o}").exists()] == [], "the refused run removed its work dir"
    ran = profile(tmp_path, ["-o", "ran"], "standin_socket")
    assert not Path(ran.emitted[0]["socket"]).parent.exists()


def test_each_process_opens_its_own_range_and_the_last_stop_writes_one_report_of_all(tmp_path):
    options = ["-o", "tree_%p", "--capture-range=cudaProfilerApi", "--capture-range-end=repeat:1"]
    result = profile(tmp_path, options, "parent_of_a_child", env={"NRLPROF_STANDIN_STOP_DELAY_S": "3"})
    assert result.returncode == 0, result.stderr
    (run,) = result.emitted
    assert run["child_stop_s"] < 1.5, "the child's stop with the parent's range still open writes nothing"
    assert not any(name.endswith(".nsys-rep") for name in run["before"])
    report = read_report(tmp_path / f"tree_{run['pid']}.1.nsys-rep")
    ranges = {r["pid"]: r for r in report["process_ranges"]}
    assert sorted(ranges) == sorted([run["pid"], run["child"]])
    assert ranges[run["pid"]]["start_ns"] < ranges[run["child"]]["start_ns"] < ranges[run["child"]]["stop_ns"]
    assert report["stop_caller"]["pid"] == run["pid"]
    work = {r["message"]: r["pid"] for r in report["nvtx_ranges"] if r["domain"] == "engine"}
    assert work == {"parent work": run["pid"], "child work": run["child"]}, "one report holds every process"


def test_a_process_that_dies_with_its_range_open_does_not_hold_the_capture(tmp_path):
    options = ["-o", "dead_%p", "--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    result = profile(tmp_path, options, "parent_of_a_dying_child")
    (run,) = result.emitted
    assert run["report"] is True, "the parent's stop, the last of the live ranges, wrote the report"
    report = read_report(tmp_path / f"dead_{run['pid']}.nsys-rep")
    ranges = sorted((r["start_ns"], r["pid"], r["stopped_by"]) for r in report["process_ranges"])
    assert [(pid, stopped_by) for _, pid, stopped_by in ranges] == [
        (run["pid"], "cudaProfilerStop"),
        (run["child"], "cudaProfilerStop"),
        (run["child"], "exit"),
    ], "the child's second range closed when it died"


def test_launch_session_writes_each_collection_started_in_it_when_it_ends(tmp_path):
    """As nsys 2025.3 did on an H200: `nsys launch` collects nothing; each `nsys start -c cudaProfilerApi
    --capture-range-end=stop` collects the next capture range, whose report is there when cudaProfilerStop returns,
    while the application runs on; `nsys stop` ends a collection started without a range."""
    command = [sys.executable, str(NSYS), "launch", "--session-new=s1", "-t", "cuda,nvtx", sys.executable,
               str(UNDER_NSYS), "session_windows", str(NSYS)]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    result.emitted = [json.loads(line[5:]) for line in result.stdout.splitlines() if line.startswith("EMIT ")]
    first, window1, window2, idle, now = result.emitted[0], result.emitted[2], result.emitted[4], *result.emitted[5:7]
    assert first["before_start"] == [0, 0] and result.emitted[1]["start"] == [0, ""]
    assert window1["reports"] == ["w_1.nsys-rep"] and window2["reports"] == ["w_1.nsys-rep", "w_2.nsys-rep"]
    assert idle["idle_stop"] == [1, "Error: no collection is active in session 's1'."]
    assert now["now"] == [0, ""] and now["twice"] == [1, "Error: a collection is already active in session 's1'."]
    assert result.emitted[7]["stop"] == [0, ""] and "now.nsys-rep" in result.emitted[7]["reports"]
    for name, mark in (("w_1", "window 1"), ("w_2", "window 2"), ("now", "collected now")):
        report = read_report(tmp_path / f"{name}.nsys-rep")
        assert [r["message"] for r in report["nvtx_marks"]] == [mark], name
    assert not list(tmp_path.glob("*.qdstrm"))


def test_start_and_stop_name_the_session_they_want(tmp_path):
    missing = subprocess.run([sys.executable, str(NSYS), "start", "--session=nowhere", "-o", "x"],
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert missing.returncode == 1 and "the session 'nowhere' was not found" in missing.stderr
    launch = subprocess.run([sys.executable, str(NSYS), "launch", sys.executable, "-c", "pass"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert launch.returncode == 1 and "--session-new" in launch.stderr
