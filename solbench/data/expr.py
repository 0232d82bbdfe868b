"""Safe arithmetic expressions over axis names.

Only numbers, names, ``+ - * / // % **``, unary ``+ -``, parentheses and the functions
``min max ceil floor`` are accepted. The expression is parsed with :mod:`ast` and walked;
nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

from solbench.errors import ExpressionError

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor}
_MAX_LEN = 1000
_MAX_EXPONENT = 64

Number = int | float


def parse(expr: str | int | float) -> ast.expr:
    """Parse and check an expression; raise ExpressionError naming it if it is not allowed."""
    if isinstance(expr, bool):
        raise ExpressionError(f"expression {expr!r}: booleans are not numbers")
    if isinstance(expr, (int, float)):
        return ast.Constant(value=expr)
    if not isinstance(expr, str):
        raise ExpressionError(f"expression {expr!r}: must be a string or a number")
    if len(expr) > _MAX_LEN:
        raise ExpressionError(f"expression {expr[:40]!r}...: longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"expression {expr!r}: syntax error ({err.msg})") from None
    _check(tree.body, expr)
    return tree.body


def _check(node: ast.AST, src: str) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExpressionError(f"expression {src!r}: only numbers are allowed, not {node.value!r}")
    elif isinstance(node, ast.Name):
        pass
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExpressionError(f"expression {src!r}: operator {type(node.op).__name__} is not allowed")
        _check(node.left, src)
        _check(node.right, src)
    elif isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise ExpressionError(f"expression {src!r}: operator {type(node.op).__name__} is not allowed")
        _check(node.operand, src)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
            raise ExpressionError(
                f"expression {src!r}: only min, max, ceil and floor may be called"
            )
        if node.keywords or not node.args:
            raise ExpressionError(f"expression {src!r}: {node.func.id}() takes positional arguments only")
        for arg in node.args:
            _check(arg, src)
    else:
        raise ExpressionError(
            f"expression {src!r}: {type(node).__name__} is not allowed "
            "(use numbers, axis names, + - * / // % **, min max ceil floor)"
        )


def names(expr: str | int | float) -> set[str]:
    """The axis names an expression refers to (callee names excluded)."""
    tree = parse(expr)
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in callees}


def evaluate(expr: str | int | float, env: Mapping[str, Number]) -> Number:
    """Evaluate an expression with axis values from ``env``."""
    tree = parse(expr)
    return _eval(tree, env, str(expr))


def _eval(node: ast.AST, env: Mapping[str, Number], src: str) -> Number:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            known = ", ".join(sorted(env)) or "none"
            raise ExpressionError(f"expression {src!r}: unknown name {node.id!r} (known axes: {known})")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, env, src)
        right = _eval(node.right, env, src)
        # The cap guards against huge results; a base in [-1, 1] cannot grow, so any exponent is safe
        # (MoE byte formulas use the expected distinct-expert count E*(1-(1-K/E)**T)).
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT and abs(left) > 1:
            raise ExpressionError(f"expression {src!r}: exponent {right} is larger than {_MAX_EXPONENT}")
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExpressionError(f"expression {src!r}: division by zero") from None
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env, src))
    if isinstance(node, ast.Call):
        args = [_eval(a, env, src) for a in node.args]
        fn = _FUNCS[node.func.id]  # type: ignore[union-attr]
        if fn in (math.ceil, math.floor):
            if len(args) != 1:
                raise ExpressionError(f"expression {src!r}: {node.func.id}() takes one argument")  # type: ignore[union-attr]
            return fn(args[0])
        return fn(*args)
    raise ExpressionError(f"expression {src!r}: cannot evaluate {type(node).__name__}")
