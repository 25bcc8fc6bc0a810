"""How a child is named: by its executable, then its process title, then its `multiprocessing` name; prints each."""

from __future__ import annotations

import ctypes
import multiprocessing

from nrlprof.runtime.children.names import child_part


def named(queue):
    queue.put(child_part())


if __name__ == "__main__":
    print(child_part())
    libc = ctypes.CDLL(None)
    libc.prctl(15, b"EngineCoreProc", 0, 0, 0)  # PR_SET_NAME, as setproctitle does
    print(child_part())
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=named, args=(queue,), name="EngineCore_0")
    process.start()
    print(queue.get())
    process.join()
