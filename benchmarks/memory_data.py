"""The public measured memory peaks (benchmarks/data/measured/memory_runs.json) as parplan problems.

One case = one published per-GPU peak, of one of four kinds, each compared with the number parplan
predicts for what measured it:
- `max_allocated`: torch.cuda.max_memory_allocated (Megatron-LM CI golden values, Megatron logs,
  Megatron-Bridge) -> `peak_allocated_bytes`;
- `max_reserved`: the caching allocator's peak reserve (torchtitan's "Memory(GiB)", Megatron's
  "max reserved") -> `peak_reserved_bytes`;
- `device`: nvidia-smi / whole-device use (FlagPerf, ms-swift) -> `device_bytes`;
- `oom`: the run did not fit -> `fits` must be false.

Assumptions where a source is silent (each case's `assumptions` in the JSON list the source's own):
- stack: torchtitan rows `torchtitan` when torch.compile is on, else `torchtitan-eager`; every
  Megatron-derived framework (Megatron-LM, FlagScale, Pai-Megatron-Patch, ms-swift, Megatron-Bridge)
  `megatron-core`; DeepSpeed `deepspeed`.
- Multi-head latent attention (DeepSeek-V3 shapes) is ModelSpec's `mla`; the multi-token-prediction
  layer is not modelled.
- torchtitan "selective" is its per-op policy (the stack's meaning); Megatron "--recompute-activations"
  is selective core-attention recompute.
- 405B with pp=8: torchtitan's default split puts the extra layers on the first ranks.
- Megatron MoE rows that do not state an expert tensor-parallel size shard experts over tp (the only
  choice before Megatron-Core 0.10 added --expert-tensor-parallel-size, and its default after).
- Megatron-Core 0.6 MoE rows that name no dispatcher run its default, the all-gather dispatcher
  (TransformerConfig.moe_token_dispatcher_type = "allgather" in megatron-core 0.6.0).
- "unfused" attention backends store the s x s scores (flash_attention false); a cross-entropy
  fusion flag or a compiled loss sets fused_loss (torchtitan: see _loss_compiled).
- Shapes read from a log where the data's own assumption contradicts it (FROM_LOG below).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from measured_data import uneven_stages
from reference_data import preset_latencies

import hardware_profiles as hp
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec

DATA = Path(__file__).resolve().parent / "data" / "measured" / "memory_runs.json"

GPU = (  # (substring of the case's gpu text, parplan profile, cluster preset for latencies/bandwidth)
    ("H100 SXM 96GB", "h100-sxm-500w", "dgx-h100"), ("H200", "h200", "hgx-h200"),
    ("H800", "h800", "dgx-h100"), ("A800", "a100-80gb", "dgx-a100"), ("A100", "a100-80gb", "dgx-a100"),
    ("H100", "h100-sxm", "dgx-h100"),
)
KINDS = {"max_allocated": "allocated", "max_reserved": "reserved", "nvidia_smi_used": "device",
         "device_memory_used": "device", "oom": "oom"}


@dataclass(frozen=True)
class MemoryCase:
    """One measured peak as a parplan problem."""

    case_id: str
    kind: str  # allocated | reserved | device | oom
    measured_bytes: Optional[float]
    stage: Optional[int]  # pipeline rank measured; None = the maximum over ranks
    approximate: bool
    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    layout: Layout
    stack: str
    framework: str


# Model fields and stage splits that a row's own log fixes where memory_runs.json had to assume.
# The Megatron-LM "DeepSeek-V3-Proxy" rows print the allocation at rest after iteration 10 (weights,
# fp32 main grads and the distributed optimizer's states; no activations): 24,761 MiB on rank 0
# (stage 0) and 18,908 MiB on rank 32 (stage 2). With ep16 on 64 ranks the experts have one
# data-parallel replica, so each expert parameter costs 18 B on its rank. The data's assumed 256
# DeepSeek-V3 experts would put 58.9 GiB of states on stage 0, 2.4x what the log shows; 64 experts
# (4 per rank) and four layers on stages 0 and 2 (so two on the last, which holds the head) give
# 23.5 and 17.6 GiB, 3-5% under both logged values (tests/test_memory_runtime.py checks this).
# top_k x moe_ffn_hidden_size stays DeepSeek-V3's. The peaks minus the rests (40.2 GiB on stage 0,
# with 4 layers x 4 micro-batches in flight under 1F1B; 26.5 GiB on stage 2, 4 x 2) differ by 1.71
# GiB per layer and micro-batch, the model's 1.74; the 12.8 GiB that both ranks hold beyond that is
# not modelled, so these two rows are predicted 20-29% under their allocated peaks.
FROM_LOG = {
    "deepseek-v3-proxy-14l-allmoe": dict(num_experts=64),
}
STAGES_FROM_LOG = {"mlm-dsv3proxy-14l-tp1pp4ep16": [4, 4, 4, 2]}


def _raw() -> dict:
    raw = json.loads(DATA.read_text())
    for name, fields in FROM_LOG.items():
        raw["models"][name] = {**raw["models"][name], **fields}
    return raw


def mla_spec(raw: dict) -> Optional[dict]:
    """A model entry's MLA shapes in ModelSpec's names (entries use Hugging Face's or Megatron's)."""
    if raw.get("attention") != "mla":
        return None
    m = raw["mla"]
    return dict(q_lora_rank=m.get("q_lora_rank") or 0, kv_lora_rank=m["kv_lora_rank"],
                qk_nope_head_dim=m.get("qk_nope_head_dim", m.get("qk_head_dim")),
                qk_rope_head_dim=m.get("qk_rope_head_dim", m.get("qk_pos_emb_head_dim")), v_head_dim=m["v_head_dim"])


def model_spec(raw: dict, seq: int) -> ModelSpec:
    """A memory_runs.json model entry as a ModelSpec."""
    mla = mla_spec(raw)
    heads = raw["num_attention_heads"]
    fields = dict(
        name=raw["name"], num_layers=raw["num_layers"], hidden_size=raw["hidden_size"], num_attention_heads=heads,
        num_kv_heads=None if mla else raw.get("num_kv_heads") or heads, vocab_size=raw["vocab_size"],
        seq_length=seq, activation=raw["activation"], norm=raw["norm"], tied_embeddings=raw["tied_embeddings"],
        position_embedding=raw["position_embedding"], linear_bias=bool(raw.get("add_bias_linear")),
        qk_norm=bool(raw.get("qk_layernorm")), dropout=bool(raw.get("hidden_dropout")),
        ffn_hidden_size=raw["ffn_hidden_size"], mtp_num_layers=raw.get("mtp_num_layers") or 0,
    )
    if mla:
        fields["mla"] = mla
    elif raw.get("head_dim"):
        fields["head_dim"] = raw["head_dim"]
    if raw.get("num_experts"):
        fields.update(num_experts=raw["num_experts"], top_k=raw["top_k"],
                      moe_ffn_hidden_size=raw["moe_ffn_hidden_size"],
                      num_shared_experts=raw.get("num_shared_experts") or 0,
                      first_k_dense_layers=raw.get("first_k_dense_layers") or 0)
    return ModelSpec.model_validate(fields)


def _gpu(text: str) -> tuple[str, str]:
    for key, profile, preset in GPU:
        if key in text:
            return profile, preset
    raise ValueError(f"no GPU profile for {text!r}")


def _cluster(case: dict) -> ClusterSpec:
    profile, preset = _gpu(case["gpu"])
    base = hp.load_cluster(preset)
    per = min(8, case["num_gpus"])
    return ClusterSpec(name=f"measured-{profile}", gpu=hp.load_gpu(profile), gpus_per_node=per,
                       num_nodes=case["num_gpus"] // per, scale_up_gb_per_s=base.scale_up_gb_per_s,
                       scale_out_gb_per_s=base.scale_out_gb_per_s, **preset_latencies(preset))


def _stack(case: dict) -> str:
    fw = case["framework"].lower()
    if fw.startswith("torchtitan"):
        compiled = "compile" in (case.get("notes") or "").lower() and "only on loss" not in case["notes"]
        return "torchtitan" if compiled else "torchtitan-eager"
    return "deepspeed" if fw.startswith("deepspeed") else "megatron-core"


def _recompute(text: str) -> str:
    text = text.lower()
    for value in ("selective", "full"):
        if text.startswith(value):
            return value
    return "none"


def _layout(case: dict, model: ModelSpec) -> Layout:
    pp, vpp = case["pp"], case["vpp"] or 1
    stages = None
    if pp > 1 and model.num_layers % (pp * vpp):
        stages = uneven_stages(model.num_layers, pp)
    stages = next((v for k, v in STAGES_FROM_LOG.items() if case["id"].startswith(k)), stages)
    mbs = case["micro_batch"]
    zero = 3 if case["zero_stage"] == 3 else (1 if case["distributed_optimizer"] else 0)
    etp = case["etp"] or (case["tp"] if model.is_moe and "megatron" in case["framework"].lower() else 1)
    return Layout(tp=case["tp"], sp=bool(case["sequence_parallel"]) and case["tp"] > 1, cp=case["cp"] or 1,
                  ep=case["ep"] or 1, etp=etp, pp=pp, vpp=vpp, zero=zero, mbs=mbs,
                  recompute=_recompute(case["recompute"]), stage_layers=stages)


def _text(case: dict) -> str:
    return " ".join(str(case.get(k) or "") for k in ("notes", "recompute", "framework")).lower()


FUSED_LOSS_WORDS = ("cross-entropy-loss-fusion", "cross entropy loss fusion", "cross-entropy loss fusion",
                    "compile only on loss")


def _loss_compiled(case: dict, fused_sources: set[str]) -> bool:
    """torchtitan compiles its loss with torch.compile from its 2025 code on (0.1.0, 2025-06:
    components/loss.py build_cross_entropy_loss compiles it when training.compile is set; 0.2.0:
    compile.components 'loss'); the 2024-12 train.py left it eager. Rows of one source share a config,
    so a source that states it for one row states it for all."""
    if case["source"] in fused_sources:
        return True
    text = _text(case)
    return case["framework"].lower().startswith("torchtitan") and case["year"] >= 2025 and "compile on" in text


def _dispatcher(case: dict, text: str) -> str:
    """The MoE token dispatcher: the one the notes name, else Megatron-Core 0.6's default (allgather)."""
    if "alltoall" in text or "deepep" in text:
        return "alltoall"
    if "allgather dispatcher" in text or "core_v0.6" in (case.get("framework_version") or ""):
        return "allgather"
    return "alltoall"


