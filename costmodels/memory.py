"""Per-GPU memory of every pipeline stage: model states, activations, buffers.

Notation: P_d dense parameters on one GPU (after tp/pp split), P_e routed-expert parameters on
one GPU (after ep*etp/pp split), N_d = dp*cp ranks sharing the dense states, N_e = edp =
world/(etp*ep*pp) ranks sharing the expert states; w, g, k bytes per parameter of weights,
gradients and optimizer states (2, 2 or 4, 12 for mixed-precision Adam).

Source: ZeRO (Rajbhandari et al., SC'20) section 5 and Figure 1: ZeRO-0 (w+g+k)P, ZeRO-1
(w+g)P + kP/N, ZeRO-2 wP + (g+k)P/N, ZeRO-3 (w+g+k)P/N. Megatron's distributed optimizer shards
over the data-parallel group including context-parallel ranks, so N_d = dp*cp.
Activations: costmodels.activations (Korthikanti et al. MLSys'23). `other_bytes` holds ZeRO-3's
gathered-layer buffers; `transient_bytes` what lives only at the peak: the loss's logits and their
gradient on the last stage, or the optimizer step's temporaries, whichever is higher
(costmodels.memory_semantics gives each stack's numbers and their sources). The sum is what
torch.cuda.max_memory_allocated reports; `persistent_bytes` the part of it allocated once and kept
(the states, persistent_state_bytes); costmodels.device_memory adds the allocator's reserve on the
rest, the CUDA context and NCCL buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from costmodels import activations as act
from costmodels import offload
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.moe_timing import ep_overlap_applies
from costmodels.params import (ParamCount, embedding_params, head_params, local_layer_params, local_stage_params,
                               stage_layer_mix)
from costmodels.train_spec import TrainSpec

FP32_BYTES = 4  # a chunked loss's gradient accumulator (loss_transient_bytes)


@dataclass(frozen=True)
class StageMemory:
    """Bytes on one GPU of pipeline rank `stage` at its peak."""

    stage: int
    layers: int
    weights_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    other_bytes: int
    transient_bytes: int = 0
    persistent_bytes: int = 0  # the part of the total allocated once and kept (persistent_state_bytes)

    @property
    def total_bytes(self) -> int:
        """Sum of all parts: the allocated peak."""
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                + self.other_bytes + self.transient_bytes)


def zero_state_bytes(params: float, shards: int, zero: int, train: TrainSpec) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes for `params` parameters sharded `shards` ways under ZeRO `zero`.

    ZeRO paper Figure 1 with w, g, k = train's bytes per parameter; e.g. 7.5B, N = 64, Adam:
    120 / 31.4 / 16.6 / 1.9 GB for stages 0-3.
    """
    w, g, k = train.weight_bytes_per_param, train.grad_bytes_per_param, train.optimizer_bytes_per_param
    n = max(shards, 1)
    weights = params * w / (n if zero >= 3 else 1)
    grads = params * g / (n if zero >= 2 else 1)
    optimizer = params * k / (n if zero >= 1 else 1)
    return offload.on_gpu(weights, grads, optimizer, zero, train)  # what ZeRO-Offload/Infinity moves to the host


def memory_zero(lay) -> int:
    """The ZeRO stage the memory sees. ZeRO-2 or ZeRO-3 with pipelining keeps a stage's weights gathered and
    its gradients unsharded across the micro-batches of a step (torch.distributed.pipelining + FSDP2: torch
    2.13 pipelining/stage.py backward_maybe_with_nosync sets set_reshard_after_backward(False) and
    set_requires_gradient_sync(False) on an FSDPModule for every backward but the last; costmodels.sharding),
    so only the optimizer states stay sharded: ZeRO-1 memory. ZeRO-2 with pp runs only there (DeepSpeed's
    pipeline engine refuses ZeRO-2 and 3; Megatron has no ZeRO-2); it was priced with sharded gradients,
    4.2 GiB a GPU under the 8.5 GiB it holds for Llama 3 70B at tp8 pp4."""
    return 1 if lay.zero >= 2 and lay.pp > 1 else lay.zero


