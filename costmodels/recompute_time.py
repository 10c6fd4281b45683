"""Forward work that Megatron-Core's selective recompute of named modules runs again in backward, per layer and
micro-batch on one GPU.

Notation (SI units): as costmodels.compute. M tokens of the micro-batch on one GPU, u = 1/tp under sequence
parallelism (else 1), h hidden, P routed (token, expert) rows through the GPU's experts (moe_compute.routed_rows).

Each module in --recompute-modules (Layout.recompute_modules; Megatron's default core_attn) is checkpointed on its
own and its forward runs once more during backward (megatron-core 0.16-0.19, transformer_config.py
recompute_modules; transformer_layer.py, moe/moe_layer.py, moe/experts.py, mlp.py, multi_latent_attention.py):
- core_attn: the attention core (flash attention recomputes nothing else).
- layernorm: the norms that are modules of their own. Transformer Engine fuses a dense layer's norms into the next
  linear (LayerNormLinear), so only an MoE layer's pre-MLP norm and MLA's input norm run again: read h, write h
  per token (2 bytes each).
- moe_act: the routed experts' activation over the P rows (moe_compute.expert_activation_bytes), with a clamped
  SwiGLU's passes over chunk views at costmodels.strided's rate (moe_compute.expert_strided_bytes).
- shared_experts: the shared experts' two GEMMs and activation.
- mlp (dense layers): the MLP's two GEMMs and activation.
- moe (MoE layers): the whole MoE block: router, experts, shared experts, activations, permutes, and the dispatch
  and combine once more (returned as one more EP pass, which costmodels.timing prices like the others).
- mla_up_proj (MLA): the query and key/value up projections.
Which tensors each module frees is costmodels.activations.module_recompute_savings; this module is its time side,
and the hardware FLOPs the re-runs add (recompute_flops: GEMMs and attention only; norms and activations add none).
Known deviations: the RoPE re-applied inside mla_up_proj and the tensor-parallel collectives inside a recomputed MoE
block (etp > 1) are left out; GEMMs run again at the forward's efficiency, FP8 casts of recomputed inputs are not
repeated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from costmodels import compute as cmp
from costmodels import moe_compute, strided
from costmodels.activations import ActShape
from costmodels.compute import Gemm
from costmodels.model_spec import ModelSpec
from costmodels.moe_timing import permute_s
from costmodels.params import mla_up_matrices

if TYPE_CHECKING:  # a timing Context; imported for types only (timing imports this module)
    from costmodels.timing import Context

NORM_BYTES_PER_ELEMENT = 4  # a norm's forward reads one 16-bit element and writes one


def _gemms_s(c: "Context", gemms: list[Gemm]) -> float:
    """Forward seconds of `gemms`, each at its own efficiency (compute.linear_s' rule)."""
    return sum(cmp.gemm_s(c.dev, g.m, g.k, g.n, g.count) / g.rate for g in gemms)


def _bytes_s(c: "Context", nbytes: float) -> float:
    """Seconds of memory-bound forward work at the stack's element-wise fusion (compute.elementwise_bytes' rule)."""
    return cmp.memory_s(c.dev16, nbytes * c.stack.elementwise_scale * c.train.activation_scale)


def strided_view_s(c: "Context", nbytes: float) -> float:
    """Seconds of eager element-wise passes over chunk views (costmodels.strided: issue-bound, so neither the HBM
    rate nor the stack's element-wise fusion applies)."""
    return strided.strided_s(c.cluster.gpu_profile, c.dev16, nbytes * c.train.activation_scale)


def separate_norms(c: "Context", moe: bool) -> int:
    """Norms of a layer that are modules of their own: an MoE layer's pre-MLP norm, MLA's input norm."""
    return (1 if moe else 0) + (1 if c.model.mla is not None else 0)


def _moe_block_s(c: "Context") -> float:
    """Forward seconds of the whole MoE block but its dispatch: its GEMMs, activations and permutes."""
    gemms = cmp.mlp_gemms(c.model, c.x, True, c.stack.moe_grouped_gemm)
    return (_gemms_s(c, gemms) + _bytes_s(c, moe_compute.routed_activation_bytes(c.model, c.x))
            + strided_view_s(c, cmp.strided_bytes(c.model, c.x, True)) + permute_s(c))


def _module_s(c: "Context", module: str, moe: bool, core_s: float) -> float:
    """Forward seconds one recomputed module runs again in a layer (0 where the module is not in it)."""
    m, x = c.model, c.x
    if module == "core_attn":
        return core_s
    if module == "layernorm":
        return _bytes_s(c, separate_norms(c, moe) * NORM_BYTES_PER_ELEMENT * x.tokens * x.u * m.hidden_size)
    if module == "mla_up_proj":
        return _gemms_s(c, [Gemm(x.tokens, k, n) for k, n in mla_up_matrices(m, x.tp)])
    if module == "mlp" and not moe:
        return (_gemms_s(c, cmp.mlp_gemms(m, x, False)) + _bytes_s(c, cmp.dense_activation_bytes(m, x))
                + strided_view_s(c, cmp.strided_bytes(m, x, False)))
    if module == "moe_act" and moe:
        return (_bytes_s(c, moe_compute.expert_activation_bytes(m, x))
                + strided_view_s(c, moe_compute.expert_strided_bytes(m, x)))
    if module == "shared_experts" and moe:
        return (_gemms_s(c, cmp.shared_expert_gemms(m, x)) + _bytes_s(c, moe_compute.shared_activation_bytes(m, x))
                + strided_view_s(c, moe_compute.shared_strided_bytes(m, x)))
    if module == "moe" and moe:
        return _moe_block_s(c)
    return 0.0


def _rerun(modules: tuple[str, ...], moe: bool) -> set[str]:
    """The modules whose forward runs again in a layer: a module inside another one recomputed (moe holds moe_act
    and shared_experts) is counted once, with its container."""
    mods = set(modules)
    return mods - {"moe_act", "shared_experts"} if moe and "moe" in mods else mods


def module_recompute_s(c: "Context", moe: bool, core_s: float) -> tuple[float, int]:
    """(seconds, extra EP passes) that selective recompute of the layout's modules (c.x.modules) adds to one layer
    and micro-batch: each module's forward once more; the moe module also dispatches and combines once more."""
    mods = _rerun(c.x.modules, moe)
    seconds = sum(_module_s(c, mod, moe, core_s) for mod in sorted(mods))
    return seconds, 1 if moe and "moe" in mods else 0


def recompute_flops(model: ModelSpec, x: ActShape, moe: bool) -> float:
    """Extra forward FLOPs per layer that recompute adds (hardware FLOPs): the whole layer (full), or the GEMMs
    and attention core of the selectively recomputed modules (x.modules; the default is the attention core)."""
    if x.recompute == "full":
        return cmp.layer_flops(model, x, moe)
    if x.recompute != "selective":
        return 0.0
    mods = _rerun(x.modules, moe)
    flops = cmp.attention_core_flops(model, x) if "core_attn" in mods else 0.0
    if ("mlp" in mods and not moe) or ("moe" in mods and moe):
        flops += cmp.mlp_flops(model, x, moe)
    if "shared_experts" in mods and moe:
        flops += cmp.shared_expert_flops(model, x)
    if "mla_up_proj" in mods:
        flops += sum(2 * x.tokens * k * n for k, n in mla_up_matrices(model, x.tp))
    return flops
