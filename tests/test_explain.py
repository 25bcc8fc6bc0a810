"""`nrlprof explain` on files built by hand: the frameworks' method names as phases, GPU-shaped traces of
data-parallel ranks with a late rank or exposed collectives, the real H100 capture, anatomy runs written line by
line, the JSON's shape, and bad input (the exit table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.anatomy import DRIVER_NODE, JOB, MS, T0, actor_id, call
from helpers.nsys import copy_nsys_export
from helpers.traces import data_parallel_trace, write_json

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines
from nrlprof.errors import ConfigError
from nrlprof.tools.advice.explain import explain
from nrlprof.tools.advice.phases import PhaseMap, parse_rules, phase_map
from nrlprof.tools.figures.summarize import summarize


def explained(directory: Path, *options: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "nrlprof", "explain", str(directory), *options],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )  # fmt: skip


def explain_json(directory: Path, *options: str) -> dict:
    run = explained(directory, "--json", *options)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def of_kind(result: dict, kind: str) -> list[dict]:
    return [f for f in result["findings"] if f["kind"] == kind]


# (worker as the anatomy names it, method as the framework calls it, phase), read from each framework's code
FRAMEWORK_METHODS = [
    # verl 0.9.1: fused WorkerDict names, its agent-loop rollout, checkpoint engine, reward model, critic
    ("worker_dict", "actor_rollout_generate_sequences", "rollout"),
    ("worker_dict", "actor_rollout_compute_log_prob", "logprob"),
    ("worker_dict", "actor_rollout_compute_ref_log_prob", "logprob"),
    ("worker_dict", "ref_compute_ref_log_prob", "logprob"),
    ("worker_dict", "actor_rollout_update_actor", "training"),
    ("worker_dict", "critic_update_critic", "training"),
    ("worker_dict", "critic_compute_values", "logprob"),
    ("worker_dict", "rm_compute_rm_score", "reward"),
    ("agent_loop_worker", "generate_sequences", "rollout"),
    ("checkpoint_engine_manager", "update_weights", "weight_sync"),
    ("critic_worker", "infer_batch", "logprob"),
    ("critic_worker", "train_mini_batch", "training"),
    # NeMo RL: generation, log-probs, training, refit
    ("vllm_generation_worker", "generate", "rollout"),
    ("dtensor_policy_worker", "get_logprobs", "logprob"),
    ("dtensor_policy_worker", "get_reference_policy_logprobs", "logprob"),
    ("megatron_policy_worker", "train", "training"),
    ("dtensor_policy_worker", "prepare_refit_info", "weight_sync"),
    ("dtensor_policy_worker", "prepare_weights_for_ipc", "weight_sync"),
    ("vllm_generation_worker", "update_weights_from_ipc_handles", "weight_sync"),
    ("dtensor_policy_worker", "broadcast_weights_for_collective", "weight_sync"),
    ("dtensor_policy_worker", "offload_before_refit", "weight_sync"),
    # OpenRLHF 0.11.2: its PPO trainer's calls, and execute_batch's forward passes by actor class
    ("policy_model_actor", "fit", "training"),
    ("critic_model_actor", "fit", "training"),
    ("policy_model_actor", "broadcast_to_vllm", "weight_sync"),
    ("llm_ray_actor", "generate_responses", "rollout"),
    ("reference_model_actor", "execute_batch", "logprob"),
    ("critic_model_actor", "execute_batch", "logprob"),
    ("reward_model_actor", "execute_batch", "reward"),
    ("policy_model_actor", "execute_batch", "logprob"),
    ("llm_ray_actor", "update_weight_cuda_ipc", "weight_sync"),
    # RLinf 0.3.0's runners
    ("ActorGroup", "run_training", "training"),
    ("RolloutGroup", "generate", "rollout"),
    ("RolloutGroup", "rollout_serverless", "rollout"),
    ("ActorGroup", "sync_model_to_rollout", "weight_sync"),
    ("RolloutGroup", "sync_model_from_actor", "weight_sync"),
    ("InferenceGroup", "run_inference", "logprob"),
    ("RewardGroup", "compute_rewards", "reward"),
    ("EnvGroup", "interact", "rollout"),
    # SkyRL 0.4.0: roles from its worker bases
    ("policy", "forward", "logprob"),
    ("ref", "forward", "logprob"),
    ("critic", "forward", "logprob"),
    ("policy", "forward_backward", "training"),
    ("policy", "optim_step", "training"),
    ("policy", "broadcast_to_inference_engines", "weight_sync"),
    ("policy", "offload_to_cpu", "weight_sync"),
    ("policy", "backload_to_gpu", "weight_sync"),
    # AReaL 1.0.4: every call is `call`; the rollout and reference roles do one thing each
    ("rollout", "call", "rollout"),
    ("ref", "call", "logprob"),
    ("actor", "call", "other"),
    ("actor-ref", "call", "other"),
    # slime: the train actors' train holds log-probs and training; the rollout manager generates and rewards
    ("actor", "train", "training"),
    ("actor", "update_weights", "weight_sync"),
    ("rollout_manager", "generate", "rollout"),
    ("sg_lang_engine", "release_memory_occupation", "weight_sync"),
    # vLLM and SGLang engines' own calls
    ("sglang_engine", "update_weights_from_tensor", "weight_sync"),
    ("sglang_engine", "release_memory_occupation", "weight_sync"),
    ("vllm_engine", "wake_up", "weight_sync"),
    ("vllm_engine", "sleep", "weight_sync"),
    ("vllm_engine", "add_requests", "rollout"),
    # not a phase of its own
    ("worker_dict", "init_model", "other"),
    ("ActorGroup", "save_checkpoint", "other"),
]


@pytest.mark.parametrize("worker, method, phase", FRAMEWORK_METHODS)
def test_the_frameworks_method_names_are_their_phases(worker, method, phase):
    assert PhaseMap().phase_of(worker, method) == phase


def test_the_users_rules_come_first_and_may_name_the_worker():
    phases = PhaseMap(parse_rules("rollout=*.step_env; training=learner.*, *_sgd", "--phases"))
    assert phases.phase_of("env_runner", "step_env") == "rollout"
    assert phases.phase_of("learner", "generate") == "training"  # before the built-in *generate*
    assert phases.phase_of("x", "apply_sgd") == "training"
    assert phases.phase_of("x", "generate") == "rollout"


@pytest.mark.parametrize("rules", ["rollout", "decode=*gen*", "rollout=", "training=.update", "rollout=worker."])
def test_a_bad_rule_is_refused_naming_the_input_and_the_form(rules):
    with pytest.raises(ConfigError, match=r"NRL_PHASES=.*phases: rollout, logprob, training, weight_sync"):
        phase_map(None, {"NRL_PHASES": rules})


def write_ranks(directory: Path, arrives_us: dict[int, float], **kwargs) -> Path:
    for rank in arrives_us:
        name = f"policy.rank{rank}.steps3-5.{2000 + rank}.pt.trace.json"
        write_json(directory / "policy" / str(rank) / name, data_parallel_trace(rank, arrives_us, **kwargs))
    return directory


def test_the_rank_late_to_the_nccl_collective_is_the_straggler_not_those_that_wait(tmp_path):
    # Rank 2 computes 3 ms longer; its peers' all-reduce kernels last 3 ms longer, waiting for it.
    result = explain_json(write_ranks(tmp_path, {0: 4000.0, 1: 4000.0, 2: 7000.0, 3: 4100.0}))
    (straggler,) = of_kind(result, "straggler")
    assert (straggler["worker"], straggler["rank"], straggler["steps"]) == ("policy", 2, [3, 4, 5])
    figures = straggler["evidence"]["figures"]
    assert figures["its_collective_ms"] == 0.2 and figures["peers_collective_ms"] == pytest.approx(
        3.2, abs=0.01
    )  # median of 3.2, 3.2, 3.1
    assert 25 <= straggler["impact_pct"] <= 35  # 3 ms of a 10 ms step
    assert "/policy/2/" in straggler["evidence"]["look"]["file"]
    # The peers' long collectives are waiting, not communication: the late rank's 0.2 ms is the transfer.
    assert of_kind(result, "exposed_comm") == []


def test_every_rank_slower_alike_is_no_straggler(tmp_path):
    result = explain_json(write_ranks(tmp_path, {0: 7000.0, 1: 7000.0, 2: 7000.0}))
    assert of_kind(result, "straggler") == []


def test_collectives_no_compute_overlaps_are_exposed_and_hidden_ones_are_not(tmp_path):
    arrive = {0: 4000.0, 1: 4000.0}
    exposed = explain_json(write_ranks(tmp_path / "a", arrive, transfer_us=3000.0))
    (finding,) = of_kind(exposed, "exposed_comm")
    figures = finding["evidence"]["figures"]
    # 3 ms of collectives after 3.9 ms of compute: 3 / 6.9 of the GPU's busy time, 30% of the 10 ms step.
    assert figures["exposed_pct_of_busy"] == pytest.approx(43.5, abs=0.5)
    assert finding["impact_pct"] == pytest.approx(30.0, abs=0.5)
    assert figures["device"] == "gpu" and finding["evidence"]["look"]["step"] == 3
    hidden = explain_json(write_ranks(tmp_path / "b", arrive, transfer_us=3000.0, hidden_under_compute=True))
    assert of_kind(hidden, "exposed_comm") == []


def test_the_real_h100_capture_has_no_collective_and_no_anatomy_and_says_so(tmp_path):
    export = copy_nsys_export(tmp_path)
    result = explain_json(export.parent)
    assert result["findings"] == [] and result["steps"] == {}
    said = " ".join(result["cannot_tell"])
    assert "no step anatomy" in said and "no collective (NCCL or gloo)" in said
    text = explained(export.parent).stdout
    assert "No finding above the thresholds" in text and "What the data cannot tell" in text


def anatomy_run(tmp_path: Path, groups: dict[int, tuple[str, int]], tasks: list[dict], steps: int) -> Path:
    run = tmp_path / "step_anatomy" / "run-20260101T000000Z-1"
    run.mkdir(parents=True)
    append_lines(run / META_FILE, [{"job_id": JOB, "driver_node_id": DRIVER_NODE}])
    append_lines(run / ACTORS_FILE, [{"actor_id": actor_id(a), "worker": w, "rank": r, "class": "X"}
                                     for a, (w, r) in groups.items()])  # fmt: skip
    marks = [{"step": s, "t_ns": T0 + (s - 1) * 1000 * MS} for s in range(1, steps + 1)]
    append_lines(run / STEPS_FILE, [*marks, {"finish": True, "t_ns": T0 + steps * 1000 * MS}])
    append_lines(run / TASKS_FILE, tasks)
    return tmp_path


def test_a_different_replica_last_in_each_step_is_a_long_tail_with_no_rank(tmp_path):
    groups = {1: ("rollout_worker", 0), 2: ("rollout_worker", 1), 3: ("rollout_worker", 2), 4: ("trainer", 0)}
    tasks = []
    for step in range(1, 7):
        at = (step - 1) * 1000
        late = 1 + step % 3
        tasks += [call(a, "generate", at + 10, at + (600 if a == late else 200)) for a in (1, 2, 3)]
        tasks.append(call(4, "train", at + 610, at + 900))
    result = explain_json(anatomy_run(tmp_path, groups, tasks, 6))
    (tail,) = of_kind(result, "long_tail")
    assert tail["rank"] is None and tail["worker"] == "rollout_worker"
    assert "a different rollout_worker replica" in tail["evidence"]["summary"]
    assert result["steps"]["2"]["bound"] == "rollout"


def test_methods_no_phase_names_are_said_with_what_to_set(tmp_path):
    groups = {1: ("env_runner", 0), 2: ("learner", 0)}
    tasks = []
    for step in range(1, 6):
        at = (step - 1) * 1000
        tasks += [call(1, "step_env", at + 10, at + 700), call(2, "learn", at + 710, at + 900)]
    directory = anatomy_run(tmp_path, groups, tasks, 5)
    result = explain_json(directory)
    assert result["phases"] == {"env_runner.step_env": "other", "learner.learn": "other"}
    assert any("NRL_PHASES" in s and "env_runner.step_env" in s for s in result["cannot_tell"])
    mapped = explain_json(directory, "--phases", "rollout=*.step_env;training=learn")
    assert mapped["phases"] == {"env_runner.step_env": "rollout", "learner.learn": "training"}
    assert of_kind(mapped, "rollout_bound")[0]["impact_pct"] == pytest.approx(69.0, abs=1.0)
    by_variable = explained(directory, "--json", env={"NRL_PHASES": "rollout=*.step_env;training=learn"})
    assert json.loads(by_variable.stdout)["phases"] == mapped["phases"]


def test_the_json_has_the_documented_shape_sorted_by_impact(tmp_path):
    groups = {1: ("rollout_worker", 0), 2: ("trainer", 0), 3: ("trainer", 1), 4: ("trainer", 2)}
    tasks = []
    for step in range(1, 8):
        at = (step - 1) * 1000
        tasks.append(call(1, "generate_sequences", at + 10, at + 500))
        # trainer rank 2 ends 60 ms after its peers in steps 2-5: a straggler of about 4%, under the 5% shown
        tasks += [call(a, "update_actor", at + 510, at + 560 + (60 if a == 4 and 2 <= step <= 5 else 0))
                  for a in (2, 3, 4)]  # fmt: skip
    result = explain_json(anatomy_run(tmp_path, groups, tasks, 7))
    assert {"findings", "steps", "phases"} <= result.keys()
    for finding in result["findings"]:
        assert set(finding) == {"kind", "impact_pct", "steps", "worker", "rank", "evidence", "advice"}
        assert {"summary", "figures", "threshold"} <= finding["evidence"].keys()
    impacts = [f["impact_pct"] for f in result["findings"]]
    assert impacts == sorted(impacts, reverse=True) and min(impacts) >= 5
    assert set(result["steps"]["3"]) == {"wall_ms", "bound", "phases_ms"}
    assert result["steps"]["3"]["wall_ms"] == pytest.approx(1000.0)
    assert sum(result["steps"]["3"]["phases_ms"].values()) == pytest.approx(1000.0, abs=0.01)
    assert of_kind(result, "straggler") == []
    everything = explain_json(tmp_path, "--all")
    (straggler,) = of_kind(everything, "straggler")
    assert straggler["rank"] == 2 and straggler["impact_pct"] < 5
    only = explain_json(tmp_path, "--steps", "5")
    assert list(only["steps"]) == ["5"]


def test_an_empty_or_unrelated_directory_gets_one_line_and_exit_1(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "unrelated").mkdir()
    (tmp_path / "unrelated" / "notes.txt").write_text("hello")
    for name in ("empty", "unrelated"):
        run = explained(tmp_path / name)
        assert run.returncode == 1, run.stderr
        assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert "no torch trace or Nsight Systems report found" in run.stderr


@pytest.mark.parametrize(
    "options, says",
    [
        (["--phases", "decode=*gen*"], "--phases="),
        (["--steps", "0:3"], "--steps="),
        (["--steps", "3-5"], "--steps="),
    ],
)
def test_bad_options_are_refused_with_exit_2(tmp_path, options, says):
    run = explained(tmp_path, *options)
    assert run.returncode == 2 and says in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_missing_directory_is_bad_input(tmp_path):
    run = explained(tmp_path / "missing")
    assert run.returncode == 2 and "missing" in run.stderr


def test_broken_files_are_named_and_the_rest_explained(tmp_path):
    write_ranks(tmp_path, {0: 4000.0, 1: 4000.0, 2: 7000.0})
    broken = tmp_path / "policy" / "3" / "policy.rank3.steps3-5.2003.pt.trace.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"traceEvents": [{"ph": "X", "name": ')
    run = explained(tmp_path, "--json")
    assert run.returncode == 1
    result = json.loads(run.stdout)
    assert of_kind(result, "straggler")[0]["rank"] == 2
    assert any(str(broken) in note for note in result["notes"])
    assert str(broken) in run.stderr


def test_in_process_explain_keeps_the_anatomy_out_of_the_summary_sections(tmp_path):
    groups = {1: ("rollout_worker", 0)}
    tasks = [call(1, "generate_sequences", (s - 1) * 1000 + 10, (s - 1) * 1000 + 900) for s in range(1, 4)]
    anatomy_run(tmp_path, groups, tasks, 3)
    summary = summarize(tmp_path, nsys="", anatomy_view=False)
    assert "anatomy" not in summary.sections and summary.anatomy_tables is not None
    assert explain(summary, phase_map()).findings[0].kind == "rollout_bound"


def test_the_readmes_table_of_kinds_is_the_rules_explain_applies():
    from nrlprof.tools.advice.finding import RULES

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme.split("<!-- explain kinds:", 1)[1].split("<!-- end of explain kinds -->", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| `")]
    assert {row[0].strip("|` "): (row[1], row[2].rstrip(" |")) for row in rows} == RULES


def test_summary_ends_with_the_top_findings_and_the_report_opens_with_them(tmp_path):
    from nrlprof.cli import main

    write_ranks(tmp_path / "run", {0: 4000.0, 1: 4000.0, 2: 7000.0})
    summary = subprocess.run([sys.executable, "-m", "nrlprof", "summary", str(tmp_path / "run")],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    tail = summary.stdout.strip().splitlines()[-2:]
    assert tail[0].startswith("Top findings (nrlprof explain for the evidence)")
    assert "[straggler, " in tail[1] and "policy rank 2" in tail[1]
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text()
    assert page.index('id="findings"') < page.index("<h2>Timeline</h2>")
    assert "<b>straggler</b>" in page and "policy rank 2 is late to the collective kernels" in page


def test_areals_call_and_a_server_over_http_are_said_not_guessed(tmp_path):
    groups = {1: ("actor", 0), 2: ("rollout", 0), 3: ("vllm_server_actor", 0)}
    tasks = []
    for step in range(1, 6):
        at = (step - 1) * 1000
        tasks += [call(2, "call", at + 10, at + 200), call(1, "call", at + 210, at + 900)]
        tasks.append(call(3, "get_server_info", at + 5, at + 6))
    result = explain_json(anatomy_run(tmp_path, groups, tasks, 5))
    assert result["phases"]["rollout.call"] == "rollout" and result["phases"]["actor.call"] == "other"
    said = " ".join(result["cannot_tell"])
    assert "actor.call" in said and "AReaL's RPC servers take every engine method through `call`" in said
    assert "vllm_server_actor serves requests over HTTP" in said
    assert of_kind(result, "training_bound") == [] and of_kind(result, "rollout_bound")[0]["impact_pct"] < 25
