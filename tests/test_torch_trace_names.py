"""Names Kineto (torch 2.13) writes with a raw `"`: the traces nrlprof writes stay valid JSON, nothing dropped.

torch's Python tracer names a frame through pointers into its code object; a module body run by an import
during the window is freed before export, and its frame then carries stray bytes, a `"` at times (seen in
3 of 50 Ray workers with every torch switch on). The tests provoke the same line deterministically: code whose
file and function names hold a quote, a range name with one, a trace directory with one.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.finished import stop_and_finish
from helpers.torch_windows import torch_backend
from helpers.traces import run_dir

from nrlprof.backends.kineto_text import copy_repaired
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.cli import main
from nrlprof.config.steps import Window

QUOTED_FILE = 'we"ird/path.py'
QUOTED_FUNCTION = 'fu"n'


def one_window(backend: TorchBackend, work) -> tuple[dict, object]:
    backend.start_window(Window(2, 3), 2)
    work()
    backend.mark_step(3)
    record = stop_and_finish(backend)
    (path,) = record.files
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return json.loads(handle.read()), record


def function_with_quoted_names():
    namespace = {"torch": torch}
    exec(compile("def f():\n    return torch.ones(2) + 1\n", QUOTED_FILE, "exec"), namespace)
    function = namespace["f"]
    function.__code__ = function.__code__.replace(co_name=QUOTED_FUNCTION, co_qualname=QUOTED_FUNCTION)
    return function


def names_of(trace: dict) -> set[str]:
    return {e.get("name") for e in trace["traceEvents"]}


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_python_frame_named_with_quotes_is_kept_and_the_trace_is_valid_json(tmp_path, compress):
    backend = torch_backend(tmp_path, with_stack=True, record_shapes=True, gzip=compress)
    trace, record = one_window(backend, function_with_quoted_names())
    # torch names a Python frame "<file>(<first line>): <function>"
    assert 'we"ird/path.py(1): fu"n' in names_of(trace)
    assert record.status == "ok"
    assert record.message.startswith("torch wrote ") and "raw quote" in record.message


def test_a_gzipped_trace_is_compressed_at_the_fast_level_not_gzips_slowest_default(tmp_path):
    """The stop compresses in the worker's step: gzip.open's default (9) is ~8x slower than level 3 on a torch
    trace. gzip's header says which: XFL (byte 8) is 2 for level 9, 4 for level 1, 0 for the levels between."""
    backend = torch_backend(tmp_path, gzip=True)
    trace, record = one_window(backend, lambda: torch.ones(2) + 1)
    (path,) = record.files
    assert path.endswith(".pt.trace.json.gz") and trace["traceEvents"]
    assert Path(path).read_bytes()[8] == 0


def test_a_range_name_with_quotes_is_kept_and_kinetos_own_changes_are_the_only_ones(tmp_path):
    backend = torch_backend(tmp_path)

    def work() -> None:
        with torch.profiler.record_function('say "hi" \\ then go'):
            torch.ones(2) + 1

    trace, _ = one_window(backend, work)
    # Kineto turns a backslash into "/"; the quotes stay as they were given
    assert 'say "hi" / then go' in names_of(trace)


def test_a_trace_directory_with_a_quote_in_its_path_gives_a_valid_trace(tmp_path):
    directory = tmp_path / 'runs "a"'
    trace, record = one_window(torch_backend(directory), lambda: torch.ones(2) + 1)
    assert Path(record.files[0]).parent.parent.parent == directory
    assert 'runs "a"' in trace["traceName"]


def test_a_clean_trace_is_copied_byte_for_byte(tmp_path):
    with torch.profiler.profile(with_stack=True, record_shapes=True, profile_memory=True, with_flops=True) as profiler:
        torch.ones(8, 8) @ torch.ones(8, 8)
    path = tmp_path / "clean.json"
    profiler.export_chrome_trace(str(path))
    text = path.read_bytes()
    copy = io.BytesIO()
    assert copy_repaired(io.BytesIO(text), copy) == 0
    assert copy.getvalue() == text


KINETO_LINES = b"""{
  "traceEvents": [
  {
    "ph": "X", "cat": "python_function",
    "name": "nvtx/nvtx.py(0): "",
    "pid": 7
  },
  {
    "ph": "X", "cat": "python_function",
    "name": "lib(0): a",b"c",
    "pid": 7
  },
  {
    "ph": "M", "name": "thread_name", "pid": 7, "tid": 7,
    "args": {
      "name": "thread 7 (x"y)"
    }
  },
  {
    "ph": "X", "cat": "user_annotation",
    "name": "already \\"escaped\\" by a newer Kineto",
    "args": {"Collective name": "all\\"reduce"}
  }
  ],"traceName": "/tmp/q"d/t.json" }"""
EXPECTED_NAMES = ['nvtx/nvtx.py(0): "', 'lib(0): a",b"c', "thread_name", 'already "escaped" by a newer Kineto']


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 1 << 20])
def test_broken_names_are_repaired_wherever_a_chunk_ends(chunk_bytes):
    repaired = io.BytesIO()
    assert copy_repaired(io.BytesIO(KINETO_LINES), repaired, chunk_bytes) == 4
    trace = json.loads(repaired.getvalue())
    assert [e["name"] for e in trace["traceEvents"]] == EXPECTED_NAMES
    assert trace["traceEvents"][2]["args"]["name"] == 'thread 7 (x"y)'
    assert trace["traceName"] == '/tmp/q"d/t.json'
    assert copy_repaired(io.BytesIO(KINETO_LINES), None, chunk_bytes) == 4


def test_nrlprofs_ranges_in_a_torch_window_import_no_nvtx(tmp_path):
    """nvtx is for nsys: a torch window's ranges neither import it (120 ms on 2 cores) nor put its frames in the
    trace."""
    program = Path(__file__).parent / "programs" / "torch_window_ranges.py"
    done = subprocess.run([sys.executable, str(program), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"nvtx_imported": False, "nvtx_frames": [], "ranges": ["rollout [step 2]"]}


def test_a_trace_kineto_left_invalid_is_listed_by_summary_with_its_reason(tmp_path, capsys):
    with torch.profiler.profile() as profiler, torch.profiler.record_function('a "quoted" range'):
        torch.ones(2) + 1
    raw = tmp_path / "raw.json"
    profiler.export_chrome_trace(str(raw))
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw.read_bytes())
    root = run_dir(tmp_path, raw.read_bytes())
    assert main(["summary", str(root), "--json"]) == 1
    skipped = json.loads(capsys.readouterr().out)["skipped"]
    assert [s["path"] for s in skipped] == [str(root / "policy" / "1" / "policy.rank1.steps3-4.1001.pt.trace.json")]
    assert skipped[0]["reason"]
