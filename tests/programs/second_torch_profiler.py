"""A process with a torch profiler of its own beside nrlprof's torch window (steps 1 and 2):
`python second_torch_profiler.py <user-first|nrlprof-first>`, the order the two start in. Prints `survived` at the
end."""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile

import nrlprof


def work() -> None:
    torch.ones(32, 32) @ torch.ones(32, 32)


if sys.argv[1] == "user-first":
    with profile(activities=[ProfilerActivity.CPU]):
        nrlprof.step(1)
        work()
        nrlprof.step(2)
        work()
else:
    nrlprof.step(1)
    work()
    with profile(activities=[ProfilerActivity.CPU]):
        work()
    nrlprof.step(2)
nrlprof.finish()
print("survived")
