"""`nrlprof plan`: the whole of what the current variables/config would do (tools.plan), as text or JSON.

Per backend its targets, windows, command and files; the step anatomy; where the steps come from; whether the
controller is captured; the torch switches; the workers' interpreter; what the config file held and what it
could not read; the NRL_* variables nrlprof does not read. The plan's nsys options are checked against
`nsys profile --help` of the nsys here, if any.

Exit: 0; 1 when a variable nrlprof does not read is close to one it does (a misspelling); 2 for bad settings,
an nsys option the installed nsys does not know, or no cluster at --address.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from operator import itemgetter
from typing import Any

from nrlprof import exit_codes
from nrlprof.config.env import load_plan
from nrlprof.config.misspelled import misspelled_variables
from nrlprof.config.plan import Plan
from nrlprof.tools.commands.options import add_option
from nrlprof.tools.plan.describe import BackendView, describe
from nrlprof.tools.plan.live import live_rows
from nrlprof.tools.plan.overview import WORKER_PYTHON, PlanOverview, overview

NOTHING = (
    "nothing is configured: nrlprof does nothing in this environment. Set a backend's patterns and steps "
    "(NRL_NSYS_*, NRL_TORCH_PROFILE_*, NRL_MEMORY_PROFILE_*, NRL_ROCPROF_*), NRL_PROFILE_CONFIG, NRL_STEP_ANATOMY=1, "
    "NRL_STEP_METHOD or NRL_PROFILE_FRAMEWORK_CONFIG=1"
)
NO_BACKEND = "no profiler is configured (no backend's patterns and steps, nor a profiled role in NRL_PROFILE_CONFIG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "json", "print the plan as JSON")
    address = "also match the live actors of this running cluster ('auto' for the local one), and size the plan's "
    address += "windows at the rate of the job's windows written so far"
    add_option(parser, "address", address)


def run(args: argparse.Namespace) -> int:
    """OK; PARTIAL when an NRL_* variable looks misspelled. Bad settings raise ConfigError (exit 2)."""
    unknown = misspelled_variables(os.environ)
    plan = load_plan(os.environ)
    checked = check_nsys(plan)
    spec = os.environ.get("NRL_PROFILE_CONFIG", "").strip()
    config_file = None
    if spec:
        from nrlprof.tools.plan.config_file import config_file_findings

        config_file = config_file_findings(spec, plan)
    whole = overview(plan, os.environ, unknown, config_file, checked)
    views = describe(plan, WORKER_PYTHON)
    live = sizes = actors = None
    if args.address:
        from nrlprof.tools.cluster import connected
        from nrlprof.tools.remote.rates import expected_sizes, job_rates

        with connected(args.address):
            rows = live_rows(plan, args.address)
            live = [row for row in rows if row["backend"] is not None]
            actors = _actor_names(rows)
            sizes = expected_sizes(plan, job_rates(args.address))
    if args.json:
        data = {"backends": [v.__dict__ for v in views], **whole.to_json(), "live": live, "actors": actors,
                "expected_sizes": sizes}  # fmt: skip
        print(json.dumps(data, indent=2))
    else:
        _print(whole, views, live, sizes)
        _print_actor_names(actors)
    misspelled = any(item["closest"] for item in whole.unknown_variables)
    return exit_codes.outcome(not misspelled)


def check_nsys(plan: Plan) -> str:
    """The plan's nsys options checked against the nsys here (ConfigError for one it does not know); what was done."""
    from nrlprof.config.nsys.known import check_nsys_options, plan_nsys_options, read_profile_help

    if not plan_nsys_options(plan):
        return ""
    nsys = shutil.which("nsys")
    if nsys is None:
        return "nsys not found here: its options were not checked (`nrlprof doctor` checks them on every node)"
    known, why = read_profile_help(nsys)
    if known is None:
        return f"not checked: {why}"
    check_nsys_options(plan, known, nsys)
    return f"every nsys option is one `{nsys} profile --help` lists"


def _print(whole: PlanOverview, views: list[BackendView], live: list[dict] | None, sizes: list[dict] | None) -> None:
    from nrlprof.tools.render.console import plain, terminal

    console = terminal()
    if not whole.configured:
        console.print(plain(NOTHING), soft_wrap=True)
        _print_variables(whole, console)
        return
    if not views:
        console.print(plain(NO_BACKEND), soft_wrap=True)
    for view in views:
        _print_backend(view, console)
    _print_whole(whole, console)
    _print_live(live, sizes, console)


def _print_backend(view: BackendView, console: Any) -> None:
    from nrlprof.tools.render.console import plain, print_rows

    console.rule(f"[bold]{plain(view.kind)}")
    rows = [(t["pattern"], t["ranks"], t["discrete"], ",".join(t["methods"]) or "-") for t in view.targets]
    print_rows(console, ("pattern", "ranks", "discrete", "methods"), rows)
    console.print(f"windows: {plain(', '.join(view.windows))}")
    console.print(f"command: {plain(view.command)}", soft_wrap=True)
    for entry in view.files:
        console.print(f"files:   {plain(entry['path'])}  [dim]({plain(entry['node'])})[/dim]", soft_wrap=True)
    for note in view.notes:
        console.print(f"note:    {plain(note)}", soft_wrap=True)


