"""Bash arithmetic `$((...))` on integers, after planner.files.shell_expand has put in the variables' values:
+ - * / % and parentheses (bash(1), ARITHMETIC EVALUATION: `/` truncates toward zero on 64-bit integers;
anything else, or a result past 64 bits, is not evaluated)."""

from __future__ import annotations

import ast
import operator
from typing import Optional

MAX_CHARS = 200  # an arithmetic expression in a launch script is a few dozen characters
def _div(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def _mod(left: int, right: int) -> int:
    return left - _div(left, right) * right


OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div, ast.FloorDiv: _div,
       ast.Mod: _mod}


def evaluate(flat: str) -> Optional[int]:
    """The value of an integer expression (variables already substituted), None when it is not one."""
    if len(flat) >= MAX_CHARS:
        return None
    try:
        return _eval(ast.parse(flat.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, MemoryError):
        return None


def _eval(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        left, right = _eval(node.left), _eval(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            return None
        value = OPS[type(node.op)](left, right)
        return value if abs(value) < 2**63 else None
    return None


__all__ = ["evaluate"]
