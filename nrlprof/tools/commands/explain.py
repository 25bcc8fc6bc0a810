"""`nrlprof explain DIR`: why the job's steps are slow, findings ranked by impact, each with its evidence, where to
look and what to try; `--json` for scripts.

It reads what `summary` reads (step anatomy, torch traces, nsys exports, memory figures, manifests), in DIR or, with
`--address`, on the nodes that hold them (tools.remote); the rules are in tools.advice.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nrlprof import exit_codes
from nrlprof.errors import ToolError
from nrlprof.tools.commands.options import add_cluster_reading, add_option, add_summary_input, summarise

PHASES_HELP = (
    "the RL phase of methods the built-in names miss, before them: 'rollout=*generate*;training=*train*' "
    "(a pattern over the method, or '<worker>.<method>'; also NRL_PHASES)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "json", "print the findings, steps and phases as JSON")
    parser.add_argument("--steps", metavar="STEPS", help="only these steps (3, 3:5, 1,4; stop exclusive)")
    parser.add_argument("--all", action="store_true", help=f"also the findings under {5}%% of the steps' time")
    parser.add_argument("--phases", metavar="RULES", default=None, help=PHASES_HELP)
    add_summary_input(parser, "the step anatomy, traces and reports")
    add_cluster_reading(parser, "read")


def run(args: argparse.Namespace) -> int:
    """OK: explained; PARTIAL: some input skipped, or nothing to explain from. Bad input: ToolError/ConfigError."""
    from nrlprof.tools.advice.explain import explain
    from nrlprof.tools.advice.phases import phase_map

    phases = phase_map(args.phases)  # a bad rule is refused before anything is read
    chosen = None
    if args.steps is not None:
        from nrlprof.config.steps import parse_step_spec

        chosen = {step for window in parse_step_spec(args.steps, "--steps").windows for step in window.steps}
    try:
        summary = summarise(args, "explain", anatomy_view=False)
    except ToolError as exc:
        if args.address is None and Path(args.directory).is_dir():
            print(f"nrlprof explain: {exc}", file=sys.stderr)
            return exit_codes.PARTIAL  # a directory with nothing nrlprof wrote: said in one line
        raise
    explanation = explain(summary, phases, chosen)
    if args.json:
        sys.stdout.write(json.dumps(explanation.to_json(args.all), indent=2) + "\n")
        for path, reason in summary.skipped:
            print(f"nrlprof explain: warning: skipped {path}: {reason}", file=sys.stderr)
    else:
        from nrlprof.tools.render.explain_text import render_explanation

        sys.stdout.write(render_explanation(explanation, args.all))
    return exit_codes.outcome(not summary.skipped)
