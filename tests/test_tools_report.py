"""nrlprof.tools.commands.report: one self-contained HTML file that renders in a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from helpers.browser import chromium, headless
from helpers.nsys import FIXTURE, fake_nsys, nsys_run
from helpers.traces import (
    BASE_NS,
    ELEMENTWISE,
    NCCL,
    SGEMM,
    gpu_step_trace,
    gpu_trace,
    record_cpu_trace,
    truncate,
    write_json,
)

from nrlprof.cli import main
from nrlprof.errors import ToolError
from nrlprof.tools.commands.report import write_report
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.render.html import render_html


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """Two policy ranks with two windows each (3-4 and 9), the controller, and a GPU-shaped rank."""
    root = tmp_path_factory.mktemp("report_run")
    pid = os.getpid()
    for rank in (0, 1):
        for steps in ((3, 4), (9,)):
            label = "-".join(map(str, (steps[0], steps[-1]))) if len(steps) > 1 else str(steps[0])
            name = f"policy.rank{rank}.steps{label}.{pid + rank}.pt.trace.json"
            record_cpu_trace(root / "policy" / str(rank) / name, "policy", rank, steps=steps, step_sleep_s=0.03)
    record_cpu_trace(root / f"controller.steps3-4.{pid}.pt.trace.json", "controller", None, step_sleep_s=0.04)
    write_json(root / "reference" / "0" / "reference.rank0.steps3-4.77.pt.trace.json", gpu_trace(worker="reference"))
    (root / "node-b").mkdir()
    (root / "node-b" / "policy_3-4_4242.nsys-rep").write_bytes(b"fake")
    return root


def test_report_is_one_self_contained_file(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-nsys"))
    output = tmp_path / "report.html"
    write_report(run_dir, output)
    page = output.read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page and "<table>" in page
    # nothing fetched: no external script, stylesheet, image, font or frame
    assert not re.search(r"<(script|link|img|iframe)\b|@import|url\(", page)
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]
    for text in ("policy rank 0", "policy rank 1", "controller", "reference rank 0", "policy.train",
                 "ampere_sgemm_128x64_nn", "nsys not found"):  # fmt: skip
        assert text in page
    # step bands carry their step numbers, for both windows
    bands = re.findall(r"<title>policy rank 0 step (\d+): ([\d.]+) ms</title>", page)
    assert sorted(int(step) for step, _ in bands) == [3, 4, 9]
    assert all(float(ms) >= 29.5 for _, ms in bands)  # 30 ms of sleep in each step
    assert not list(tmp_path.glob(".*.tmp"))


def test_report_html_escapes_labels(tmp_path):
    trace = gpu_trace()
    trace["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "<script>alert(1)</script>",
                                 "pid": 1000, "tid": 1000, "ts": 1_000_100.0, "dur": 10.0, "args": {}})  # fmt: skip
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", trace)
    page = render_html(summarize(tmp_path, nsys=""))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_range_has_one_colour_and_one_legend_entry_across_steps(tmp_path):
    trace = gpu_trace()
    for step, ts in ((3, 1_000_100.0), (4, 1_000_300.0)):
        trace["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": f"rollout/generate [step {step}]",
                                     "pid": 1000, "tid": 1000, "ts": ts, "dur": 10.0, "args": {}})  # fmt: skip
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", trace)
    page = render_html(summarize(tmp_path, nsys=""))
    fills = set(re.findall(r'fill="(#[0-9a-f]{6})"><title>rollout/generate \[step [34]\]', page))
    assert len(fills) == 1, fills
    (legend,) = re.findall(r'<div class="legend">(.*?)</div>', page)
    assert legend.count("rollout/generate") == 1 and "[step" not in legend
    assert f'<i style="background:{fills.pop()}"></i>rollout/generate</span>' in legend


def test_bad_input_leaves_no_report(tmp_path):
    with pytest.raises(ToolError, match="no such file"):
        write_report(tmp_path / "missing", tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ToolError):
        write_report(tmp_path / "empty", tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists() and not list(tmp_path.glob(".*.tmp"))


def test_cli_exit_codes(run_dir, tmp_path, capsys):
    assert main(["report", str(run_dir / "policy"), "-o", str(tmp_path / "a.html")]) == 0
    assert (tmp_path / "a.html").exists()
    source = next((run_dir / "policy" / "1").glob("*.pt.trace.json"))
    truncate(source, tmp_path / "t" / "policy.rank1.steps3-4.9.pt.trace.json")
    write_json(tmp_path / "t" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    assert main(["report", str(tmp_path / "t"), "-o", str(tmp_path / "b.html")]) == 1
    assert "skipped" in capsys.readouterr().err and "skipped" in (tmp_path / "b.html").read_text()
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "c.html")]) == 2
    assert capsys.readouterr().err == f"nrlprof report: {tmp_path / 'missing'}: no such file or directory\n"
    assert not (tmp_path / "c.html").exists()
    assert main(["report", str(run_dir), "-o", str(tmp_path / "no" / "d.html")]) == 2
    assert capsys.readouterr().err == f"nrlprof report: {tmp_path / 'no'}: output directory does not exist\n"


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, idat = 8, {}, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IDAT":
            idat += body
        chunks.setdefault(kind, body)
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and color in (2, 6) and interlace == 0, "unexpected PNG format"
    channels = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def test_report_renders_in_headless_chromium(run_dir, tmp_path):
    browser = chromium()
    output = tmp_path / "report.html"
    write_report(run_dir, output)
    screenshot = tmp_path / "report.png"
    headless(browser, output, tmp_path / "profile", "1200,800", f"--screenshot={screenshot}")
    width, height, rows = png_pixels(screenshot.read_bytes())
    assert (width, height) == (1200, 800)
    channels = len(rows[0]) // width
    colours = {row[i : i + 3] for row in rows[::2] for i in range(0, len(row), channels * 2)}
    assert len(colours) > 50, f"only {len(colours)} colours: blank page?"
    # the timeline's coloured range bars and step bands are on screen
    saturated = sum(1 for c in colours if max(c) - min(c) > 80)
    assert saturated >= 3


def test_report_shows_nsys_tables(tmp_path):
    page = render_html(summarize(nsys_run(tmp_path), nsys=fake_nsys(tmp_path)))
    assert "Nsight Systems reports" in page and "dtensor_policy_worker_3-4_10_4242.nsys-rep" in page
    assert "ampere_sgemm_128x64_nn" in page and ":policy.train" in page
    assert "<svg" not in page  # no torch trace: no timeline


@pytest.fixture(scope="session")
def gpu_run_dir(tmp_path_factory) -> Path:
    """Two GPU-shaped policy ranks (rank 1's step 3 is slower), the real nsys export, and a manifest."""
    root = tmp_path_factory.mktemp("gpu_report_run")
    write_json(root / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_step_trace())
    write_json(root / "policy" / "1" / "policy.rank1.steps3-4.1001.pt.trace.json",
               gpu_step_trace(1, 1001, step3_us=1500.0))  # fmt: skip
    if FIXTURE.exists():
        shutil.copyfile(FIXTURE, root / "vllm_generation_worker_3_5_4242.1.sqlite")
    base_s = BASE_NS / 1e9
    records = [{"backend": "torch", "worker": "policy", "rank": rank, "window": "3-4", "status": "ok", "host": "h",
                "pid": 1000 + rank, "start_ms": 150.0 + rank, "stop_ms": 3012.5, "started_at": base_s,
                "stopped_at": base_s + 0.004, "files": [f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json"]}
               for rank in (0, 1)]  # fmt: skip
    (root / ".nrlprof").mkdir()
    (root / ".nrlprof" / "manifest-h-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def test_report_shows_the_gpu_lane_overhead_and_slowest_rank(gpu_run_dir):
    import html as html_lib

    page = render_html(summarize(gpu_run_dir, nsys=""))
    # GPU lanes: every activity of the two ranks (7 each), hover text = the full kernel name
    gpu_titles = re.findall(r'<rect class="gpu"[^>]*fill="(#[0-9a-f]+)"><title>([^<]*)</title>', page)
    torch_names = {html_lib.escape(n) for n in (ELEMENTWISE, SGEMM, NCCL, "Memcpy HtoD", "Memset (Device)")}
    torch_titles = [(fill, t) for fill, t in gpu_titles if t.rsplit(": ", 1)[0] in torch_names]
    assert len(torch_titles) == 14
    assert (("#dc2626", f"{html_lib.escape(NCCL)}: 100.0 us")) in torch_titles
    assert ("#1d4ed8", f"{html_lib.escape(ELEMENTWISE)}: 200.0 us") in torch_titles
    # kernels tables: the short name shown, the full one as hover text
    assert f'<td class="l" title="{html_lib.escape(ELEMENTWISE)}">vectorized_elementwise_kernel</td>' in page
    # step boundaries share one clock: both ranks' step 3 starts at the same x
    starts = re.findall(r'<line x1="([\d.]+)" y1="(\d+)"[^>]*stroke-dasharray', page)
    xs = {}
    for x, y in starts:
        xs.setdefault(int(y), []).append(x)
    first_two_lanes = [xs[y] for y in sorted(xs)][:2]
    assert first_two_lanes[0][0] == first_two_lanes[1][0]
    # profiler start/stop flags and the overhead table
    assert "profiler start (torch, window 3-4): 150.0 ms of overhead, not workload" in page
    assert "profiler stop (torch, window 3-4): 3,012.5 ms of overhead, not workload" in page
    assert "Profiler overhead" in page and "<td>151.0</td>" in page
    # per-step GPU figures and the one line per step naming the straggler
    assert "GPU per step" in page and "<td>56.00</td><td>0.44</td><td>0.10</td><td>0.06</td>" in page
    (step3,) = re.findall(r'<p class="straggler">(step 3: .*)</p>', page)
    # rank 1: 1.5 ms against a median of 1.25; busy 1100-1500, 1600-1760, 2120-2170 of 1000-2500: 41%
    assert "policy rank 1 1.5 ms = 1.20x median of 2 rank(s), GPU busy 41%" in step3
    assert ("#16a34a", "Memset (Device): 10.0 us") in torch_titles


def test_gpu_report_renders_in_headless_chromium(gpu_run_dir, tmp_path):
    browser = chromium()
    output = tmp_path / "report.html"
    write_report(gpu_run_dir, output)
    screenshot = tmp_path / "report.png"
    headless(browser, output, tmp_path / "profile", "1200,900", f"--screenshot={screenshot}")
    width, _, rows = png_pixels(screenshot.read_bytes())
    channels = len(rows[0]) // width
    seen = {row[i : i + 3] for row in rows for i in range(0, len(row), channels)}

    def near(rgb: tuple[int, int, int]) -> bool:
        return any(all(abs(a - b) <= 6 for a, b in zip(c, rgb, strict=True)) for c in seen)

    # the GPU lane's compute (blue), NCCL (red) and copy (green) bars, and the grey profiler flags
    assert near((0x1D, 0x4E, 0xD8)) and near((0xDC, 0x26, 0x26)) and near((0x16, 0xA3, 0x4A))
    assert near((0x6B, 0x72, 0x80))
