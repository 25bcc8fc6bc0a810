"""Checks that tell apart code the mutation run changed unseen: window membership, long step numbers, the memory
variables, repeat counts, removed nsys defaults, the steps label."""

from __future__ import annotations

import pytest

from nrlprof.config.env import plan_from_env
from nrlprof.errors import ConfigError

NSYS = {"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}


def test_only_integer_steps_are_in_a_window():
    from nrlprof.config.steps import Window

    window = Window(3, 4)
    assert 3 in window and 4 in window
    assert 3.0 not in window and "3" not in window and None not in window


def test_a_huge_step_number_is_refused_and_shown_cut():
    digits = "1" * 40
    with pytest.raises(ConfigError, match="NRL_NSYS_PROFILE_STEP_RANGE") as raised:
        plan_from_env(NSYS | {"NRL_NSYS_PROFILE_STEP_RANGE": digits})
    message = str(raised.value)
    assert "1" * 20 + "..." in message and f"{digits} is above" not in message


@pytest.mark.parametrize("variable", ["NRL_MEMORY_PROFILE_DIR", "NRL_MEMORY_PROFILE_MAX_ENTRIES"])
def test_memory_settings_without_memory_patterns_are_an_error(variable):
    with pytest.raises(ConfigError, match="NRL_MEMORY_PROFILE_WORKER_PATTERNS"):
        plan_from_env(NSYS | {variable: "5"})


def memory_backend(**extra: str):
    variables = {"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*", "NRL_MEMORY_PROFILE_STEP_RANGE": "2"} | extra
    (backend,) = plan_from_env(variables).backends
    return backend


def test_memory_directory_and_history_length_defaults_and_settings():
    default = memory_backend()
    assert default.kind == "memory"
    assert default.output_dir == "memory_profile"
    assert dict(default.options) == {"max_entries": "100000", "on_oom": "0"}
    chosen = memory_backend(
        NRL_MEMORY_PROFILE_DIR=" /data/mem ", NRL_MEMORY_PROFILE_MAX_ENTRIES="500", NRL_MEMORY_PROFILE_ON_OOM="1"
    )
    assert chosen.output_dir == "/data/mem"
    assert dict(chosen.options) == {"max_entries": "500", "on_oom": "1"}


@pytest.mark.parametrize("end", ["repeat:0", "repeat-shutdown:0", "repeat:x", "repeat:"])
def test_a_repeat_count_below_one_is_an_error(end):
    with pytest.raises(ConfigError, match="capture-range-end"):
        plan_from_env(NSYS | {"NRL_NSYS_EXTRA_OPTIONS": f'{{"capture-range-end": "{end}"}}'})


def test_null_removes_an_nsys_default_and_other_options_are_merged():
    plan = plan_from_env(NSYS | {"NRL_NSYS_EXTRA_OPTIONS": '{"t": null, "sample": "none"}'})
    (backend,) = plan.backends
    options = dict(backend.options)
    assert "t" not in options and options["sample"] == "none"
    assert options["capture-range"] == "cudaProfilerApi" and options["capture-range-end"] == "stop"


def test_steps_label_of_a_selection_and_of_the_whole_lifetime():
    from nrlprof.config.nsys_options import steps_label
    from nrlprof.config.steps import parse_step_spec

    assert steps_label(parse_step_spec("3:5,10", "X")) == "3-4_10"
    assert steps_label(parse_step_spec("7", "X")) == "7"
    assert steps_label(None) == "all"


def write_trace(path, block: dict | None) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    top = {"schemaVersion": 1} | ({"nrlprof": block} if block is not None else {})
    path.write_text(json.dumps(top | {"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "dur": 1, "pid": 1}]}))


def test_traces_sort_controller_first_then_worker_and_rank_and_label_each(tmp_path):
    from nrlprof.tools.read.traces import find_traces

    write_trace(tmp_path / "w" / "1" / "w.rank1.steps2.7.pt.trace.json", {"worker": "w", "rank": 1, "host": "n1"})
    write_trace(tmp_path / "w" / "0" / "w.rank0.steps2.8.pt.trace.json", {"worker": "w", "rank": 0, "host": "n1"})
    write_trace(tmp_path / "a" / "0" / "a.rank0.steps2.9.pt.trace.json", {"worker": "a", "rank": 0, "host": "n2"})
    write_trace(tmp_path / "controller.steps2.5.pt.trace.json", {"worker": "controller", "host": "n0"})
    found, unreadable = find_traces([tmp_path])
    assert unreadable == []
    ordered = sorted(found, key=lambda h: h.sort_key())
    assert [h.label for h in ordered] == ["controller (n0)", "a rank 0 (n2)", "w rank 0 (n1)", "w rank 1 (n1)"]


def test_a_named_trace_without_events_is_reported_unreadable(tmp_path):
    import json

    from nrlprof.tools.read.traces import find_traces

    named = tmp_path / "w.rank0.steps2.7.pt.trace.json"
    named.write_text(json.dumps({"schemaVersion": 1}))
    other = tmp_path / "notes.json"
    other.write_text(json.dumps({"a": 1}))
    found, unreadable = find_traces([tmp_path])
    assert found == []
    assert [(p.name, why) for p, why in unreadable] == [(named.name, "not a Chrome trace: no traceEvents")]


@pytest.mark.parametrize("values", [[], (), {"a": 1}, 5, None, [True], [0], [1, "2"]])
def test_a_yaml_step_list_must_be_a_non_empty_list_of_steps(values):
    from nrlprof.config.steps import steps_from_list

    with pytest.raises(ConfigError, match=r"trainer\.profile_steps"):
        steps_from_list(values, "trainer.profile_steps")


def test_a_yaml_step_list_becomes_windows():
    from nrlprof.config.steps import steps_from_list

    selection = steps_from_list([5, 1, 2], "trainer.profile_steps")
    assert [(w.first, w.last) for w in selection.windows] == [(1, 2), (5, 5)]
    assert [(w.first, w.last) for w in steps_from_list("3:5", "k").windows] == [(3, 4)]


def test_chrome_events_of_a_list_an_object_and_neither(tmp_path):
    import json

    from nrlprof.errors import ToolError
    from nrlprof.tools.read.traces import iter_chrome_events

    events = [{"name": "a", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]
    listed, wrapped, other = tmp_path / "timeline.json", tmp_path / "t.pt.trace.json", tmp_path / "x.json"
    listed.write_text(json.dumps(events))
    wrapped.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    other.write_text('"text"')
    assert [e for batch in iter_chrome_events(listed) for e in batch] == events
    assert [e for batch in iter_chrome_events(wrapped) for e in batch] == events
    with pytest.raises(ToolError, match="not a Chrome trace"):
        list(iter_chrome_events(other))


def test_a_trace_cut_right_after_its_events_key_or_without_one_ends_the_read(tmp_path):
    from nrlprof.errors import ToolError
    from nrlprof.tools.read.traces import iter_event_batches

    cut = tmp_path / "cut.pt.trace.json"
    cut.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": ')
    with pytest.raises(ToolError, match="cut short"):
        list(iter_event_batches(cut))
    keyless = tmp_path / "keyless.pt.trace.json"
    keyless.write_text('{"schemaVersion": 1}')
    assert list(iter_event_batches(keyless)) == []


@pytest.mark.parametrize(
    ("block", "why"),
    [
        ({"worker": 5}, "nrlprof.worker is 5, expected a string"),
        ({"host": ["n"]}, "nrlprof.host is ['n'], expected a string"),
        ({"rank": "0"}, "nrlprof.rank is '0', expected an integer"),
        ({"rank": True}, "nrlprof.rank is True, expected an integer"),
        ({"steps": [1, "2"]}, "nrlprof.steps is [1, '2'], expected a list of integers"),
    ],
)
def test_a_trace_whose_nrlprof_block_has_wrong_types_is_reported(tmp_path, block, why):
    from nrlprof.tools.read.traces import find_traces

    path = tmp_path / "w.rank0.steps2.7.pt.trace.json"
    write_trace(path, block)
    found, unreadable = find_traces([tmp_path])
    assert found == [] and unreadable == [(path, why)]
