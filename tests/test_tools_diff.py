"""nrlprof diff: two runs' per-step figures side by side, from directories or `summary --json` files."""

from __future__ import annotations

import json

from helpers.traces import gpu_step_trace, write_json

from nrlprof.cli import main


def make_runs(tmp_path, capsys):
    """Run A: rank 0 with a 1 ms step 3. Run B: rank 0 with a 1.5 ms step 3, and rank 1."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_json(a / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_step_trace())
    write_json(b / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_step_trace(step3_us=1500.0))
    write_json(b / "policy.rank1.steps3-4.1001.pt.trace.json", gpu_step_trace(1, 1001))
    assert main(["summary", str(b), "--json"]) == 0
    b_json = tmp_path / "b.json"
    b_json.write_text(capsys.readouterr().out)
    return a, b_json


def test_diff_of_a_directory_and_a_summary_file(tmp_path, capsys):
    a, b_json = make_runs(tmp_path, capsys)
    assert main(["diff", str(a), str(b_json), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {(r["worker"], r["rank"], r["step"]): r["figures"] for r in result["rows"]}
    assert set(rows) == {("policy", 0, 3), ("policy", 0, 4)}
    assert rows[("policy", 0, 3)]["wall_ms"] == {"a": 1.0, "b": 1.5, "change": 0.5, "change_pct": 50.0}
    # the kernels did not change; step 3 (1000-2500 in B) now also holds the 50 us kernel at 2120: idle 0.89 ms
    assert rows[("policy", 0, 3)]["gpu_kernel_ms"]["change"] == 0.0
    assert rows[("policy", 0, 3)]["gpu_idle_ms"] == {"a": 0.44, "b": 0.89, "change": 0.45, "change_pct": 102.3}
    assert rows[("policy", 0, 4)]["wall_ms"]["change"] == 0.0
    assert result["only_in_b"] == [
        {"worker": "policy", "rank": 1, "step": 3},
        {"worker": "policy", "rank": 1, "step": 4},
    ]
    assert result["only_in_a"] == []


def test_diff_as_text(tmp_path, capsys):
    a, b_json = make_runs(tmp_path, capsys)
    assert main(["diff", str(a), str(b_json)]) == 0
    out = capsys.readouterr().out
    wall = next(line for line in out.splitlines() if "policy rank 0" in line and " wall ms " in line)
    assert [cell.strip() for cell in wall.split("│")[1:-1]] == ["policy rank 0", "3", "wall ms", "1", "1.5", "+0.5",
                                                                "+50.0%"]  # fmt: skip
    assert "only in B: policy rank 1 step 3" in out


def test_diff_refuses_bad_input(tmp_path, capsys):
    a, _ = make_runs(tmp_path, capsys)
    missing = tmp_path / "missing"
    assert main(["diff", str(a), str(missing)]) == 2
    assert capsys.readouterr().err == f"nrlprof diff: {missing}: no such file or directory\n"
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["diff", str(tmp_path / "bad.json"), str(a)]) == 2
    assert "not a JSON file" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["diff", str(a), str(tmp_path / "list.json")]) == 2
    assert "not a summary" in capsys.readouterr().err
    (tmp_path / "steps.json").write_text(json.dumps({"format": 1, "workers": [{"worker": "p", "steps": {"x": 1}}]}))
    assert main(["diff", str(a), str(tmp_path / "steps.json")]) == 2
    assert "step 'x' is malformed" in capsys.readouterr().err


def test_diff_recognises_a_summary_of_another_format(tmp_path, capsys):
    a, b_json = make_runs(tmp_path, capsys)
    current = json.loads(b_json.read_text())
    assert current["format"] == 1 and next(iter(current)) == "format"
    for written, said in ((None, "no format key"), (2, "format 2"), ("1", "format '1'")):
        old = {k: v for k, v in current.items() if k != "format"} | ({} if written is None else {"format": written})
        (tmp_path / "old.json").write_text(json.dumps(old))
        assert main(["diff", str(a), str(tmp_path / "old.json")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"nrlprof diff: {tmp_path / 'old.json'}: a summary of {said}") and "reads format 1" in err
