"""Safe arithmetic expressions over axis names.

Only numbers, names, ``+ - * / // % **``, unary ``+ -``, parentheses and the functions
``min max ceil floor`` are accepted. The expression is parsed with :mod:`ast` and walked;
nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
from collections.abc import Mapping
from functools import lru_cache

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
_ARITY = {"min": (2, None), "max": (2, None), "ceil": (1, 1), "floor": (1, 1)}
_MAX_LEN = 1000
_MAX_DEPTH = 100  # the checks and the evaluator recurse; real formulas nest under 20
_MAX_EXPONENT = 64
LIMIT = 2**63
"""Every value an expression produces, constants and names and each step included, must be finite and
smaller than this in magnitude: sizes, FLOPs and bytes are int64 in torch and in the records, and a bound
on each step keeps a 1000-character expression from building a number of a million digits."""

Number = int | float


def parse(expr: str | int | float) -> ast.expr:
    """Parse and check an expression; raise ExpressionError naming it if it is not allowed."""
    if isinstance(expr, bool):
        raise ExpressionError(f"expression {_quoted(expr)}: booleans are not numbers")
    if isinstance(expr, (int, float)):
        return ast.Constant(value=expr)
    if not isinstance(expr, str):
        raise ExpressionError(f"expression {_short(expr)}: must be a string or a number")
    return _parse_text(expr)


@lru_cache(maxsize=4096)
def _parse_text(expr: str) -> ast.expr:
    """The checked tree of an expression (cached: validation evaluates each formula once per workload)."""
    if len(expr) > _MAX_LEN:
        raise ExpressionError(f"expression {expr[:40]!r}...: longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"expression {_quoted(expr)}: syntax error ({err.msg})") from None
    except (ValueError, RecursionError, MemoryError) as err:  # a NUL byte; nesting the parser gives up on
        raise ExpressionError(f"expression {_quoted(expr)}: cannot be parsed ({type(err).__name__})") from None
    if _depth(tree.body) > _MAX_DEPTH:
        raise ExpressionError(f"expression {_quoted(expr)}: nested more than {_MAX_DEPTH} levels deep")
    _check(tree.body, expr)
    return tree.body


def _quoted(src: str) -> str:
    """The expression as error messages name it: quoted, cut at 80 characters."""
    text = repr(src)
    return text if len(text) <= 80 else text[:76] + "...'"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _depth(node: ast.AST) -> int:
    """How deep a tree is, without recursion (the parser accepts deeper trees than Python's stack)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check(node: ast.AST, src: str) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExpressionError(f"expression {_quoted(src)}: only numbers are allowed, not {_short(node.value)}")
    elif isinstance(node, ast.Name):
        pass
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExpressionError(f"expression {_quoted(src)}: operator {type(node.op).__name__} is not allowed")
        _check(node.left, src)
        _check(node.right, src)
    elif isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNARY:
            raise ExpressionError(f"expression {_quoted(src)}: operator {type(node.op).__name__} is not allowed")
        _check(node.operand, src)
    elif isinstance(node, ast.Call):
        _check_call(node, src)
    else:
        raise ExpressionError(
            f"expression {_quoted(src)}: {type(node).__name__} is not allowed "
            "(use numbers, axis names, + - * / // % **, min max ceil floor)"
        )


def _check_call(node: ast.Call, src: str) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
        raise ExpressionError(f"expression {_quoted(src)}: only min, max, ceil and floor may be called")
    name = node.func.id
    if node.keywords or not node.args:
        raise ExpressionError(f"expression {_quoted(src)}: {name}() takes positional arguments only")
    least, most = _ARITY[name]
    if len(node.args) < least or (most is not None and len(node.args) > most):
        takes = "one argument" if most == 1 else f"at least {least} arguments"
        raise ExpressionError(f"expression {_quoted(src)}: {name}() takes {takes}")
    for arg in node.args:
        _check(arg, src)


def names(expr: str | int | float) -> set[str]:
    """The axis names an expression refers to (callee names excluded)."""
    tree = parse(expr)
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in callees}


_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}


