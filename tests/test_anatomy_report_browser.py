"""The step anatomy's swimlanes in the HTML report, laid out by headless Chromium: one lane per worker group,
every phase bar inside its step and placed by its start time."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from helpers.browser import chromium, headless

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines
from nrlprof.tools.commands.report import write_report

MS = 1_000_000
T0 = 1_800_000_000_000 * MS // 1000
JOB = "02000000"
NODE = "cc" * 28
GROUPS = {"generator": 2, "reference": 1, "trainer": 2}  # worker group -> ranks
STEP_MS = {1: 600, 2: 900, 3: 600}
# Per step: (group, method, start ms from the step's start, duration ms); every rank runs the same span.
PHASES = {
    1: [("generator", "generate", 20, 300), ("reference", "logprobs", 330, 100), ("trainer", "train", 440, 150)],
    2: [("generator", "generate", 20, 600), ("reference", "logprobs", 630, 100), ("trainer", "train", 740, 150)],
    3: [("generator", "generate", 20, 300), ("reference", "logprobs", 330, 100), ("trainer", "train", 440, 150)],
}
# Reads every lane label, step line and phase bar where the browser laid it out.
LAYOUT_SCRIPT = """<script>
const box = (e) => { const b = e.getBoundingClientRect(); return {left: b.left, right: b.right, top: b.top,
  bottom: b.bottom, hit: document.elementFromPoint((b.left + b.right) / 2, (b.top + b.bottom) / 2) === e}; };
const svg = document.querySelector("svg.anatomy");
const layout = {
  lanes: [...svg.querySelectorAll("text[data-lane]")].map((e) => ({name: e.textContent, ...box(e)})),
  steps: [...svg.querySelectorAll("line[data-step]")].map((e) => ({step: e.dataset.step, ...box(e)})),
  bars: [...svg.querySelectorAll("rect[data-worker]")].map((e) => ({worker: e.dataset.worker,
    step: e.dataset.step, ...box(e)})),
  svg: box(svg),
};
const out = document.createElement("pre");
out.id = "layout";
out.textContent = JSON.stringify(layout);
document.body.appendChild(out);
</script>"""


def actor_id(n: int) -> str:
    return f"{n:024x}{JOB}"


def write_run(root: Path) -> None:
    run = root / "step_anatomy" / "run-20270101T000000Z-7"
    run.mkdir(parents=True)
    append_lines(run / META_FILE, [{"job_id": JOB, "driver_node_id": NODE}])
    actors, ids = [], {}
    for group, ranks in GROUPS.items():
        for rank in range(ranks):
            ids[(group, rank)] = len(actors) + 1
            actors.append({"actor_id": actor_id(len(actors) + 1), "worker": group, "rank": rank, "class": group})
    append_lines(run / ACTORS_FILE, actors)
    marks, tasks, begin = [], [], T0
    for step, wall_ms in STEP_MS.items():
        marks.append({"step": step, "t_ns": begin})
        for group, method, start_ms, dur_ms in PHASES[step]:
            for rank in range(GROUPS[group]):
                n = ids[(group, rank)]
                start = begin + start_ms * MS
                task = {"task_id": f"{step:04x}{n:012x}" + actor_id(n), "actor_id": actor_id(n), "kind": "call"}
                task |= {"class": group, "method": method, "start_ns": start, "end_ns": start + dur_ms * MS}
                task |= {"node_id": NODE, "pid": n, "parent_task_id": "ff" * 20 + JOB, "submitted_ns": start - MS}
                tasks.append(task | {"running_ns": start, "failed": False})
        begin += wall_ms * MS
    append_lines(run / STEPS_FILE, [*marks, {"finish": True, "t_ns": begin}])
    append_lines(run / TASKS_FILE, tasks)


def browser_layout(report: Path, tmp_path: Path) -> dict:
    browser = chromium()
    probe = tmp_path / "probe.html"
    page = report.read_text()
    assert page.count("</body>") == 1
    probe.write_text(page.replace("</body>", LAYOUT_SCRIPT + "</body>"))
    dom = headless(browser, probe, tmp_path / "profile", "1400,4000", "--dump-dom", text=True).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found, "the browser did not run the layout probe"
    return json.loads(html.unescape(found.group(1)))


def test_swimlanes_one_per_worker_group_with_steps_aligned_in_chromium(tmp_path):
    write_run(tmp_path / "job")
    report = tmp_path / "report.html"
    write_report(tmp_path / "job", report)
    layout = browser_layout(report, tmp_path)

    lanes = layout["lanes"]
    assert [lane["name"] for lane in lanes] == sorted(GROUPS)
    tops = [lane["top"] for lane in lanes]
    assert tops == sorted(tops) and len(set(tops)) == len(GROUPS), "lanes overlap"
    assert all(lane["hit"] for lane in lanes), "a lane label is hidden"

    bars = layout["bars"]
    # One bar per phase: the ranks of a group share it.
    assert sorted((b["worker"], int(b["step"])) for b in bars) == sorted(
        (group, step) for step, phases in PHASES.items() for group, *_ in phases
    )
    assert all(b["hit"] for b in bars), "a phase bar is covered or off screen"
    # Each group's bars sit in one band, below its label and above the next group's.
    lane_top = {lane["name"]: lane["top"] for lane in lanes}
    for group in GROUPS:
        rows = {(round(b["top"]), round(b["bottom"])) for b in bars if b["worker"] == group}
        assert len(rows) == 1, f"{group}'s bars are not on one lane: {rows}"
    band = sorted(((b["top"], b["worker"]) for b in bars), key=lambda item: item[0])
    assert [w for _, w in band] == sorted((w for _, w in band), key=lambda w: lane_top[w])

    # The steps side by side on one time axis: step lines in order, as far apart as the steps are long.
    lines = {int(line["step"]): line["left"] for line in layout["steps"]}
    assert sorted(lines) == sorted(STEP_MS)
    px_per_ms = (lines[2] - lines[1]) / STEP_MS[1]
    assert px_per_ms > 0
    assert lines[3] - lines[2] == pytest.approx(STEP_MS[2] * px_per_ms, abs=1.5)
    ends = {step: lines.get(step + 1, lines[step] + STEP_MS[step] * px_per_ms) for step in STEP_MS}
    for bar in bars:
        step = int(bar["step"])
        group = bar["worker"]
        start_ms, dur_ms = next((s, d) for g, _, s, d in PHASES[step] if g == group)
        # Inside its step, placed and sized by its own figures (a pixel of rounding either way).
        assert lines[step] - 1 <= bar["left"] and bar["right"] <= ends[step] + 1, (group, step)
        assert bar["left"] - lines[step] == pytest.approx(start_ms * px_per_ms, abs=1.5), (group, step)
        assert bar["right"] - bar["left"] == pytest.approx(dur_ms * px_per_ms, abs=1.5), (group, step)
    # Step 2's longer generate pushes the reference and trainer bars right by the same amount in every lane.
    shift = {
        group: next(b["left"] for b in bars if b["worker"] == group and b["step"] == "2") - lines[2]
        for group in ("reference", "trainer")
    }
    first = {
        group: next(b["left"] for b in bars if b["worker"] == group and b["step"] == "1") - lines[1]
        for group in ("reference", "trainer")
    }
    assert shift["reference"] - first["reference"] == pytest.approx(300 * px_per_ms, abs=1.5)
    assert shift["trainer"] - first["trainer"] == pytest.approx(300 * px_per_ms, abs=1.5)
