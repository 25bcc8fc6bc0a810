"""`nrlprof plan`: what the current variables/config would profile (tools.plan), as text or JSON."""

from __future__ import annotations

import argparse
import json
import os

from nrlprof import exit_codes
from nrlprof.config.env import load_plan
from nrlprof.tools.commands.options import add_option
from nrlprof.tools.plan.describe import BackendView, describe
from nrlprof.tools.plan.live import live_matches


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "json", "print the plan as JSON")
    address = "also match the live actors of this running cluster ('auto' for the local one), and size the plan's "
    address += "windows at the rate of the job's windows written so far"
    add_option(parser, "address", address)


def run(args: argparse.Namespace) -> int:
    plan = load_plan(os.environ)
    if not plan.active:
        print("nothing is configured: set NRL_NSYS_* / NRL_TORCH_PROFILE_* / NRL_ROCPROF_* or NRL_PROFILE_CONFIG")
        return exit_codes.OK
    views = describe(plan)
    live = sizes = None
    if args.address:
        from nrlprof.tools.cluster import connected
        from nrlprof.tools.remote.rates import expected_sizes, job_rates

        with connected(args.address):
            live = live_matches(plan, args.address)
            sizes = expected_sizes(plan, job_rates(args.address))
    if args.json:
        print(json.dumps({"backends": [v.__dict__ for v in views], "live": live, "expected_sizes": sizes}, indent=2))
        return exit_codes.OK
    _print(views, live, sizes)
    return exit_codes.OK


def _print(views: list[BackendView], live: list[dict] | None, sizes: list[dict] | None) -> None:
    from rich.table import Table

    from nrlprof.tools.render.console import plain, terminal

    console = terminal()
    for view in views:
        console.rule(f"[bold]{plain(view.kind)}")
        table = Table("pattern", "ranks", "discrete", "methods")
        for t in view.targets:
            methods = ",".join(t["methods"]) or "-"
            table.add_row(plain(t["pattern"]), plain(t["ranks"]), plain(t["discrete"]), plain(methods))
        console.print(table)
        console.print(f"windows: {plain(', '.join(view.windows))}")
        console.print(f"command: {plain(view.command)}", soft_wrap=True)
        for entry in view.files:
            console.print(f"files:   {plain(entry['path'])}  [dim]({plain(entry['node'])})[/dim]", soft_wrap=True)
        for note in view.notes:
            console.print(f"note:    {plain(note)}")
    if live is not None:
        table = Table("worker", "rank", "backend", "pattern", "node", title="live actors that would be profiled")
        for row in live:
            cells = (row["worker"], row["rank"], row["backend"], row["pattern"], row["node_id"][:12])
            table.add_row(*map(plain, cells))
        console.print(table)
    if sizes:
        title = "expected size per rank and window, at the rate of the job's windows written so far"
        table = Table("backend", "worker", "window", "per rank", "per step", "from windows", title=title)
        for row in sizes:
            cells = (row["backend"], row["worker"], row["window"], f"{row['bytes_per_rank'] / 1e6:,.1f} MB",
                     f"{row['bytes_per_step'] / 1e6:,.1f} MB", ", ".join(row["from_windows"]))  # fmt: skip
            table.add_row(*map(plain, cells))
        console.print(table)
