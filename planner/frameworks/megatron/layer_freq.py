"""Megatron-Core's `--moe-layer-freq`: which layers have an MoE MLP, read into ModelSpec's
first_k_dense_layers, moe_layer_period and moe_layer_offset, and written back.

Megatron-Core 0.19.2 (megatron/training/arguments.py moe_freq_type; models/gpt/gpt_layer_specs.py
get_gpt_decoder_block_spec) takes either
- an integer N: layer i (0-based) is MoE when i % N == 0 (1 = every layer), or
- a Python list expression, evaluated, one 0/1 per layer: "([0]*3+[1]*58)" (DeepSeek-V3's dense prefix),
  "[1,0,1,0]", "([1]+[0]*3)*12".
parplan evaluates only list displays of 0/1, `+` of lists and `*` by a whole number (no names, no calls),
then finds the fields that give the same layers: the first MoE layer, and the shortest period that repeats
from it. A pattern no prefix-plus-period describes is refused, naming it.
"""

from __future__ import annotations

import ast
import re

from costmodels.model_spec import moe_layer_fields
from planner.errors import UserError

MAX_ITEMS = 100_000  # longer than any model: refuse before building a list this large


def pattern(freq: str, layers: int) -> list[int]:
    """One 0/1 per layer from --moe-layer-freq (an integer or a list expression)."""
    text = str(freq).strip()
    if re.fullmatch(r"\+?[0-9]{1,18}", text):
        n = int(text)
        if not 1 <= n <= layers:
            raise UserError(f"--moe-layer-freq {text}: expected 1 to --num-layers ({layers})")
        return [1 if i % n == 0 else 0 for i in range(layers)]
    try:
        value = _evaluate(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise UserError(f"--moe-layer-freq {text[:60]!r}: parplan reads an integer or a list of 0/1 built "
                        f"with + and * ({exc})") from None
    if not isinstance(value, list) or len(value) != layers:
        got = len(value) if isinstance(value, list) else "a number"
        raise UserError(f"--moe-layer-freq {text[:60]!r}: {got} entries, --num-layers is {layers}")
    return value


def _evaluate(node):
    """A list of 0/1 or a whole number from a restricted expression tree (ValueError otherwise)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.List):
        items = [_evaluate(e) for e in node.elts]
        if any(i not in (0, 1) or isinstance(i, list) for i in items):
            raise ValueError("list entries must be 0 or 1")
        return items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        return _binary(node.op, _evaluate(node.left), _evaluate(node.right))
    raise ValueError(f"{type(node).__name__} is not allowed")


def _binary(op, left, right):
    if isinstance(op, ast.Add):
        if not (isinstance(left, list) and isinstance(right, list)):
            raise ValueError("+ joins two lists")
        if len(left) + len(right) > MAX_ITEMS:
            raise ValueError("too long")
        return left + right
    lst, times = (left, right) if isinstance(left, list) else (right, left)
    if not isinstance(lst, list) or isinstance(times, list) or times < 0 or len(lst) * times > MAX_ITEMS:
        raise ValueError("* repeats a list a whole number of times")
    return lst * times


def layer_fields(layers: list[int], text: str) -> dict:
    """first_k_dense_layers, moe_layer_period and moe_layer_offset that reproduce `layers` (0/1 per layer)."""
    if 1 not in layers:
        raise UserError(f"--moe-layer-freq {text[:60]!r}: no MoE layer")
    fields = moe_layer_fields([v == 1 for v in layers])
    if fields is None:
        raise UserError(f"--moe-layer-freq {text[:60]!r}: parplan prices dense leading layers followed by MoE "
                        "layers every N-th layer; this pattern is not one")
    return fields


def read(freq: str, layers: int) -> dict:
    """ModelSpec's layer-kind fields from --moe-layer-freq."""
    return layer_fields(pattern(freq, layers), str(freq))


def write(model) -> str | None:
    """--moe-layer-freq for `model` (None: every layer MoE, Megatron's default 1): the integer form where
    Megatron's own rule gives the layers, else one 0/1 per layer."""
    k, period, offset = model.first_k_dense_layers, model.moe_layer_period, model.moe_layer_offset
    if period == 1 and not k:
        return None
    if period == 1:
        return f"([0]*{k}+[1]*{model.num_layers - k})"
    if not k and not offset:
        return str(period)
    return "[" + ",".join("1" if model.is_moe_layer(i) else "0" for i in range(model.num_layers)) + "]"