def persistent_state_bytes(weights: float, grads: float, optimizer: float, lay) -> float:
    """The model states allocated once and held from step to step: weights, gradient buffer and
    optimizer states, except under ZeRO-3 with pipelining, whose counted weights and gradients are the
    gathered and unsharded copies (memory_zero) that FSDP2 frees after each step's last backward:
    there only the optimizer states persist (the weight shards, 1/N of the weights, are left out).
    Why it matters: the allocator's fragmentation grows with what is freed and re-allocated, not
    with what stays put (costmodels.device_memory; torchtitan DeepSeek-V3 16B log: the first step's
    reserve grows by exactly the Adam moments' 14.9 GiB when they appear)."""
    if memory_zero(lay) < lay.zero:
        return optimizer
    return weights + grads + optimizer


def memory_train(train: TrainSpec, lay) -> TrainSpec:
    """The train spec whose byte counts the memory uses: the stack's gradient buffer (Megatron's fp32
    main grads), or with sharded pipelining the stack's accumulation dtype (FSDP2 + pipelining: fp32),
    unless the gradient dtype is given."""
    sem = train.stack_spec.memory
    pipelined = lay.pp > 1 and lay.zero >= 1 and sem.pp_grad_accum_bytes is not None
    grad_bytes = sem.pp_grad_accum_bytes if pipelined else sem.grad_buffer_bytes
    if train.grad_dtype is None and grad_bytes == 4:
        return train.model_copy(update={"grad_dtype": "fp32"})
    return train


def expert_train(train: TrainSpec, mtrain: TrainSpec, edp: int) -> TrainSpec:
    """The train spec of the routed experts' states: the memory's (memory_train), except where the stack
    leaves experts held whole (edp = 1) out of FSDP (MemorySemantics.whole_experts_outside_fsdp): their
    gradients then stay in the parameter dtype (or the gradient dtype given), never in the pipelined fp32
    accumulation."""
    if edp == 1 and train.stack_spec.memory.whole_experts_outside_fsdp:
        return train
    return mtrain


def expert_dp(cluster: ClusterSpec, lay: Layout) -> int:
    """edp = world / (etp * ep * pp): ranks holding the same experts (DESIGN.md section 2)."""
    return cluster.num_gpus // (lay.etp * lay.ep * lay.pp)


def act_shape(model: ModelSpec, train: TrainSpec, lay: Layout) -> act.ActShape:
    """Activation shape of one micro-batch on one GPU under `lay`."""
    sem = train.stack_spec.memory
    return act.ActShape(
        seq=train.seq_len(model), mbs=lay.mbs, tp=lay.tp, sp=lay.sp, cp=lay.cp, etp=lay.etp, ep=lay.ep,
        recompute=lay.recompute, flash=train.flash, selective=train.stack_spec.selective_recompute,
        norm_bytes=sem.norm_saved_bytes, glu_widths=sem.glu_saved_widths, expert_plain_widths=sem.expert_plain_widths,
        moe_allgather=train.moe_dispatcher == "allgather",
        gemm_in_bytes=sem.fp8_gemm_input_bytes if train.precision == "fp8" else act.ACT_BYTES,
        modules=recompute_modules(lay), moe_load=train.moe_load_factor(model, lay.ep),
    )


def recompute_modules(lay) -> tuple[str, ...]:
    """The layout's selective recompute modules; Megatron's default (core_attn) when not given (and for the
    search's candidates, which have no such field)."""
    mods = getattr(lay, "recompute_modules", None)
    return ("core_attn",) if mods is None else tuple(mods)


