"""Every command against the one exit-code table (nrlprof.exit_codes): 0 done, 1 done in part (an input skipped
or every one, nothing found, a check that found a problem), 2 bad input. Each row runs the command as a user
would, through `nrlprof.cli.main`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.traces import gpu_trace, write_json

from nrlprof import cli, exit_codes
from nrlprof.tools.check.doctor import ERROR, WARNING, DoctorReport, Problem

OK, PARTIAL, BAD_INPUT = exit_codes.OK, exit_codes.PARTIAL, exit_codes.BAD_INPUT
CAPTURE_TORCH = ["capture", "--workers", "*", "--backend", "torch", "--steps", "2"]
SESSION = "session_2026-11-24_10-00-00_000001_42"


def run_dir(root: Path, broken: bool = False, only_broken: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if not only_broken:
        write_json(root / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    if broken or only_broken:
        (root / "policy.rank1.steps3-4.1001.pt.trace.json").write_text('{"traceEvents": [{"ph": ')
    return root


def ray_temp(root: Path, with_manifest: bool) -> Path:
    logs = root / "ray" / SESSION / "logs" / "nrlprof"
    logs.mkdir(parents=True)
    if with_manifest:
        (logs / "manifest-h-42.jsonl").write_text(json.dumps({"backend": "torch", "worker": "w", "files": []}) + "\n")
        (logs / "manifest-h-42.jsonl").chmod(0o644)
    return root


def collect(temp: Path) -> list[str]:
    """`collect --local` of the Ray temp dir under `temp`."""
    return ["collect", "--local", "--temp-dir", str(temp / "ray")]


def rows(tmp: Path) -> list[tuple[str, list[str], dict[str, str], int]]:
    """(what, argv, environment, expected status), one command after the other."""
    out = tmp / "out"
    out.mkdir()
    good, partial, skipped_all = run_dir(tmp / "good"), run_dir(tmp / "partial", broken=True), \
        run_dir(tmp / "none", only_broken=True)  # fmt: skip
    missing = str(tmp / "missing")
    nsys = {"NRL_NSYS_WORKER_PATTERNS": "*policy*"}
    return [
        ("summary ok", ["summary", str(good)], {}, OK),
        ("summary, an input skipped", ["summary", str(partial)], {}, PARTIAL),
        ("summary, every input skipped", ["summary", str(skipped_all)], {}, PARTIAL),
        ("summary, no such directory", ["summary", missing], {}, BAD_INPUT),
        ("explain ok", ["explain", str(good)], {}, OK),
        ("explain, an input skipped", ["explain", str(partial)], {}, PARTIAL),
        ("explain, nothing nrlprof wrote", ["explain", str(out)], {}, PARTIAL),
        ("explain, no such directory", ["explain", missing], {}, BAD_INPUT),
        ("explain, a bad phase rule", ["explain", str(good), "--phases", "decode=*gen*"], {}, BAD_INPUT),
        ("explain, a bad NRL_PHASES", ["explain", str(good)], {"NRL_PHASES": "rollout"}, BAD_INPUT),
        ("report ok", ["report", str(good), "-o", str(out / "a.html")], {}, OK),
        ("report, an input skipped", ["report", str(partial), "-o", str(out / "b.html")], {}, PARTIAL),
        ("report, unwritable output", ["report", str(good), "-o", str(tmp / "no" / "r.html")], {}, BAD_INPUT),
        ("merge ok", ["merge", str(good), "-o", str(out / "a.json.gz")], {}, OK),
        ("merge, an input skipped", ["merge", str(partial), "-o", str(out / "b.json.gz")], {}, PARTIAL),
        ("merge, every input skipped", ["merge", str(skipped_all), "-o", str(out / "c.json.gz")], {}, PARTIAL),
        ("merge, no such input", ["merge", missing, "-o", str(out / "d.json.gz")], {}, BAD_INPUT),
        ("diff ok", ["diff", str(good), str(good)], {}, OK),
        ("diff, a run skipped an input", ["diff", str(good), str(partial)], {}, PARTIAL),
        ("diff, no such run", ["diff", str(good), missing], {}, BAD_INPUT),
        ("collect here ok", [*collect(ray_temp(tmp / "t1", True)), "--to", str(out / "c1")], {}, OK),
        (
            "collect here, nothing to take",
            [*collect(ray_temp(tmp / "t2", False)), "--to", str(out / "c2")],
            {},
            PARTIAL,
        ),
        (
            "collect here, no such session",
            [*collect(tmp / "t1"), "--session", "session_2000-01-01_00-00-00_000001_1", "--to", str(out / "c3")],
            {},
            BAD_INPUT,
        ),
        ("plan ok", ["plan"], {**nsys, "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}, OK),
        (
            "plan, a misspelled variable",
            ["plan"],
            {**nsys, "NRL_NSYS_PROFILE_STEP_RANGE": "3:5", "NRL_NSYS_RANK": "0"},
            PARTIAL,
        ),
        ("plan, a bad value", ["plan"], {**nsys, "NRL_NSYS_PROFILE_STEP_RANGE": "3-5"}, BAD_INPUT),
        ("doctor, no cluster at the address", ["doctor", "--address", "127.0.0.1:1"], {}, BAD_INPUT),
        ("capture, no cluster at the address", ["capture", "--address", "127.0.0.1:1", "--list"], {}, BAD_INPUT),
        ("capture, no worker pattern", ["capture", "--backend", "torch", "--steps", "2"], {}, BAD_INPUT),
        ("capture, a bad rank", [*CAPTURE_TORCH, "--ranks", "x"], {}, BAD_INPUT),
        ("patch-ray --check, no Ray there", ["patch-ray", "--check", "--ray-dir", missing], {}, BAD_INPUT),
    ]


def test_every_command_against_the_table(tmp_path, monkeypatch, capsys):
    for name in [n for n in os.environ if n.startswith(("NRL_", "RAY_ADDRESS"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nsys: its reports are not what these rows are about
    failures = []
    for what, argv, environ, expected in rows(tmp_path):
        with monkeypatch.context() as scope:
            for key, value in environ.items():
                scope.setenv(key, value)
            try:
                status = cli.main(argv)
            except SystemExit as exit:
                status = exit.code
        capsys.readouterr()
        if status != expected:
            failures.append(f"{what}: exit {status}, expected {expected}")
    assert failures == []


def test_patch_ray_check_maps_unfixed_onto_a_problem_found(ray_dir, capsys):
    assert cli.main(["patch-ray", "--check", "--ray-dir", str(ray_dir)]) == PARTIAL
    assert "fine where the runtime-env agent loads nrlprof's fix in memory" in capsys.readouterr().err
    assert cli.main(["patch-ray", "--ray-dir", str(ray_dir)]) == OK
    assert cli.main(["patch-ray", "--check", "--ray-dir", str(ray_dir)]) == OK


@pytest.mark.parametrize(("problems", "expected"), [((), OK), ((WARNING,), OK), ((WARNING, ERROR), PARTIAL)])
def test_doctor_maps_an_error_onto_a_problem_found(problems, expected):
    report = DoctorReport(True, [], "/tmp", "3.11.0", "python")
    report.problems = [Problem(severity, "n", "something") for severity in problems]
    assert report.exit_code == expected


def test_the_table_is_in_the_help_and_each_meaning_names_its_cases():
    text = " ".join(cli.build_parser("").format_help().split())
    assert "1 done in part: an input skipped" in text and "a check that found a problem" in text
    assert "2 nothing done: bad input" in text and "an nsys option the installed nsys does not know" in text
