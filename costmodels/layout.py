"""Layout: how a model is split over GPUs, and the rules a layout must obey.

`resolve_layout` fills derived values (dp, schedule, stage_layers, num_microbatches) and checks
Megatron-LM's own argument rules (megatron.training.arguments.validate_args, as listed in
benchmarks/data/launch_formats.md) plus the expert-grid rule Megatron checks only at start-up. The
interleaving rule m % pp == 0 is Megatron's: it holds for every stack but torchtitan's, whose torch schedules
accept fewer micro-batches (DeepSpeed and FSDP run no virtual stages at all).
Every message names the fields and the numbers involved.
"""

from __future__ import annotations

from typing import Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from costmodels.errors import SpecError
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import MAX_LAYERS, ModelSpec
from costmodels.pipeline import stages_of_chunks
from costmodels.train_spec import TrainSpec

MAX_DEGREE = 1_000_000

Recompute = Literal["none", "selective", "full"]
# Megatron-Core's selective recompute modules (TransformerConfig.recompute_modules, megatron-core 0.16):
# core_attn is what recompute=selective means when no list is given.
RecomputeModule = Literal["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"]
RECOMPUTE_MODULES: tuple[str, ...] = get_args(RecomputeModule)
Schedule = Literal["gpipe", "1f1b", "interleaved"]
# Context-parallel algorithms (Megatron-Core TransformerConfig.cp_comm_type; costmodels.timing):
# p2p = ring exchange of K/V chunks beside attention, a2a = all-to-all over heads (DeepSpeed-Ulysses),
# allgather = all-gather of K/V before attention (Llama 3 paper, section 3.3.2).
CpComm = Literal["p2p", "a2a", "allgather"]


class LayoutError(SpecError):
    """A layout that breaks a divisibility or consistency rule; the message lists every rule broken."""