def _grad_dtype(case: dict) -> Optional[str]:
    """bf16 where the row says its gradients are reduced in bf16: Megatron-Core's gradient buffer takes
    the reduction dtype (megatron/core/distributed/param_and_grad_buffer.py, group_params_for_buffers:
    grad_dtype = fp32 if grad_reduce_in_fp32 else the parameter's); else the stack's default."""
    return "bf16" if "grads reduced in bf16" in case["precision"].lower() else None


def _train(case: dict, stack: str, fused_sources: set[str]) -> TrainSpec:
    precision = "fp16" if case["precision"].startswith("fp16") else "bf16"
    fp8 = "fp8" in case["precision"].lower() or "float8" in case["precision"].lower()
    text = _text(case)
    fused = any(k in text for k in FUSED_LOSS_WORDS) or _loss_compiled(case, fused_sources) or None
    train = TrainSpec(global_batch_size=case["global_batch"], seq_length=case["seq_length"],
                      precision="fp8" if fp8 else precision, flash_attention="unfused" not in text,
                      fused_loss=fused, moe_dispatcher=_dispatcher(case, text), grad_dtype=_grad_dtype(case))
    return hp.resolve_train(train, stack)


def _stage(text: str, pp: int) -> Optional[int]:
    text = text.lower()
    if "last pp stage" in text or "last rank" in text:
        return pp - 1
    if "pp stage" in text:
        return int(text.split("pp stage")[1].split()[0])
    if text.startswith("rank 0"):
        return 0
    return None


