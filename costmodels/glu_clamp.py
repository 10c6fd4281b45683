"""The clamped SwiGLU of GPT-OSS (ModelSpec.glu_clamp): what the clamp adds to a gated MLP's element-wise work
and to its stored activations, per row of its fc1 output (2f wide: gate | linear halves, f each).

Source: megatron-core 0.19.2 megatron/core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl (what
TEGroupedMLP.bias_act_func in transformer/moe/experts.py calls for quick_gelu GLUs): with a clamp value it runs,
as eager PyTorch ops outside the jit-fused WeightedQuickGeGLUFunction,
    x_glu, x_linear = input.chunk(2, -1)                        # views, no copy
    input = torch.cat((x_glu.clamp(max=c), x_linear.clamp(-c, c)), -1)
Element passes over the rows (reads + writes, f-wide 16-bit units; a bool mask is half a unit), split by whether
the kernel reads a chunk view (row stride 2f: PyTorch's generic, issue-bound kernel, costmodels.strided) or
contiguous tensors (the vectorised kernel, at the HBM rate), as megatron-core 0.19.2 runs them on one H200
(benchmarks/data/measured/gpu_moe_mcore_h200.json, the launching ops of each kernel):
- forward: two clamps read a view each and write f (strided 2 + 2); the cat reads 2f and writes 2f (contiguous 4);
- backward (autograd): the cat's backward narrows the gradient (views, no copy). clamp(max) backward is
  le(x, c) (read 1, write a 0.5 mask) and where(mask, grad, 0) (read 0.5 + 1, write 1); clamp(-c, c) backward is
  ge and le (1.5 each), logical_and of the masks (contiguous 1.5) and where (2.5): strided 1.5 + 2.5 + 1.5 + 1.5 +
  2.5 = 9.5, contiguous 1.5. chunk's backward concatenates the two gradients (contiguous 4).
Strided 13.5 (forward 4), contiguous 9.5 (forward 4): 23 units in all (18 before this count: the masks were left
out). parplan's time model charges a layer's backward element-wise work at twice its forward
(costmodels.timing.layer_time), so each part is priced at a third of its total per forward pass (a recomputed
forward, really 4 + 4, is charged 4.5 + 3.2).
Memory: each clamp saves its input for backward, views of fc1's output, so fc1's 2f-wide output stays alive next
to the cat's 2f-wide output that the fused GLU saves: 2 f-wide 16-bit tensors more per row
(costmodels.activations).
Bound (benchmarks/data/measured/gpu_moe_h100.csv glu_clamped / glu_plain, one H100, (16384, 2 x 2880) bf16):
eager clamped quick-GeGLU fwd + bwd 2.358 ms against eager silu(gate) * up 1.048 ms. That difference also holds
the eager quick-GeGLU's extra ops (sigmoid, scale, offset), so the clamp's priced time must stay below it
(tests/test_attention_window.py). On the H200 the clamp path's kernels took 1.10 ms per layer (gpu_moe_mcore_h200.json,
grouped run), priced 1.14 (tests/test_moe_mcore_measured.py).
Known deviations: Transformer Engine's fused ScaledClampedQGeGLU op (megatron-core's fused-ops MoE path, taken
when the installed TE has it) clamps inside one kernel and costs nothing extra, and a compiled stack (torchtitan
with torch.compile) fuses the clamps into contiguous passes: parplan prices the eager path for every stack.
A dense quick-GeGLU MLP runs fully unfused in Megatron-Core (mlp.py fuses only gelu and swiglu without
per-token scales); it is priced like the experts' path (a lower bound).
"""

from __future__ import annotations

from costmodels.model_spec import ModelSpec

ACT_BYTES = 2
CONTIGUOUS_PASSES = 9.5  # f-wide element passes per row, forward + backward, on contiguous tensors (HBM rate)
STRIDED_PASSES = 13.5  # the same on chunk views (costmodels.strided rate)
SAVED_WIDTHS = 2.0  # f-wide tensors per row the clamps keep for backward


def clamp_bytes_per_row(model: ModelSpec, width: float) -> float:
    """Forward-equivalent HBM bytes of the clamp's contiguous passes per row of a gated MLP of inner width
    `width` (f): 9.5 / 3 f x 2 bytes; 0 without glu_clamp."""
    return ACT_BYTES * CONTIGUOUS_PASSES / 3 * width if model.glu_clamp is not None else 0.0


def clamp_strided_bytes_per_row(model: ModelSpec, width: float) -> float:
    """Forward-equivalent bytes of the clamp's passes over chunk views per row (13.5 / 3 f x 2 bytes), which run
    at costmodels.strided's rate, not the HBM rate; 0 without glu_clamp."""
    return ACT_BYTES * STRIDED_PASSES / 3 * width if model.glu_clamp is not None else 0.0


def clamp_saved_widths(model: ModelSpec) -> float:
    """f-wide 16-bit tensors per row the clamp keeps for backward beyond the fused GLU's own: 2, or 0."""
    return SAVED_WIDTHS if model.glu_clamp is not None else 0.0