class Layout(BaseModel):
    """Parallel degrees and per-run choices (vocabulary of docs/design.md section 2)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tp: int = Field(1, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree.")
    sp: bool = Field(False, description="Megatron sequence parallelism over the tp group (needs tp > 1).")
    cp: int = Field(1, ge=1, le=MAX_DEGREE, description="Context-parallel degree (sequence split for attention).")
    cp_comm: CpComm = Field("p2p", description="Context-parallel algorithm: p2p (ring attention), a2a "
                            "(all-to-all over heads, DeepSpeed-Ulysses) or allgather (K/V gathered before attention).")
    ep: int = Field(1, ge=1, le=MAX_DEGREE, description="Expert-parallel degree.")
    etp: int = Field(1, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree inside each expert.")
    pp: int = Field(1, ge=1, le=MAX_DEGREE, description="Pipeline-parallel degree (stages).")
    vpp: int = Field(1, ge=1, le=MAX_LAYERS, description="Virtual stages (model chunks) per pipeline rank.")
    dp: Optional[int] = Field(None, ge=1, le=MAX_DEGREE, description="Data-parallel degree; null = world/(tp*cp*pp).")
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage: 0 none, 1 optimizer, 2 +gradients, 3 +parameters.")
    shard_group: Optional[int] = Field(
        None, ge=1, le=MAX_DEGREE, description="With zero >= 1: data-parallel ranks one shard of the dense states "
        "spans (HSDP / hybrid sharding: shard inside the group, replicate across groups); null = all dp*cp ranks."
    )
    mbs: int = Field(1, ge=1, le=1_000_000, description="Micro-batch size in sequences.")
    recompute: Recompute = Field("none", description="Activation recompute: none, selective (attention core), full.")
    recompute_modules: Optional[list[RecomputeModule]] = Field(
        None, min_length=1, max_length=len(RECOMPUTE_MODULES),
        description="With recompute=selective: the modules recomputed (Megatron --recompute-modules: core_attn, "
        "moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts); null = the stack's selective policy (Megatron: "
        "core_attn).")
    recompute_num_layers: Optional[int] = Field(
        None, ge=1, le=MAX_LAYERS, description="With recompute=full: Megatron --recompute-num-layers N; with "
        "recompute_method block only the first N layers of each model chunk are recomputed, with uniform the layers "
        "are checkpointed in groups of N (one input kept per group); null = every layer, one at a time.")
    recompute_method: Literal["uniform", "block"] = Field(
        "uniform", description="With recompute=full and recompute_num_layers: Megatron --recompute-method.")
    schedule: Optional[Schedule] = Field(
        None, description="Pipeline schedule; null = interleaved when vpp > 1, else 1f1b."
    )
    stage_layers: Optional[list[int]] = Field(
        None, description="Transformer layers on each pipeline rank, first to last; null = uniform split."
    )
    chunk_layers: Optional[list[int]] = Field(
        None, max_length=MAX_LAYERS, description="With vpp > 1: transformer layers of each virtual stage in model "
        "order, pp * vpp entries, entry j * pp + r chunk j of rank r (Megatron --pipeline-model-parallel-layout; a "
        "chunk may hold none); null = each rank's layers split as evenly as possible, larger chunks first. Given "
        "alone, it sets stage_layers."
    )
    num_microbatches: Optional[int] = Field(
        None, ge=1, description="Micro-batches per step; derived as global_batch / (mbs * dp), checked if given."
    )

    @field_validator("sp", mode="before")
    @classmethod
    def _sp_from_int(cls, value):
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            return bool(value)
        return value

    @model_validator(mode="after")
    def _recompute_fields_match_the_mode(self) -> "Layout":
        """recompute_modules only with recompute=selective, recompute_num_layers only with full (Megatron reads
        --recompute-modules and --recompute-num-layers only in those modes): a field the mode ignores is refused,
        not silently dropped."""
        if self.recompute_modules is not None and self.recompute != "selective":
            raise ValueError(f"recompute_modules={self.recompute_modules} needs recompute=selective "
                             f"(recompute={self.recompute})")
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError(f"recompute_num_layers={self.recompute_num_layers} needs recompute=full "
                             f"(recompute={self.recompute})")
        return self

    @property
    def model_parallel_size(self) -> int:
        """GPUs holding one replica of the dense weights: tp * cp * pp."""
        return self.tp * self.cp * self.pp

    @property
    def dense_shards(self) -> int:
        """Ranks the dense model states are sharded over: shard_group, else dp * cp (dp resolved)."""
        return self.shard_group or (self.dp or 1) * self.cp

    @property
    def replicas(self) -> int:
        """Copies of each dense shard across the data-parallel ranks (1 without hybrid sharding)."""
        return max((self.dp or 1) * self.cp // self.dense_shards, 1)


def resolve_layout(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, layout: Layout) -> Layout:
    """Return `layout` with dp, schedule, stage_layers and num_microbatches filled; raise LayoutError."""
    world = cluster.num_gpus
    problems = _degree_problems(model, train, layout, world)
    if problems:
        raise LayoutError("; ".join(problems))
    dp = layout.dp or world // layout.model_parallel_size
    stage_layers = layout.stage_layers or _chunk_stages(layout) or _uniform_stages(model.num_layers, layout.pp)
    problems = (_stage_problems(model, layout, stage_layers) + _batch_problems(train, layout, dp)
                + _shard_problems(layout, dp))
    if problems:
        raise LayoutError("; ".join(problems))
    schedule = layout.schedule or ("interleaved" if layout.vpp > 1 else "1f1b")
    microbatches = train.global_batch_size // (layout.mbs * dp)
    return layout.model_copy(
        update=dict(
            dp=dp,
            sp=layout.sp and layout.tp > 1,  # Megatron drops SP silently at tp = 1
            schedule=schedule,
            stage_layers=list(stage_layers),
            num_microbatches=microbatches,
        )
    )


def _degree_problems(model: ModelSpec, train: TrainSpec, lay: Layout, world: int) -> list[str]:
    out: list[str] = []
    mp = lay.model_parallel_size
    if world % mp:
        out.append(f"GPUs={world} is not divisible by tp*cp*pp={lay.tp}*{lay.cp}*{lay.pp}={mp}")
    elif lay.dp is not None and lay.dp * mp != world:
        out.append(f"tp*cp*pp*dp={lay.tp}*{lay.cp}*{lay.pp}*{lay.dp}={lay.dp * mp} but the cluster has GPUs={world}")
    if model.num_attention_heads % lay.tp:
        out.append(f"num_attention_heads={model.num_attention_heads} is not divisible by tp={lay.tp}")
    kv = model.num_kv_heads
    if kv % lay.tp and lay.tp % kv:
        out.append(f"num_kv_heads={kv} must be a multiple or a divisor of tp={lay.tp}")
    if model.ffn_hidden_size % lay.tp:
        out.append(f"ffn_hidden_size={model.ffn_hidden_size} is not divisible by tp={lay.tp}")
    if out and not tp_fits(model, lay.tp):
        out.append(f"tp that fit this model's heads and widths on {world} GPUs: "
                   f"{', '.join(str(t) for t in range(1, world + 1) if world % t == 0 and tp_fits(model, t))}")
    seq = train.seq_len(model)
    if lay.cp > 1 and seq % (2 * lay.cp):
        out.append(f"seq_length={seq} is not divisible by 2*cp={2 * lay.cp}")
    out += _a2a_problems(model, lay) + _expert_problems(model, lay, world)
    return out


def tp_fits(model: ModelSpec, tp: int) -> bool:
    """Megatron splits the model over `tp` ranks: heads and the MLP width divide by it, and the KV heads are a
    multiple or a divisor of it (replicated when fewer)."""
    kv = model.num_kv_heads
    return (model.num_attention_heads % tp == 0 and model.ffn_hidden_size % tp == 0
            and (kv % tp == 0 or tp % kv == 0))


def _a2a_problems(model: ModelSpec, lay: Layout) -> list[str]:
    """All-to-all context parallelism scatters heads over the cp group inside each tp rank
    (Jacobs et al. 2023, DeepSpeed-Ulysses section 3.1): heads, and KV heads unless replicated,
    divide by tp*cp."""
    if lay.cp <= 1 or lay.cp_comm != "a2a" or a2a_heads_ok(model, lay.tp, lay.cp):
        return []
    return [f"cp_comm=a2a needs num_attention_heads={model.num_attention_heads} divisible by tp*cp="
            f"{lay.tp}*{lay.cp}={lay.tp * lay.cp} and num_kv_heads={model.num_kv_heads} a multiple or divisor of it"]


def a2a_heads_ok(model: ModelSpec, tp: int, cp: int) -> bool:
    """All-to-all cp can scatter the heads: heads divisible by tp*cp, KV heads a multiple or a divisor
    of tp*cp (replicated when fewer; deepspeed/runtime/sequence_parallel/ulysses_sp.py)."""
    group, kv = tp * cp, model.num_kv_heads
    return model.num_attention_heads % group == 0 and (kv % group == 0 or group % kv == 0)


def _expert_problems(model: ModelSpec, lay: Layout, world: int) -> list[str]:
    out: list[str] = []
    if not model.is_moe:
        if lay.ep > 1 or lay.etp > 1:
            out.append(f"ep={lay.ep}, etp={lay.etp} need a mixture-of-experts model (num_experts=0)")
        return out
    if model.num_experts % lay.ep:
        grid = lay.etp * lay.pp
        fit = [e for e in range(1, min(world, model.num_experts) + 1)
               if model.num_experts % e == 0 and world % (e * grid) == 0]
        out.append(f"num_experts={model.num_experts} is not divisible by ep={lay.ep} (ep that divide it on {world} "
                   f"GPUs with etp*pp={grid}: {', '.join(map(str, fit))})")
    grid = lay.etp * lay.ep * lay.pp
    if world % grid:
        out.append(f"GPUs={world} is not divisible by etp*ep*pp={lay.etp}*{lay.ep}*{lay.pp}={grid}")
    if model.moe_ffn_hidden_size % lay.etp:
        out.append(f"moe_ffn_hidden_size={model.moe_ffn_hidden_size} is not divisible by etp={lay.etp}")
    if lay.ep > 1 and lay.tp > 1 and not lay.sp:
        out.append(f"ep={lay.ep} with tp={lay.tp} needs sp=1 (Megatron: MoE with EP and TP requires sequence parallelism)")
    return out


def _uniform_stages(num_layers: int, pp: int) -> list[int]:
    if num_layers % pp:
        raise LayoutError(
            f"num_layers={num_layers} is not divisible by pp={pp}; give stage_layers "
            f"(e.g. {_suggest_stages(num_layers, pp)}) for an uneven split"
        )
    return [num_layers // pp] * pp


def _suggest_stages(num_layers: int, pp: int) -> str:
    base, extra = divmod(num_layers, pp)
    return ",".join(str(base + (1 if i >= pp - extra else 0)) for i in range(pp))


def _chunk_stages(lay: Layout) -> Optional[list[int]]:
    """stage_layers from chunk_layers (each rank's chunks summed), or None."""
    chunks = lay.chunk_layers
    if chunks is None or len(chunks) != lay.pp * lay.vpp:
        return None
    return stages_of_chunks(chunks, lay.pp)


def _chunk_problems(lay: Layout, stages: list[int]) -> list[str]:
    chunks = lay.chunk_layers
    if chunks is None:
        return []
    if lay.vpp < 2:
        return [f"chunk_layers={chunks} needs virtual stages (vpp={lay.vpp})"]
    if len(chunks) != lay.pp * lay.vpp:
        return [f"chunk_layers has {len(chunks)} entries but pp*vpp={lay.pp * lay.vpp}"]
    if any(n < 0 for n in chunks):
        return [f"chunk_layers={chunks} has a negative entry"]
    if _chunk_stages(lay) != list(stages):
        return [f"chunk_layers={chunks} gives {_chunk_stages(lay)} layers per rank but stage_layers={stages}"]
    return []


def _stage_problems(model: ModelSpec, lay: Layout, stages: list[int]) -> list[str]:
    out: list[str] = _chunk_problems(lay, stages)
    if len(stages) != lay.pp:
        out.append(f"stage_layers has {len(stages)} entries but pp={lay.pp}")
    if any(n < 1 for n in stages):
        out.append(f"stage_layers={stages} has a stage with no layers")
    if sum(stages) != model.num_layers:
        out.append(f"stage_layers={stages} sums to {sum(stages)} but num_layers={model.num_layers}")
    if lay.vpp > 1:
        if lay.pp < 2:
            out.append(f"vpp={lay.vpp} (interleaving) needs pp > 1 (pp={lay.pp})")
        if lay.chunk_layers is None and any(n < lay.vpp for n in stages):  # fewer: an empty chunk_layers chunk
            out.append(f"stage_layers={stages}: every stage needs at least vpp={lay.vpp} layers (one per chunk)")
    if lay.schedule == "interleaved" and lay.vpp == 1:
        out.append("schedule=interleaved needs vpp > 1 (vpp=1)")
    if lay.schedule in ("gpipe", "1f1b") and lay.vpp > 1:
        out.append(f"schedule={lay.schedule} cannot run virtual stages (vpp={lay.vpp}); use interleaved")
    return out


def _shard_problems(lay: Layout, dp: int) -> list[str]:
    group = lay.shard_group
    if group is None:
        return []
    if lay.zero == 0:
        return [f"shard_group={group} needs zero >= 1 (nothing is sharded at zero=0)"]
    if (dp * lay.cp) % group:
        return [f"shard_group={group} must divide dp*cp={dp}*{lay.cp}={dp * lay.cp}"]
    return []


def _batch_problems(train: TrainSpec, lay: Layout, dp: int) -> list[str]:
    gbs = train.global_batch_size
    if gbs % (lay.mbs * dp):
        return [f"global_batch_size={gbs} is not divisible by mbs*dp={lay.mbs}*{dp}={lay.mbs * dp}"]
    m = gbs // (lay.mbs * dp)
    if lay.num_microbatches is not None and lay.num_microbatches != m:
        return [f"num_microbatches={lay.num_microbatches} but global_batch/(mbs*dp)={gbs}/({lay.mbs}*{dp})={m}"]
    if lay.vpp > 1 and m % lay.pp and not _torch_schedules(train):
        return [f"interleaved schedule (vpp={lay.vpp}) needs num_microbatches={m} divisible by pp={lay.pp} (Megatron)"]
    return []


def _torch_schedules(train: TrainSpec) -> bool:
    """Whether torch's pipelining schedules run the layout (the stack's framework is torchtitan), not Megatron's.
    Megatron asserts m % pp == 0 for interleaving (get_forward_backward_func's interleaved schedule); torch's
    interleaved schedules accept any m below 2pp and otherwise a multiple of max(1, m // pp): the torchtitan
    reader holds a job file to that rule, naming its keys (planner.frameworks.torchtitan.schedules.microbatch_refusal),
    as the micro-batches per pipeline step are training.local_batch_size / pipeline_parallel_microbatch_size, which
    a Layout does not carry. DeepSpeed and FSDP run no virtual stages; their layouts keep Megatron's rule."""
    return not isinstance(train.stack, str) and train.stack_spec.framework == "torchtitan"
