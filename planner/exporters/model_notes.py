"""Header lines for launch files whose format cannot state a model capability parplan priced.

DeepSpeed, torchrun (FSDP) and torchtitan launches name a training script or a model flavor; the model's
sliding-window attention, attention sinks and clamped GLU (ModelSpec sliding_window, full_attention_interval,
attention_sinks, glu_clamp) live in that model code, so the file cannot carry them and `parplan check` of it
cannot read them back: the header says what was priced. Megatron-LM states them as flags
(planner.frameworks.megatron.attention_flags)."""

from __future__ import annotations


def model_code_notes(model) -> list[str]:
    """One line naming what the model code must implement for the plan's numbers to hold (none when nothing)."""
    parts = []
    if model.sliding_window:
        n = model.full_attention_interval
        every = f"every {_ordinal(n)} layer full" if n else "on every layer"
        parts.append(f"sliding-window attention of {model.sliding_window} tokens ({every})")
    if model.attention_sinks:
        parts.append("learnable attention sinks")
    if model.glu_clamp is not None:
        parts.append(f"a SwiGLU clamped at {model.glu_clamp:g}")
    if not parts:
        return []
    return [f"Priced with {', '.join(parts)}: this format cannot state them; the model code must have them "
            "(`parplan check` of this file prices the model without them unless --model names it)."]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
