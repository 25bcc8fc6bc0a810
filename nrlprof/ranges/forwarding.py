"""Wrappers that take the wrapped function's own parameters, generated once per decorated function.

A `*args, **kwargs` wrapper packs a tuple and a dict at every call and unpacks them again: 100-230 ns a call on
2 cores (`bench/bench_annotate.py`), half of what an inactive `nrlprof.annotate` cost. A wrapper generated with the
function's parameters binds the arguments once and passes them on by name, with the function's own defaults (the
same objects), positional-only and keyword-only parameters, `*args` and `**kwargs` as the function has them.
Any other callable (a bound method, a `functools.partial`, a class, a builtin), or a function with a parameter named
like the wrapper's own locals, gets the `*args, **kwargs` form of the same body.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType

CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
# The wrapper's own names start so; a parameter that does too would be shadowed.
RESERVED = "_nrl_"
GENERIC = ("*_nrl_args, **_nrl_kwargs", "*_nrl_args, **_nrl_kwargs")


def _parameters(function: Callable) -> tuple[str, str, dict[str, object]] | None:
    """(the parameter list, the call's argument list, the defaults they name), or None."""
    if not isinstance(function, FunctionType):  # a bound method's code names `self`, which its call supplies
        return None
    code = function.__code__
    positional, keyword_only = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    index = positional + keyword_only
    varargs = names[index] if code.co_flags & CO_VARARGS else None
    index += varargs is not None
    varkw = names[index] if code.co_flags & CO_VARKEYWORDS else None
    used = [*names[:positional + keyword_only], varargs or "", varkw or ""]  # fmt: skip
    if any(name.startswith(RESERVED) for name in used):
        return None
    defaults = getattr(function, "__defaults__", None) or ()
    keyword_defaults = getattr(function, "__kwdefaults__", None) or {}
    bound: dict[str, object] = {}
    parameters: list[str] = []
    arguments: list[str] = []
    first_default = positional - len(defaults)
    for index, name in enumerate(names[:positional]):
        if index >= first_default:
            bound[f"{RESERVED}default_{index}"] = defaults[index - first_default]
            parameters.append(f"{name}={RESERVED}default_{index}")
        else:
            parameters.append(name)
        if index == code.co_posonlyargcount - 1:
            parameters.append("/")
        arguments.append(name)
    if varargs is not None:
        parameters.append(f"*{varargs}")
        arguments.append(f"*{varargs}")
    elif keyword_only:
        parameters.append("*")
    for name in names[positional : positional + keyword_only]:
        if name in keyword_defaults:
            bound[f"{RESERVED}kwdefault_{name}"] = keyword_defaults[name]
            parameters.append(f"{name}={RESERVED}kwdefault_{name}")
        else:
            parameters.append(name)
        arguments.append(f"{name}={name}")
    if varkw is not None:
        parameters.append(f"**{varkw}")
        arguments.append(f"**{varkw}")
    return ", ".join(parameters), ", ".join(arguments), bound


def generate(function: Callable, template: str, names: dict[str, object], exact: bool = True) -> Callable:
    """`template` (a `def wrapper({parameters}): ...` calling `_nrl_function({arguments})`) made for `function`.

    `names`: what the template's body reads besides the parameters (all starting with `_nrl_`); `exact=False`: the
    `*args, **kwargs` form whatever the function.
    """
    found = _parameters(function) if exact else None
    parameters, arguments, bound = found if found is not None else (*GENERIC, {})
    namespace = {**names, **bound, f"{RESERVED}function": function}
    exec(template.format(parameters=parameters, arguments=arguments), namespace)
    return namespace["wrapper"]
