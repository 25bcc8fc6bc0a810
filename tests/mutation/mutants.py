"""Simple AST mutants of one module: flipped comparisons, and/or, +/-, constants +-1, negated conditions,
`return None`, deleted statements."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

COMPARE_FLIPS: dict[type, type] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
BINOP_FLIPS: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
DELETABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise)


@dataclass(frozen=True)
class Mutant:
    index: int
    line: int
    kind: str
    source: str


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _Sites(ast.NodeVisitor):
    """Every mutable site inside function bodies, in a stable order: (node path id, kind, line)."""

    def __init__(self) -> None:
        self.sites: list[tuple[int, str, int]] = []
        self._depth = 0

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._depth += 1
        for statement in node.body:
            self.visit(statement)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def _add(self, node: ast.AST, kind: str) -> None:
        if self._depth:
            self.sites.append((id(node), kind, getattr(node, "lineno", 0)))

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Compare) and type(node.ops[0]) in COMPARE_FLIPS:
            self._add(node, "compare")
        elif isinstance(node, ast.BoolOp):
            self._add(node, "and/or")
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_FLIPS:
            self._add(node, "binop")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            self._add(node, "const+1")
            self._add(node, "const-1")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._add(node, "drop-not")
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            self._add(node, "negate")
        returns_none = (
            isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and node.value.value is None
        )
        if isinstance(node, ast.Return) and node.value is not None and not returns_none:
            self._add(node, "return-none")
        if isinstance(node, DELETABLE) and not _is_docstring(node):
            self._add(node, "delete")
        super().generic_visit(node)


class _Apply(ast.NodeTransformer):
    def __init__(self, target: int, kind: str) -> None:
        self.target, self.kind = target, kind

    def visit(self, node: ast.AST):  # type: ignore[override]
        if id(node) != self.target:
            return super().visit(node)
        return _mutate(node, self.kind)


def _mutate(node: ast.AST, kind: str) -> ast.AST:
    if kind == "compare":
        node.ops[0] = COMPARE_FLIPS[type(node.ops[0])]()
    elif kind == "and/or":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "binop":
        node.op = BINOP_FLIPS[type(node.op)]()
    elif kind in ("const+1", "const-1"):
        node.value += 1 if kind == "const+1" else -1
    elif kind == "drop-not":
        return node.operand
    elif kind == "negate":
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif kind == "return-none":
        node.value = ast.Constant(value=None)
    elif kind == "delete":
        return ast.Pass()
    return node


def mutants(source: str) -> Iterator[Mutant]:
    """Every mutant of `source` whose code differs from the original."""
    original = ast.unparse(ast.parse(source))
    tree = ast.parse(source)
    finder = _Sites()
    finder.visit(tree)
    index = 0
    for site_id, kind, line in finder.sites:
        # a deep copy walks in the same order as the original, so the k-th node of one is the k-th of the other
        fresh = copy.deepcopy(tree)
        target = {id(orig): new for orig, new in zip(ast.walk(tree), ast.walk(fresh), strict=True)}[site_id]
        mutated = _Apply(id(target), kind).visit(fresh)
        ast.fix_missing_locations(mutated)
        text = ast.unparse(mutated)
        if text != original:
            yield Mutant(index, line, kind, text)
            index += 1