def _cases_of(case: dict, models: dict, fused_sources: set[str]) -> list[MemoryCase]:
    meas = case["measured"]
    model = model_spec(models[case["model"]], case["seq_length"])
    stack = _stack(case)
    base = dict(model=model, cluster=_cluster(case), train=_train(case, stack, fused_sources),
                layout=_layout(case, model),
                stack=stack, framework=case["framework"], approximate=bool(meas.get("approximate")),
                stage=_stage(meas.get("rank_or_stage") or "", case["pp"]))
    out = [MemoryCase(case_id=case["id"], kind=KINDS[meas["kind"]], measured_bytes=meas.get("bytes"), **base)]
    if meas.get("max_reserved_bytes"):  # Megatron's report_memory line also gives the reserve
        out.append(MemoryCase(case_id=case["id"] + ":reserved", kind="reserved",
                              measured_bytes=meas["max_reserved_bytes"], **base))
    return out


def logged_rest_bytes(case_id: str) -> float:
    """The allocation at rest that a Megatron report_memory line prints ('| allocated: <MiB>'): what
    stays allocated between iterations (weights, main grads, optimizer states), bytes."""
    case = next(c for c in _raw()["cases"] if c["id"] == case_id.split(":")[0])
    return float(re.search(r"\| allocated: ([0-9.]+)", case["measured"]["as_written"]).group(1)) * 2**20


def load_memory_cases() -> list[MemoryCase]:
    """Every case of memory_runs.json (two for Megatron logs that give allocated and reserved)."""
    raw = _raw()
    fused = {c["source"] for c in raw["cases"] if any(k in _text(c) for k in FUSED_LOSS_WORDS)}
    return [mc for case in raw["cases"] for mc in _cases_of(case, raw["models"], fused)]
