"""A driver that steps nrlprof through steps 1 to 4 with torch and without Ray, then finishes; prints whether Ray and
torch's compiler (`torch._inductor`) were imported, as JSON (`python driver_without_ray.py`)."""

from __future__ import annotations

import json
import sys

import torch

import nrlprof

for step in range(1, 5):
    nrlprof.step(step)
    torch.ones(8) + 1
nrlprof.finish()
print(json.dumps({"ray": "ray" in sys.modules, "inductor": "torch._inductor" in sys.modules}))