def _print_whole(whole: PlanOverview, console: Any) -> None:
    from nrlprof.tools.render.console import plain

    def line(text: str) -> None:
        console.print(plain(text), soft_wrap=True)

    console.rule("[bold]the rest of the plan" if whole.settings["sources"] else "[bold]the plan")
    anatomy = whole.anatomy
    state = f"on, into {anatomy['directory']}" if anatomy["enabled"] else "off"
    line(f"step anatomy: {state} ({anatomy['why']}): {anatomy['what']}")
    line("steps, in order of precedence:")
    for number, source in enumerate(whole.steps, start=1):
        line(f"  {number}. {source}")
    line("controller:")
    for text in whole.controller:
        line(f"  {text}")
    if whole.torch is not None:
        switches = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in whole.torch.items()
                             if k not in ("directory", "host_memory"))  # fmt: skip
        line(f"torch switches: {switches}; traces under {whole.torch['directory']}")
        memory = whole.torch["host_memory"]
        budget = f"{memory['budget_mb']} MB" if memory["budget_mb"] else "none"
        line(f"torch host memory per process: about {memory['per_step_mb']:g} MB a step, {memory['window_mb']} MB "
             f"for the longest window ({memory['window_steps']} steps) ({memory['basis']}); budget {budget} "
             "(NRL_PROFILE_MAX_HOST_MB: a window past it stops early, its trace kept)")  # fmt: skip
    line(f"interpreter: {whole.interpreter}")
    settings = whole.settings
    sources = ", ".join(settings["sources"]) or "-"
    line(f"settings: log level {settings['log_level']}, timeout {settings['timeout_s']:g} s; from {sources}")
    if whole.nsys_options_checked:
        line(f"nsys options: {whole.nsys_options_checked}")
    _print_config_file(whole.config_file, line)
    _print_variables(whole, console)
    for warning in whole.warnings:
        console.print(f"[yellow]warning:[/yellow] {plain(warning)}", soft_wrap=True)


def _print_config_file(found: dict[str, Any] | None, line: Any) -> None:
    if found is None:
        return
    read = ", ".join(found["backends"]) or "no backend"
    line(f"NRL_PROFILE_CONFIG {found['path']}: {read} read from it")
    for item in found["found"]:
        line(f"  found: {item}")
    for item in found["unread"]:
        line(f"  could not read: {item}")
    if found["advice"]:
        line(f"  to profile those roles, {found['advice']}")


def _print_variables(whole: PlanOverview, console: Any) -> None:
    from nrlprof.tools.render.console import plain

    for item in whole.unknown_variables:
        if item["closest"]:
            text = f"warning: {item['name']} is not an nrlprof variable: did you mean {item['closest']}?"
            console.print(f"[yellow]{plain(text)}[/]", soft_wrap=True)
        else:
            text = f"note: {item['name']} is not read by nrlprof (a framework's own setting?)"
            console.print(plain(text), soft_wrap=True)


def _actor_names(rows: list[dict]) -> list[dict]:
    """Each live actor once: who it is and the names a pattern can match it by, as its framework names it."""
    seen: dict[str, dict] = {}
    for row in rows:
        seen.setdefault(row["actor_id"], {k: row[k] for k in ("actor_id", "worker", "rank", "framework", "names")})
    return list(seen.values())


def _print_actor_names(actors: list[dict] | None) -> None:
    if not actors:
        return
    from nrlprof.tools.render.console import print_rows, terminal

    rows = [(a["worker"], a["rank"], a["framework"] or "-", ", ".join(a["names"])) for a in actors]
    print_rows(terminal(), ("worker", "rank", "framework", "names a pattern matches"), rows, "live actors")


def _print_live(live: list[dict] | None, sizes: list[dict] | None, console: Any) -> None:
    from nrlprof.tools.render.console import print_rows

    if live is not None:
        own = "the worker's own (Ray's default worker command)"
        named = itemgetter("worker", "rank", "backend", "pattern")
        rows = [(*named(row), row["node_id"][:12], row.get("interpreter") or own) for row in live]
        columns = ("worker", "rank", "backend", "pattern", "node", "interpreter")
        print_rows(console, columns, rows, "live actors that would be profiled")
    if sizes:
        title = "expected size per rank and window, at the rate of the job's windows written so far"
        columns = ("backend", "worker", "window", "per rank", "per step", "from windows")
        named = itemgetter("backend", "worker", "window")
        rows = [
            (*named(row), _mb(row["bytes_per_rank"]), _mb(row["bytes_per_step"]), ", ".join(row["from_windows"]))
            for row in sizes
        ]
        print_rows(console, columns, rows, title)


def _mb(count: int) -> str:
    return f"{count / 1e6:,.1f} MB"