def stage_activation_bytes(model: ModelSpec, train: TrainSpec, lay: Layout, stage: int) -> float:
    """Activations held by rank `stage` at its peak: one micro-batch's worth times those in flight,
    less what activation offloading keeps on the host (offload_kept_share; one layer's activations
    stay as its transfer buffer)."""
    x = act_shape(model, train, lay)
    n_moe, n_dense = stage_layer_mix(model, lay.stage_layers, stage, lay.vpp, lay.chunk_layers)
    whole, rebuilt, inputs = full_recompute_split(lay, n_moe + n_dense)
    if rebuilt:  # Megatron --recompute-num-layers / --recompute-method: some layers kept whole
        xn = replace(x, recompute="none")
        mix = (n_dense * act.layer_bytes(model, xn, False) + n_moe * act.layer_bytes(model, xn, True)) / (n_moe + n_dense)
        per_mb = whole * mix + inputs * act.layer_input_bytes(model, x)
        working = rebuilt * act.layer_bytes(model, xn, model.is_moe) - act.layer_input_bytes(model, x)
    else:
        per_mb = n_dense * act.layer_bytes(model, x, False) + n_moe * act.layer_bytes(model, x, True)
        working = act.recompute_working_bytes(model, x, model.is_moe)  # MoE models: the larger MoE layer
    working += paired_forward_bytes(model, x, train, lay)
    offloaded, buffer = offload_split(train, per_mb, n_moe + n_dense)
    if stage == 0:
        per_mb += act.embedding_bytes(model, x)
    inflight = act.inflight_microbatches(lay.schedule, stage, lay.pp, lay.vpp, lay.num_microbatches)
    return (per_mb - offloaded) * inflight + buffer + working + last_chunk_bytes(model, x, lay, stage)


def paired_forward_bytes(model: ModelSpec, x: act.ActShape, train: TrainSpec, lay: Layout) -> float:
    """Under Megatron-Core's all-to-all overlap (moe_timing.ep_overlap_applies), the activations of one MoE layer
    of the paired micro-batch, beside the micro-batches in flight: the combined 1F1B step runs forward layer i
    of one micro-batch with backward layer L-1-i of another and releases the backward layer's state only after
    (megatron-core 0.19.2 models/common/model_chunk_schedule_plan.py run(), pipeline_parallel/combined_1f1b.py).
    Its one extra warm-up chunk (schedules.py get_pp_rank_microbatches) takes the place of the forward that
    interleaved 1F1B holds before each backward (activations.inflight_microbatches), so the peak grows by a
    layer, not by a micro-batch."""
    return act.layer_bytes(model, x, True) if model.is_moe and ep_overlap_applies(train, lay) else 0.0


def full_recompute_split(lay: Layout, layers: int) -> tuple[float, int, float]:
    """(layers kept whole, layers rebuilt at once in backward, layer inputs kept) on a stage whose
    full recompute is limited by Megatron's --recompute-num-layers N (megatron-core 0.16
    transformer_block.py _checkpointed_forward, per model chunk of layers/vpp layers): `uniform`
    checkpoints groups of N layers (one input kept per group, a whole group rebuilt at once), `block`
    checkpoints the first N layers of each chunk one by one and keeps the rest whole. (0, 0, 0) when
    recompute is not full or N is not given: the per-layer formulas then apply unchanged."""
    if lay.recompute != "full" or getattr(lay, "recompute_num_layers", None) is None:  # search candidates: None
        return 0.0, 0, 0.0
    n, chunk = lay.recompute_num_layers, layers / lay.vpp
    if lay.recompute_method == "block":
        rebuilt = min(n, chunk) * lay.vpp
        return layers - rebuilt, 1, rebuilt
    return 0.0, min(n, math.ceil(chunk)), math.ceil(chunk / n) * lay.vpp


def offload_split(train: TrainSpec, per_mb: float, layers: int) -> tuple[float, float]:
    """(bytes of one micro-batch's activations moved to the host, bytes of the device buffer they pass
    through) under Megatron's activation offloading (--cpu-offloading --cpu-offloading-num-layers N;
    megatron-core 0.16 transformer_block.py get_cpu_offload_context): N of a rank's layers offload
    their saved tensors after their forward and reload them before their backward, one layer's worth
    in flight. Layers are priced at the stage's mean."""
    n = min(train.activation_offload_layers, layers)
    if n == 0 or layers == 0:
        return 0.0, 0.0
    per_layer = per_mb / layers
    return n * per_layer, per_layer


def last_chunk_bytes(model: ModelSpec, x: act.ActShape, lay: Layout, stage: int) -> float:
    """The head's and any multi-token prediction modules' activations on the last rank: once per
    micro-batch its last chunk holds (activations.last_chunk_inflight), not once per chunk in flight."""
    if stage != lay.pp - 1:
        return 0.0
    held = act.last_chunk_inflight(lay.schedule, lay.num_microbatches)
    return (act.head_bytes(model, x) + act.mtp_bytes(model, x)) * held


