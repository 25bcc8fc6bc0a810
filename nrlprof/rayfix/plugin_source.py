"""Reading Ray's plugin source: is it the plugin we know, and does it already keep the interpreter and quote?

Standard library only, no nrlprof imports: `patch_ray.py` loads this file by path on nodes without nrlprof.
"""

from __future__ import annotations

import ast


def problem(data: bytes, class_name: str) -> str | None:
    """Why `data` is not a plugin module we know how to fix (no class, no create/modify_context), or None."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError) as err:
        return f"does not parse ({err})"
    methods = _class_methods(tree, class_name)
    if methods is None:
        return f"no class {class_name}"
    if "create" not in methods or "modify_context" not in methods:
        return f"{class_name} has no create/modify_context"
    return None


def keeps_interpreter_and_quotes(data: bytes, class_name: str) -> bool:
    """Every `*.py_executable = ...` in `modify_context` reads the earlier interpreter and quotes the command."""
    methods = _class_methods(ast.parse(data), class_name) or {}
    if "modify_context" not in methods:
        return False
    assignments = [
        node.value
        for node in ast.walk(methods["modify_context"])
        if isinstance(node, ast.Assign) and any(_is_py_executable(target) for target in node.targets)
    ]
    return (
        bool(assignments)
        and all(_reads_py_executable(value) for value in assignments)
        and any(_quotes(value) for value in assignments)
        and not any(_joins_unquoted(value) for value in assignments)
    )


def _class_methods(tree: ast.Module, class_name: str) -> dict[str, ast.AST] | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            functions = (ast.FunctionDef, ast.AsyncFunctionDef)
            return {item.name: item for item in node.body if isinstance(item, functions)}
    return None


def _is_py_executable(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "py_executable"


def _reads_py_executable(value: ast.AST) -> bool:
    return any(_is_py_executable(node) for node in ast.walk(value))


def _is_quote_call(node: ast.AST) -> bool:
    """`shlex.quote(...)`, `shlex.join(...)` or a bare `quote(...)`."""
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    if isinstance(function, ast.Attribute):
        return (
            function.attr in ("quote", "join") and isinstance(function.value, ast.Name) and function.value.id == "shlex"
        )
    return isinstance(function, ast.Name) and function.id == "quote"


def _quotes(value: ast.AST) -> bool:
    return any(_is_quote_call(node) for node in ast.walk(value))


def _joins_unquoted(value: ast.AST) -> bool:
    """`" ".join(parts)` where the parts are not each passed through a quoting call."""
    for node in ast.walk(value):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
        ):
            continue
        parts = node.args[0] if node.args else None
        quoted_each = isinstance(parts, (ast.GeneratorExp, ast.ListComp)) and _is_quote_call(parts.elt)
        if not quoted_each:
            return True
    return False
