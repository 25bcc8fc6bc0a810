"""Readable kernel names: the function name without return type, template arguments or parameter list.

Nsight Systems shows `vectorized_elementwise_kernel` for `void at::native::vectorized_elementwise_kernel<4,
...>(int, ...)`: the last name of the qualified function. A last name that says nothing on its own (CUTLASS's
`Kernel2`, CUB's `DeviceKernel`) keeps its namespace: `cutlass::Kernel2`.
"""

from __future__ import annotations

# Last names shared by many libraries' kernels: shown with the namespace before them.
GENERIC_NAMES = frozenset({"Kernel", "Kernel2", "kernel", "device_kernel", "DeviceKernel", "KernelWrapper"})
_OPEN, _CLOSE = "<([", ">)]"
_RETURN_TYPES = ("void ", "static ", "__global__ ", "int ", "float ")


def short_kernel_name(name: str) -> str:
    """`name` without return type, template arguments and parameters; `name` itself when nothing is left."""
    text = _outside_brackets(name).strip()
    while text.startswith(_RETURN_TYPES):
        text = text.split(" ", 1)[1].lstrip()
    parts = [p for p in text.split("::") if p]
    if not parts:
        return name
    if len(parts) > 1 and parts[-1] in GENERIC_NAMES:
        return "::".join(parts[-2:])
    return parts[-1]


def _outside_brackets(name: str) -> str:
    """The characters of `name` at bracket depth 0; `operator<` and `->` do not open or close anything."""
    out = []
    depth = 0
    previous = ""
    for char in name:
        if char in _OPEN and not (char == "<" and "".join(out[-8:]) == "operator"):
            depth += 1
        elif char in _CLOSE and depth and not (char == ">" and previous == "-"):
            depth -= 1
        elif depth == 0:
            out.append(char)
        previous = char
    return "".join(out) if out else name
