"""The least work of a call (``cost`` in task.yaml) and the speed-of-light time it implies.

A task declares, per call, the bytes that must cross device memory (each input read once, each
output written once) and the FLOPs, as arithmetic over the case's params::

    cost: {bytes: "2 * M * N * bytes_of(dtype)", flops: "8 * M * N"}

Expressions are parsed, never executed: numbers, param names, ``+ - * / // % **``, parentheses,
``min``, ``max``, ``ceil``, ``floor`` and ``bytes_of(dtype)``. The speed-of-light time of a case is
``max(bytes / memory bandwidth, flops / peak FLOP rate)`` with the GPU's datasheet numbers; the
judge rejects a measured time below a fraction of it as impossible.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from typing import Any

# A measured time below this fraction of the datasheet bound is rejected: kernels reach at most
# ~90% of datasheet bandwidth, and outputs still in L2 at the end of a block leave some slack.
SOL_FRACTION = 0.8

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
               "float8_e5m2": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
               "bool": 1, "complex64": 8}

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}


class CostError(ValueError):
    pass


def bytes_of(dtype: Any) -> int:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise CostError(f"bytes_of: unknown dtype {name!r}")
    return DTYPE_BYTES[name]


_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load,
                  ast.USub, ast.UAdd, *_BINARY)
_FUNCTIONS = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "bytes_of": bytes_of}


def parse(expression: str) -> ast.Expression:
    """Parse and check an expression; raises ``CostError`` naming what is not allowed."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise CostError(f"not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
                raise CostError(f"only {', '.join(sorted(_FUNCTIONS))} may be called")
        elif not isinstance(node, _ALLOWED_NODES):
            raise CostError(f"{type(node).__name__} is not allowed in a cost expression")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str):
            raise CostError("constants must be numbers or strings")
    return tree


def evaluate(expression: str, params: Mapping[str, Any]) -> float:
    """The value of ``expression`` for one case's ``params``."""
    tree = parse(expression)

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in params:
                return params[node.id]
            raise CostError(f"unknown name {node.id!r} (the case's params are "
                            f"{', '.join(sorted(params)) or 'none'})")
        if isinstance(node, ast.UnaryOp):
            operand = value(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise CostError("exponent too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            return _FUNCTIONS[node.func.id](*(value(a) for a in node.args))
        raise CostError(f"{type(node).__name__} is not allowed")

    try:
        result = value(tree)
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise CostError(str(exc)) from None
    if not isinstance(result, int | float) or isinstance(result, bool) or result < 0:
        raise CostError(f"evaluates to {result!r}, expected a non-negative number")
    return float(result)


def speed_of_light_ms(bytes_expr: str | None, flops_expr: str | None, params: Mapping[str, Any],
                      memory_bandwidth: float | None, peak_flops: float | None) -> float | None:
    """The least time of one call in ms on a GPU with these peaks, or None when unknown."""
    bounds = []
    if bytes_expr and memory_bandwidth:
        bounds.append(evaluate(bytes_expr, params) / memory_bandwidth)
    if flops_expr and peak_flops:
        bounds.append(evaluate(flops_expr, params) / peak_flops)
    return max(bounds) * 1000 if bounds else None
