"""Sliding-window attention: the share of a causal layer's attention work a windowed layer does.

Notation: s sequence (keys = queries, self-attention), w window (ModelSpec.sliding_window: query i sees keys
max(0, i - w + 1) .. i, min(i + 1, w) of them), B = 128 the fused kernel's query and key tile.

Sources:
- Megatron-Core 0.19.2 megatron/core/transformer/utils.py is_layer_window_attention (which layers are windowed)
  and extensions/transformer_engine.py (window_size passed to TE's fused attention); Megatron-Bridge 0.3.1
  models/gpt_oss/gpt_oss_provider.py: window_size (128, 0), window_attn_skip_freq 2.
- FlashAttention-2 (Dao 2023, section 3.1.1 "causal masking"): blocks whose every score is masked are skipped,
  blocks on the mask's edge are computed in full and masked; flash-attn 2.3 added window_size (local attention)
  with the same block skipping (its kernels' n_block_min / n_block_max), and FlashAttention-3 (Shah et al. 2024)
  keeps it. So time goes by the B x B tiles a query tile visits, the partly masked ones included.

Conventions:
- Model FLOPs (MFU) count a windowed query's min(w, s) keys in full, as parplan counts a causal query's s keys
  (PaLM / Korthikanti: no causal halving): only work the layer can do is counted. Megatron-Bridge 0.3.1's
  TFLOP/s (megatron/bridge/training/utils/flop_utils.py transformer_flops) ignores window_size and halves every
  layer's attention (s / 2 keys): for GPT-OSS at s = 4096 its attention term is 0.5 of a full layer's, parplan's
  0.5 + 0.5 x 128 / 4096 = 0.516 (docs/models.md).
- Time: a windowed layer's fused attention takes the causal layer's time x visited tiles windowed / visited
  tiles causal, and its efficiency curve (costmodels.compute.attention_efficiency: the fixed cost of a query tile
  over the keys it visits) is read at s x that same ratio, the scale on which the causal fit reads s.
Known deviations: Megatron's --window-size (w, 0) lets a query see w + 1 keys (itself and w before), Hugging
Face's sliding_window w sees w; both are read as w (a 1/w difference). Unfused attention computes every score and
masks afterwards: no saving (compute.attention_core_s). Under context parallelism each rank's share shrinks by the
same ratio; the K/V exchange is priced as without a window.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from costmodels.model_spec import ModelSpec

TILE = 128  # FlashAttention-2/3 query and key block on Hopper for head dims <= 128


def visited_tiles(seq: float, window: float, tile: int = TILE) -> float:
    """B x B (query, key) tiles holding at least one unmasked score of causal self-attention over s tokens with
    window w (0 = none): query tile q spans rows qB .. qB + B - 1 and visits key tiles floor(max(0, qB - w + 1) / B)
    to q (the diagonal). Partly masked tiles count whole, as the kernels compute them."""
    n = math.ceil(seq / tile)
    if not window or window >= seq:
        return n * (n + 1) / 2
    return float(sum(q - max(0, q * tile - window + 1) // tile + 1 for q in range(n)))


def window_time_ratio(seq: float, window: float) -> float:
    """A windowed layer's fused-attention tiles over a causal layer's, unitless, in (0, 1]: 1 when w = 0 or w >= s."""
    return visited_tiles(seq, window) / visited_tiles(seq, 0)


def window_flops_ratio(seq: float, window: float) -> float:
    """A windowed layer's model FLOPs of QK^T and PV over a full layer's (model convention): min(w, s) / s."""
    return min(window, seq) / seq if window else 1.0


def windowed_share(model: ModelSpec) -> float:
    """Share of the model's layers that attend through the window (0 without one): the layer-mix average every
    per-layer cost uses. Known deviation: a pipeline stage is priced at the model's mix, not its own (exact when
    full_attention_interval divides each stage's layers, as GPT-OSS's 2 does for even stages)."""
    return model.windowed_layers / model.num_layers if model.sliding_window else 0.0


def full_attention_interval_of(windowed: Sequence[bool]) -> Optional[int]:
    """ModelSpec.full_attention_interval of a per-layer list (True = the layer uses the window): the n for which
    layer i (0-based) attends fully exactly when (i + 1) % n == 0 (0: every layer windowed, 1: none), as
    ModelSpec.is_windowed_layer reads it; None where no n gives the list."""
    for n in [0, *range(1, len(windowed) + 1)]:
        if all(w == (not n or (i + 1) % n != 0) for i, w in enumerate(windowed)):
            return n
    return None
