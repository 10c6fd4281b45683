"""The clamped SwiGLU of GPT-OSS (ModelSpec.glu_clamp): what the clamp adds to a gated MLP's element-wise work
and to its stored activations, per row of its fc1 output (2f wide: gate | linear halves, f each).

Source: megatron-core 0.19.2 megatron/core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl (what
TEGroupedMLP.bias_act_func in transformer/moe/experts.py calls for quick_gelu GLUs): with a clamp value it runs,
as eager PyTorch ops outside the jit-fused WeightedQuickGeGLUFunction,
    x_glu, x_linear = input.chunk(2, -1)                        # views, no copy
    input = torch.cat((x_glu.clamp(max=c), x_linear.clamp(-c, c)), -1)
Element passes over the rows (reads + writes, f-wide units):
- forward: two clamps read f and write f each (4), the cat reads 2f and writes 2f (4): 8;
- backward (autograd): the cat's backward narrows the gradient (views, no copy); each clamp's backward reads the
  gradient and its saved input and writes the masked gradient (3 each: 6); chunk's backward concatenates the two
  gradients (read 2f, write 2f: 4): 10.
18 f element passes per row in all. parplan's time model charges a layer's backward element-wise work at twice
its forward (costmodels.timing.layer_time), so the clamp is priced as 6 f per forward pass, which makes forward +
backward exactly 18 f (a full-recompute forward, really 8 f, is charged 6 f).
Memory: each clamp saves its input for backward, views of fc1's output, so fc1's 2f-wide output stays alive next
to the cat's 2f-wide output that the fused GLU saves: 2 f-wide 16-bit tensors more per row
(costmodels.activations).
Bound (benchmarks/data/measured/gpu_moe_h100.csv glu_clamped / glu_plain, one H100, (16384, 2 x 2880) bf16):
eager clamped quick-GeGLU fwd + bwd 2.358 ms against eager silu(gate) * up 1.048 ms. That difference also holds
the eager quick-GeGLU's extra ops (sigmoid, scale, offset), so the clamp's priced time must stay below it
(tests/test_attention_window.py).
Known deviations: Transformer Engine's fused ScaledClampedQGeGLU op (megatron-core's fused-ops MoE path, taken
when the installed TE has it) clamps inside one kernel and costs nothing extra: parplan prices the eager path.
A dense quick-GeGLU MLP runs fully unfused in Megatron-Core (mlp.py fuses only gelu and swiglu without
per-token scales); it is priced like the experts' path (a lower bound).
"""

from __future__ import annotations

from costmodels.model_spec import ModelSpec

ACT_BYTES = 2
FORWARD_EQUIVALENT_PASSES = 6.0  # f-wide element passes per row per priced forward (18 over fwd + 2x bwd)
SAVED_WIDTHS = 2.0  # f-wide tensors per row the clamps keep for backward


def clamp_bytes_per_row(model: ModelSpec, width: float) -> float:
    """Forward-equivalent HBM bytes the clamp adds per row of a gated MLP of inner width `width` (f): 6 f x 2
    bytes; 0 without glu_clamp."""
    return ACT_BYTES * FORWARD_EQUIVALENT_PASSES * width if model.glu_clamp is not None else 0.0


def clamp_saved_widths(model: ModelSpec) -> float:
    """f-wide 16-bit tensors per row the clamp keeps for backward beyond the fused GLU's own: 2, or 0."""
    return SAVED_WIDTHS if model.glu_clamp is not None else 0.0
