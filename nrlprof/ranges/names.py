"""The name of an annotated range in a trace: `<label> [step <n>]` while step n runs.

Kept apart from `nrlprof.layout` (which parses it back, `range_label`) so that `import nrlprof` stays cheap.
"""

from __future__ import annotations


def range_name(label: str, step: int | None) -> str:
    """An annotated range as nrlprof names it in a trace: `<label> [step <n>]` while step n runs."""
    return label if step is None else f"{label} [step {step}]"