def zero3_buffer_bytes(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> float:
    """ZeRO-3 gathers whole layers: the units in flight at the peak (stack's zero3_unit_bytes per
    parameter of a layer; two bf16 weights and a bf16 gradient = 6), plus, where the stack keeps the
    root gathered (FSDP2), the bf16 embedding and output layer. For MoE models the MoE layer is taken
    on every stage (conservative where a stage is all dense); its experts only when they are sharded
    (expert data parallelism > 1: torchtitan shards them over that mesh, of size 1 when ep spans the
    data-parallel ranks)."""
    if memory_zero(lay) < 3:
        return 0.0
    sem = train.stack_spec.memory
    local = local_layer_params(model, model.is_moe, lay.tp, lay.ep, lay.etp)
    layer = local.total if expert_dp(cluster, lay) > 1 else local.dense  # experts held whole (edp = 1) are never gathered
    root = 0.0
    if sem.root_gathered:
        root = train.weight_bytes_per_param * (embedding_params(model) + head_params(model)) / lay.tp
    return layer * sem.zero3_unit_bytes + root


def loss_transient_bytes(model: ModelSpec, train: TrainSpec, lay: Layout, stage: int) -> float:
    """Logits and their gradient at the loss's peak, on the last stage: the stack's bytes per logit
    (costmodels.memory_semantics) x tokens x vocabulary / tp, plus what multi-token prediction losses
    keep through it (activations.mtp_loss_bytes), beyond a recomputed layer's working set.
    The two never coexist: the loss's backward ends (its logit gradient consumed by the output
    layer's backward) before the last layer is recomputed, and stage_activation_bytes already holds
    the working set, so only the excess counts. A chunked loss (TrainSpec.loss_chunks) keeps one chunk's
    logits, and the fp32 gradient of the whole micro-batch's final hidden states it accumulates the chunks'
    into (torchtitan 0.3 components/loss.py ChunkedLossWrapper, GradAccumulator dtype float32)."""
    if stage != lay.pp - 1:
        return 0.0
    x = act_shape(model, train, lay)
    per_logit = train.stack_spec.memory.logit_bytes(train.loss_fused, lay.tp)
    working = act.recompute_working_bytes(model, x, model.is_moe)
    logits = per_logit * act.logit_count(model, x) / train.loss_chunks
    if train.loss_chunks > 1:
        logits += FP32_BYTES * x.tokens * model.hidden_size
    return max(0.0, logits + act.mtp_loss_bytes(model, x) - working)


def optimizer_temp_bytes(train: TrainSpec, lay: Layout, local: ParamCount, edp: int) -> float:
    """The optimizer step's temporaries: the stack's bytes per parameter this GPU updates, plus a ZeRO
    optimizer's fp32 gradient cast (grad_cast_bytes). Parameters whose step runs on the host (offload_optimizer:
    FSDP's CPUOffload(offload_params=True) steps every one there, DeepSpeed ratio r the fraction r) allocate
    nothing on the GPU: the per-parameter bytes scale by 1 - offload_optimizer_fraction."""
    per = train.stack_spec.memory.optimizer_temp_bytes
    if train.offload_optimizer != "none":
        per *= max(1.0 - train.offload_optimizer_fraction, 0.0)
    cast = grad_cast_bytes(train, lay, local, edp)
    if per == 0:
        return cast
    if memory_zero(lay) == 0:  # every rank updates every parameter
        return per * local.total + cast
    return per * (local.dense / lay.dense_shards + local.expert / edp) + cast


def grad_cast_bytes(train: TrainSpec, lay: Layout, local: ParamCount, edp: int) -> float:
    """Bytes a ZeRO step allocates to cast one optimizer group's gradient partition to fp32 (the stack's
    grad_cast_bytes per parameter: DeepSpeed's flat 16-bit copy and its fp32 cast, 2 + 4). Groups step one
    after another, so the largest sets the peak: the dense partition or the experts' (DeepSpeed keeps MoE
    parameters in groups of their own), at ZeRO-3 at most one sub-group (zero_sub_group_mparams). ZeRO-1
    frees that group's gradients outside the partition first (stage_1_and_2.py step, free_grad_in_param_list),
    which the cast reuses. 0 with every step on the host (offload_optimizer with ratio 1). Sources: deepspeed
    0.15.3 runtime/zero/stage_1_and_2.py step, stage3.py _prepare_fp32_grad_for_sub_group and
    _create_fp16_sub_groups. Exact per call; summed over parts of a stage (stage_linear) it can only overstate."""
    per, zero = train.stack_spec.memory.grad_cast_bytes, memory_zero(lay)
    if per == 0 or zero == 0 or _all_offloaded(train):
        return 0.0
    dense, expert = local.dense / lay.dense_shards, local.expert / edp
    group, whole = (dense, local.dense) if dense >= expert else (expert, local.expert)
    if zero >= 3:
        group = min(group, train.zero_sub_group_mparams * 1e6)
    freed = train.grad_bytes_per_param * (whole - group) if zero == 1 else 0.0  # that group's, freed before it
    return max(per * group - freed, 0.0)


def grad_cast_cap_bytes(train: TrainSpec, lay: Layout) -> Optional[float]:
    """The most grad_cast_bytes can be whatever the stage holds: one ZeRO-3 sub-group's cast; None where no
    cap applies (no cast, or ZeRO 1-2, which cast a whole group partition)."""
    per = train.stack_spec.memory.grad_cast_bytes
    if per == 0 or memory_zero(lay) < 3 or _all_offloaded(train):
        return None
    return per * train.zero_sub_group_mparams * 1e6


def _all_offloaded(train: TrainSpec) -> bool:
    """Every optimizer step on the host (DeepSpeed casts on the CPU then); a partial ZeRO-3 offload (ratio < 1)
    still steps some sub-groups, and casts them, on the GPU."""
    return train.offload_optimizer != "none" and train.offload_optimizer_fraction >= 1.0


def fp8_weight_cache(train: TrainSpec, lay: Layout, local: ParamCount) -> float:
    """FP8 copies of the weights kept across a step's micro-batches (MemorySemantics.fp8_weight_cache_bytes
    per local parameter; half with FP8 weights, which need only their transpose); none without fp8 or
    under ZeRO-3, whose gathered units are freed after use."""
    per = train.stack_spec.memory.fp8_weight_cache_bytes
    if train.precision != "fp8" or memory_zero(lay) >= 3 or per == 0:
        return 0.0
    return local.total * per / (2 if train.fp8_param_gather else 1)


def stage_memory(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout, stage: int) -> StageMemory:
    """Memory of one GPU on pipeline rank `stage`; `lay` must come from resolve_layout."""
    local: ParamCount = local_stage_params(
        model, lay.stage_layers, stage, lay.tp, lay.ep, lay.etp, train.seq_len(model), lay.vpp, lay.chunk_layers
    )
    zero, mtrain, edp = memory_zero(lay), memory_train(train, lay), expert_dp(cluster, lay)
    dense = zero_state_bytes(local.dense, lay.dense_shards, zero, mtrain)
    expert = zero_state_bytes(local.expert, edp, zero, expert_train(train, mtrain, edp))
    acts = round(stage_activation_bytes(model, train, lay, stage) * train.activation_scale)
    other = round(zero3_buffer_bytes(model, cluster, train, lay))
    step_temp = optimizer_temp_bytes(train, lay, local, edp) - acts - other
    transient = max(loss_transient_bytes(model, train, lay, stage), step_temp, 0.0)
    states = [dense[j] + expert[j] for j in range(3)]
    states[0] += fp8_weight_cache(train, lay, local)
    return StageMemory(
        stage=stage,
        layers=lay.stage_layers[stage],
        weights_bytes=round(states[0]),
        grads_bytes=round(states[1]),
        optimizer_bytes=round(states[2]),
        activations_bytes=acts,
        other_bytes=other,
        transient_bytes=round(transient),
        persistent_bytes=persistent_state_bytes(*(round(v) for v in states), lay),
    )


def memory_by_stage(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> list[StageMemory]:
    """StageMemory for every pipeline rank, first to last."""
    return [stage_memory(model, cluster, train, lay, i) for i in range(lay.pp)]
