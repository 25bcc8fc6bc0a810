"""A torch profiler start that does not import torch's compiler.

torch's `profile.prepare_trace` asks `hasattr(torch, "_inductor")`, and torch answers by importing
`torch._inductor` (with dynamo, sympy and more: about 3 s of Python on 2 CPU cores, 95% of a first profiler start
there), only to read whether inductor captures CUDA graphs. A job that has not imported inductor has compiled
nothing, so the answer is inductor's default, read from its variable. nrlprof's own start skips that import (on
its own thread only: other threads still get the module) and sets the same answer.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

INDUCTOR = "torch._inductor"
CUDAGRAPHS_VARIABLE = "TORCHINDUCTOR_CUDAGRAPHS"


@contextlib.contextmanager
def inductor_left_unimported(profiler: Any) -> Iterator[None]:
    """Around `profiler.start()` on this thread: `torch._inductor` stays unimported if it is so far."""
    torch = sys.modules["torch"]
    lazy = torch.__dict__.get("__getattr__")
    if INDUCTOR in sys.modules or lazy is None:
        yield
        return
    starting = threading.get_ident()

    def __getattr__(name: str) -> Any:
        if name == "_inductor" and threading.get_ident() == starting and INDUCTOR not in sys.modules:
            raise AttributeError(name)
        return lazy(name)

    torch.__getattr__ = __getattr__
    try:
        yield
    finally:
        if torch.__dict__.get("__getattr__") is __getattr__:
            torch.__getattr__ = lazy
    profiler.has_cudagraphs = os.environ.get(CUDAGRAPHS_VARIABLE) == "1"
