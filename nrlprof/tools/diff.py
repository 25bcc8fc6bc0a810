"""`nrlprof diff A B`: two runs' per-step figures side by side, per worker x rank x step, with the change.

A and B are each a run directory (summarised here) or a file written by `nrlprof summary --json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError

FIGURES = ("wall_ms", "gpu_kernel_ms", "gpu_busy_pct", "gpu_idle_ms", "comm_ms", "memcpy_ms")
Key = tuple[str, Any, int]


def load_summary(path: Path) -> dict[str, Any]:
    """The `summary --json` object of a run directory or of a file holding one."""
    path = Path(path)
    if path.is_dir():
        from nrlprof.tools.summary import summarize

        return summarize(path).to_json()
    if not path.is_file():
        raise ToolError("no such file or directory", path)
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise ToolError(f"not a JSON file ({type(exc).__name__}: {exc})", path) from exc
    workers = data.get("workers") if isinstance(data, dict) else None
    if not isinstance(workers, list) or not all(isinstance(w, dict) for w in workers):
        raise ToolError("not a summary: expected the JSON object `nrlprof summary --json` writes, with workers", path)
    return data


def step_figures(data: dict[str, Any], source: Path) -> dict[Key, dict[str, float]]:
    """(worker, rank, step) -> the figures of that step; ToolError naming `source` for a malformed entry."""
    result: dict[Key, dict[str, float]] = {}
    for entry in data["workers"]:
        steps = entry.get("steps")
        if not isinstance(steps, dict):
            raise ToolError(f"worker {str(entry.get('worker'))[:60]!r}: steps is not an object", source)
        for step, figures in steps.items():
            if not (isinstance(step, str) and step.isdigit() and isinstance(figures, dict)):
                raise ToolError(
                    f"worker {str(entry.get('worker'))[:60]!r}: step {str(step)[:20]!r} is malformed", source
                )
            key = (str(entry.get("worker")), entry.get("rank"), int(step))
            values = {k: float(v) for k in FIGURES if isinstance(v := figures.get(k), (int, float)) and v == v}
            result[key] = values
    return result


def compare(a: dict[str, Any], b: dict[str, Any], source_a: Path, source_b: Path) -> dict[str, Any]:
    """Rows of figures in both runs with their change; keys found in one run only, listed apart."""
    fa, fb = step_figures(a, source_a), step_figures(b, source_b)
    rows = []
    for key in sorted(fa.keys() & fb.keys(), key=_order):
        figures = {}
        for name in FIGURES:
            if name in fa[key] and name in fb[key]:
                old, new = fa[key][name], fb[key][name]
                change_pct = round(100 * (new - old) / old, 1) if old else None
                figures[name] = {"a": old, "b": new, "change": round(new - old, 3), "change_pct": change_pct}
        rows.append({"worker": key[0], "rank": key[1], "step": key[2], "figures": figures})

    def listed(keys: set[Key]) -> list[dict[str, Any]]:
        return [{"worker": w, "rank": r, "step": s} for w, r, s in sorted(keys, key=_order)]

    result = {"a": str(source_a), "b": str(source_b), "rows": rows, "only_in_a": listed(fa.keys() - fb.keys()),
              "only_in_b": listed(fb.keys() - fa.keys())}  # fmt: skip
    if "memory" in a and "memory" in b:
        from nrlprof.tools.memory_view import memory_diff

        result["memory"] = memory_diff(a["memory"], b["memory"])
    if "anatomy" in a and "anatomy" in b:
        from nrlprof.anatomy.compare import anatomy_diff

        result["anatomy"] = anatomy_diff(a["anatomy"], b["anatomy"])
    return result


def _order(key: Key) -> tuple:
    worker, rank, step = key
    return (worker, rank if isinstance(rank, int) else -1, step)


def render(result: dict[str, Any], console: Any = None) -> None:
    """One table row per worker x step x figure: A, B, the change and the change in percent."""
    from rich.table import Table

    from nrlprof.tools.kernel_names import truncate
    from nrlprof.tools.render.console import plain, terminal

    console = console or terminal()
    table = Table(title=f"A = {plain(result['a'])}, B = {plain(result['b'])}")
    table.add_column("worker", no_wrap=True, overflow="ellipsis")
    for column in ("step", "figure", "A", "B", "change", "%"):
        table.add_column(column, justify="left" if column == "figure" else "right", no_wrap=True)
    for row in result["rows"]:
        who = row["worker"] if row["rank"] is None else f"{row['worker']} rank {row['rank']}"
        for name, figure in row["figures"].items():
            pct = f"{figure['change_pct']:+.1f}%" if figure["change_pct"] is not None else ""
            table.add_row(plain(truncate(who, 40)), str(row["step"]), _label(name), f"{figure['a']:.4g}",
                          f"{figure['b']:.4g}", f"{figure['change']:+.4g}", pct)  # fmt: skip
    if result["rows"]:
        console.print(table)
    if "anatomy" in result:
        from nrlprof.anatomy.compare import anatomy_diff_lines

        console.print("[bold]Step anatomy[/]")
        for line in anatomy_diff_lines(result["anatomy"]):
            console.print(plain(line), soft_wrap=True)
    if "memory" in result:
        console.print(f"[bold]Memory[/]: {len(result['memory']['rows'])} worker x step row(s) compared (see --json)")
    for side in ("a", "b"):
        for item in result[f"only_in_{side}"]:
            console.print(f"only in {side.upper()}: {plain(item['worker'])} rank {item['rank']} step {item['step']}")


def _label(name: str) -> str:
    return name.removesuffix("_ms").removesuffix("_pct").replace("_", " ") + (" ms" if name.endswith("_ms") else " %")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, help="run A: a directory of traces/reports, or a `summary --json` file")
    parser.add_argument("b", type=Path, help="run B: the same kinds")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """0: compared. Bad input raises ToolError (the CLI's exit code 2)."""
    result = compare(load_summary(args.a), load_summary(args.b), args.a, args.b)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render(result)
    return 0
