"""Megatron-LM's sliding-window, softmax and clamped-GLU flags <-> ModelSpec (GPT-OSS's capabilities).

Source: megatron-core 0.19.2 megatron/training/arguments.py: --window-size (tuple_type: "128,0" or "(128,0)";
-1 means unbounded), --window-attn-skip-freq (moe_freq_type: an int N, every N-th layer full, or a Python list
pattern such as "([1]*3+[0])*3", 1 = windowed), --quick-geglu (gated quick-GELU: three matrices, priced as SwiGLU);
TransformerConfig fields exposed as flags by ArgumentGroupFactory: --softmax-type vanilla|off-by-one|learnable,
--activation-func-clamp-value, --glu-linear-offset. megatron/core/transformer/utils.py is_layer_window_attention:
with no --window-size, --window-attn-skip-freq has no effect. Megatron-Bridge 0.3.1 GPTOSSProvider writes
window_size (128, 0), window_attn_skip_freq 2, softmax_type learnable, activation_func_clamp_value 7.0.
"""

from __future__ import annotations

import ast
import re

from costmodels.attention_window import full_attention_interval_of
from planner.errors import UserError

SOFTMAX_TYPES = ("vanilla", "off-by-one", "learnable")
MAX_PATTERN = 100_000


def window_data(a, layers: int) -> dict:
    """ModelSpec sliding_window and full_attention_interval from --window-size and --window-attn-skip-freq."""
    window = _window(a.str("--window-size", None))
    if not window:
        return {}
    freq = a.str("--window-attn-skip-freq", None)
    return {"sliding_window": window, "full_attention_interval": 0 if freq is None else _interval(freq, layers)}


def _window(text) -> int:
    """The left window of --window-size 'L,R' (0 for -1, unbounded); R must be 0 or -1 (a causal GPT)."""
    if text is None:
        return 0
    m = re.fullmatch(r"\(?\s*(-?[0-9]{1,9})\s*,\s*(-?[0-9]{1,9})\s*\)?", str(text))
    if not m or int(m.group(1)) < -1 or int(m.group(1)) == 0 or int(m.group(2)) not in (0, -1):
        raise UserError(f"--window-size {str(text)[:40]!r}: expected 'L,0' with L >= 1 keys (or -1: no window)")
    return max(int(m.group(1)), 0)


def _interval(text: str, layers: int) -> int:
    """full_attention_interval from an int N, or from a 0/1 pattern (1 = windowed) that is N-periodic: N - 1
    windowed layers, then a full one. Other patterns are refused: ModelSpec says the window by an interval."""
    text = str(text).strip()
    if re.fullmatch(r"[0-9]{1,9}", text):
        n = int(text)
        if n < 1:
            raise UserError(f"--window-attn-skip-freq {text!r}: must be at least 1")
        return n
    pattern = _pattern(text)
    if len(pattern) != layers:
        raise UserError(f"--window-attn-skip-freq {text[:60]!r}: {len(pattern)} entries for --num-layers {layers}")
    n = full_attention_interval_of([bool(v) for v in pattern])
    if n is not None:
        return n
    raise UserError(f"--window-attn-skip-freq {text[:60]!r}: parplan reads patterns of N-1 windowed layers then "
                    "one full layer, repeated (or an integer N)")


def _pattern(text: str) -> list[int]:
    """A 0/1 list expression of lists, ints, + and * only, evaluated without eval."""
    try:
        value = _eval(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        value = None
    if not isinstance(value, list) or any(v not in (0, 1) for v in value):
        raise UserError(f"--window-attn-skip-freq {text[:60]!r}: expected an integer or a list of 0 and 1 "
                        "such as '([1]*3+[0])*3'")
    return value


def _eval(node):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.List):
        return [_eval(e) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Mult) and isinstance(left, list) and isinstance(right, int):
            if len(left) * right > MAX_PATTERN:
                raise ValueError("pattern too long")
            return left * right
        if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
            return left + right
    raise ValueError("not a 0/1 list expression")


def sinks(a) -> bool:
    """attention_sinks from --softmax-type: learnable only (off-by-one adds a constant 1: no parameter)."""
    value = a.str("--softmax-type", "vanilla")
    if value not in SOFTMAX_TYPES:
        raise UserError(f"--softmax-type {value!r}: expected one of {', '.join(SOFTMAX_TYPES)}")
    return value == "learnable"


def glu_clamp(a):
    """glu_clamp from --activation-func-clamp-value (None when absent)."""
    text = a.str("--activation-func-clamp-value", None)
    if text is None:
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 < value <= 1e6:
        raise UserError(f"--activation-func-clamp-value {str(text)[:40]!r}: expected a number above 0")
    return value


def attention_model_data(a, layers: int) -> dict:
    """The window, sink and clamp fields of a Megatron launch (empty where none is set)."""
    data = window_data(a, layers)
    if sinks(a):
        data["attention_sinks"] = True
    clamp = glu_clamp(a)
    if clamp is not None:
        data["glu_clamp"] = clamp
    return data


def attention_args(m) -> list:
    """The flags that write a ModelSpec's window, sinks and clamp back (the inverse of attention_model_data)."""
    args = []
    if m.sliding_window:
        args.append(("--window-size", f"{m.sliding_window},0"))
        if m.full_attention_interval:
            args.append(("--window-attn-skip-freq", m.full_attention_interval))
    if m.attention_sinks:
        args.append(("--softmax-type", "learnable"))
    if m.glu_clamp is not None:  # with --quick-geglu (activation_flag): the only GLU Megatron-Core clamps
        args += [("--glu-linear-offset", "1.0"), ("--activation-func-clamp-value", repr(float(m.glu_clamp)))]
    return args


def activation_flag(m) -> str | None:
    """The MLP switch: --quick-geglu for a clamped GLU (TransformerConfig.activation_func_clamp_value is 'only used
    when activation_func is quick_gelu'; GPT-OSS's gate is quick-GELU with +1 on the linear half, which the
    exporter writes as --glu-linear-offset 1.0), else --swiglu for a gated MLP, else none (gelu)."""
    if m.activation != "swiglu":
        return None
    return "--quick-geglu" if m.glu_clamp is not None else "--swiglu"