@lru_cache(maxsize=1024)
def parse_relation(text: str) -> ast.Compare:
    """A constraint between axes: expressions joined by ``== != < <= > >=`` (chains allowed: ``1 <= P <= 64``)."""
    if not isinstance(text, str):
        raise ExpressionError(f"constraint {_short(text)}: must be a string like 'L == B + 1'")
    if len(text) > _MAX_LEN:
        raise ExpressionError(f"constraint {text[:40]!r}...: longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as err:
        raise ExpressionError(f"constraint {_quoted(text)}: syntax error ({err.msg})") from None
    except (ValueError, RecursionError, MemoryError) as err:
        raise ExpressionError(f"constraint {_quoted(text)}: cannot be parsed ({type(err).__name__})") from None
    if not isinstance(tree, ast.Compare) or any(type(op) not in _COMPARE for op in tree.ops):
        raise ExpressionError(f"constraint {_quoted(text)}: must compare expressions with == != < <= > >=")
    if _depth(tree) > _MAX_DEPTH:
        raise ExpressionError(f"constraint {_quoted(text)}: nested more than {_MAX_DEPTH} levels deep")
    for side in (tree.left, *tree.comparators):
        _check(side, text)
    return tree


def relation_names(text: str) -> set[str]:
    """The axis names a constraint refers to."""
    tree = parse_relation(text)
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in callees}


def holds(text: str, env: Mapping[str, Number]) -> bool:
    """Whether a constraint holds for these axis values (every link of a chain)."""
    tree = parse_relation(text)
    values = [_eval(side, env, text) for side in (tree.left, *tree.comparators)]
    return all(_COMPARE[type(op)](a, b) for op, a, b in zip(tree.ops, values, values[1:], strict=False))


def evaluate(expr: str | int | float, env: Mapping[str, Number]) -> Number:
    """Evaluate an expression with axis values from ``env``.

    Raises ExpressionError naming the expression when a step is not a finite real number below
    :data:`LIMIT` in magnitude (``1e308 * 10``, a product of many large sizes, ``(-8) ** 0.5``).
    """
    tree = parse(expr)
    return _eval(tree, env, str(expr))


def _eval(node: ast.AST, env: Mapping[str, Number], src: str) -> Number:
    if isinstance(node, ast.Constant):
        value = node.value
    elif isinstance(node, ast.Name):
        if node.id not in env:
            known = ", ".join(sorted(env)) or "none"
            raise ExpressionError(f"expression {_quoted(src)}: unknown name {node.id!r} (known axes: {known})")
        value = env[node.id]
    elif isinstance(node, ast.BinOp):
        value = _eval_binop(node, env, src)
    elif isinstance(node, ast.UnaryOp):
        value = _UNARY[type(node.op)](_eval(node.operand, env, src))
    elif isinstance(node, ast.Call):
        value = _FUNCS[node.func.id](*[_eval(a, env, src) for a in node.args])  # type: ignore[union-attr]
    else:
        raise ExpressionError(f"expression {_quoted(src)}: cannot evaluate {type(node).__name__}")
    return _in_range(value, node, src)


def _eval_binop(node: ast.BinOp, env: Mapping[str, Number], src: str) -> Number:
    left = _eval(node.left, env, src)
    right = _eval(node.right, env, src)
    # The cap guards against huge results; a base in [-1, 1] cannot grow, so any exponent is safe
    # (MoE byte formulas use the expected distinct-expert count E*(1-(1-K/E)**T)).
    if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT and abs(left) > 1:
        raise ExpressionError(f"expression {_quoted(src)}: exponent {right} is larger than {_MAX_EXPONENT}")
    try:
        return _BINOPS[type(node.op)](left, right)
    except ZeroDivisionError:
        raise ExpressionError(f"expression {_quoted(src)}: division by zero") from None
    except OverflowError:
        raise ExpressionError(f"expression {_quoted(src)}: {_show(node)} overflows ({_RANGE})") from None


_RANGE = "values must be finite and below 2^63 in magnitude"


def _in_range(value: object, node: ast.AST, src: str) -> Number:
    """``value`` if it is a finite real number below LIMIT in magnitude; else an error naming the step."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # complex: (-8) ** 0.5
        raise ExpressionError(f"expression {_quoted(src)}: {_show(node)} is not a real number")
    magnitude = abs(value) if isinstance(value, int) else abs(float(value))
    if not magnitude < LIMIT:  # also NaN
        shown = _show(node)
        result = "" if isinstance(node, ast.Constant) else f" = {_number(value)}"
        raise ExpressionError(f"expression {_quoted(src)}: {shown}{result} is out of range ({_RANGE})")
    return value  # type: ignore[return-value]


def _show(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: object) -> str:
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"about 2^{abs(value).bit_length() - 1}"  # str() of a 5,000-digit int raises
    return f"{float(value):.4g}"  # type: ignore[arg-type]
