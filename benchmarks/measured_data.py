"""The public measured runs (benchmarks/data/measured/measured_runs.csv) as parplan problems.

One row = one published measurement (torchtitan, Megatron-Core H100, DeepSpeed, NeMo AutoModel,
DeepSeek-V3). `load_measured()` turns every row it can express into a Case with a software stack
and says, for the rest, why not (`skipped()`): FP4 GEMMs, Mamba or unknown architectures, CPU
offload, rows without a step time. Assumptions where a source is silent, row by row:
- torchtitan: per GPU "tokens/s" -> step_s (measured/README.md); `torch.compile` in the notes
  selects stack torchtitan, else torchtitan-eager; "async TP" -> tp_comm_overlap; the FP8 recipe
  from the notes (tensorwise unless rowwise / mxfp8 named); "selective" = per-op SAC (the stack's
  meaning); unknown recompute = torchtitan's llama3 default (selective, per-op); pipeline
  micro-batches: the release's default (torchtitan_pipeline_mbs: as many as the schedule's stages before
  2025, micro-batch 1 since), interleaved = 2 virtual stages when the row says only "> 1"; uneven layer
  counts split with the extra layers first.
- Megatron-Core H100 table: stack megatron-core with TP communication overlap and overlapped DP
  (the table's notes), distributed optimizer, fp32 gradient reduction (Megatron's bf16 default),
  no recompute; the two strong-scaling rows take the weak-scaling layout of their model (tp8 pp6).
  Micro-batch and virtual stages are not stated (megatron_readme_schedule): one micro-batch per
  replica at pp = 1, one layer per virtual stage at pp > 1.
- NeMo AutoModel MoE: FSDP2 + expert parallelism with TE kernels -> stack automodel (torchtitan-eager's
  fitted numbers with megatron-core's GEMM and attention scales, its own error band), no recompute, balanced routing (the rows use a fake balanced gate); MLA heads as
  128-wide multi-head attention (measured/README.md).
- NeMo AutoModel DeepSeek-V3 / Kimi-K2 (61 layers): the published virtual stages per rank (8 and 4)
  with ranks of 16 and 15 layers, whose chunks differ by one layer (costmodels.pipeline prices the
  larger chunk). gpt-oss rows: the table's EP "-" (stored as 1) is read as the largest expert-parallel
  size the GPUs allow (deepep_expert_parallel: the rows name DeepEP, which needs EP > 1).
- DeepSeek-V3: a whole-run average (batch ramp, DualPipe, MLA): kept for evaluation only.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from reference_data import Case, preset_latencies

import hardware_profiles as hp
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec

DATA = Path(__file__).resolve().parent / "data" / "measured"

GPU_PROFILES = {  # measured_runs.csv `gpu` -> parplan GPU profile
    "h100-sxm": "h100-sxm", "h100-sxm-96gb-500w": "h100-sxm-500w", "h100-sxm-95gb-lowtdp": "h100-sxm-500w",
    "a100-80gb": "a100-80gb", "a100": "a100-80gb", "h200": "h200", "h800": "h800", "b200-power-limited": "b200",
    "v100-sxm3-32gb": "v100-sxm3-32gb",
}
LATENCY_PRESET = {  # whose NCCL-fitted per-step latencies a measured cluster takes (V100 DGX-2: the A100's)
    "a100-80gb": "dgx-a100", "v100-sxm3-32gb": "dgx-a100", "b200": "dgx-b200"}
SCALE_UP_GB_PER_S = {"a100-80gb": 300.0, "h100-sxm": 450.0, "h100-sxm-500w": 450.0, "h200": 450.0, "h800": 200.0,
                     "b200": 900.0, "v100-sxm3-32gb": 150.0}


@dataclass(frozen=True)
class MeasuredCase(Case):
    """A measured row as a parplan problem, with what the accuracy tables group by."""

    row_id: str = ""
    source: str = ""
    stack: str = ""
    sharding: str = ""
    gpus: int = 0


def _rows() -> list[dict]:
    with open(DATA / "measured_runs.csv") as fh:
        return list(csv.DictReader(fh))


def _models() -> dict:
    return json.loads((DATA / "models.json").read_text())


def _gpu_key(raw: str) -> Optional[str]:
    if raw.startswith("blackwell-sm100"):
        return "b200"
    return GPU_PROFILES.get(raw)


def _scale_out_gb_per_s(row: dict, gpu: str) -> float:
    """Per-GPU network rate from the interconnect column (GB/s per GPU, per direction)."""
    text, per_node = row["interconnect"], int(row["gpus_per_node"])
    if gpu == "v100-sxm3-32gb":
        for gbit in (800, 400, 200, 100):
            if f"{gbit} Gb/s" in text:
                return gbit / 8 / per_node
        return 400 / 8 / per_node  # 4 x 100 Gb/s: the ZeRO++ blog's base setting
    if gpu == "a100-80gb":
        return 25.0  # 8 x 200 Gb/s HDR per node (DGX A100 layout)
    return 50.0  # 400 Gb/s per GPU (Grand Teton, DGX H100, H200 CX-7, H800 IB 50 GB/s)


def _cluster(row: dict, gpu: str, gpus: int) -> ClusterSpec:
    per = min(int(row["gpus_per_node"]), gpus)
    return ClusterSpec(name=f"measured-{gpu}", gpu=hp.load_gpu(gpu), gpus_per_node=per, num_nodes=gpus // per,
                       scale_up_gb_per_s=SCALE_UP_GB_PER_S[gpu], scale_out_gb_per_s=_scale_out_gb_per_s(row, gpu),
                       **preset_latencies(LATENCY_PRESET.get(gpu, "dgx-h100")))


def _stack(row: dict) -> str:
    """The stack of a row: by framework; NeMo AutoModel its own; anything else (HAI-LLM) megatron-core."""
    if row["framework"] == "torchtitan":
        return "torchtitan" if "compile" in row["notes"].lower() else "torchtitan-eager"
    if row["source"] == "automodel-moe":
        return "automodel"
    return {"deepspeed": "deepspeed"}.get(row["framework"], "megatron-core")


def _fp8_recipe(row: dict) -> str:
    head = row["notes"].lower().split(";")[0]
    for recipe in ("rowwise", "mxfp8"):
        if recipe in head:
            return recipe
    if row["source"] == "deepseek-v3-report":
        return "blockwise"
    return "tensorwise"


ZERO = {"fsdp-full": 3, "zero3": 3, "zero1": 1, "zero2": 2, "ddp": 0, "none": 0}


def _recompute(row: dict) -> str:
    value = row["recompute"]
    if value in ("none", "selective", "full"):
        return value
    if row["source"] == "megatron-readme":
        return MEGATRON_README_RECOMPUTE
    return "selective" if row["framework"] == "torchtitan" else "none"


# The Megatron-LM README's 2024 H100 table does not state recompute. It is read as full recompute (Megatron's
# --recompute-granularity full, as in the 2021 table it continues, Narayanan et al. Table 1), because only that
# reading lets the two Megatron-Core H100 data sets agree under kernel physics alone (benchmarks/physics_only.py;
# docs/kernels.md "The Megatron README rows recompute"): read without recompute, all nine rows are 21-32% faster
# than measured, uniformly, while the Megatron-Bridge recipes, whose recipes set no recompute, are within 7%;
# read with full recompute the nine are -3% to -11%. The fitted h100-sxm curve had absorbed that third:
# it priced GEMMs 1.35x slower than one H100 runs them (gpu_sustained_h100.json).
MEGATRON_README_RECOMPUTE = "full"


def _int(row: dict, key: str, default: int = 1) -> int:
    value = row[key].strip()
    return int(value) if value.isdigit() else default


def uneven_stages(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline rank, the remainder on the first ranks (each rank's virtual chunks then
    differ by at most one layer: costmodels.pipeline)."""
    units, extra = divmod(num_layers, pp)
    return [units + (1 if i < extra else 0) for i in range(pp)]


def deepep_expert_parallel(row: dict, model: ModelSpec, ep: int, ranks: int) -> int:
    """The expert-parallel size of a row that names DeepEP kernels but gives EP as 1 (the AutoModel
    table's "-" for gpt-oss): the largest divisor of the expert count that fits the `ranks` outside
    tp, cp and pp. DeepEP needs EP > 1: AutoModel builds its DeepEP experts only with an
    expert-parallel mesh (nemo_automodel components/moe/parallelizer.py apply_ep asserts a mesh larger
    than 1; without it the dispatcher is never set up). EP 1 is also out of reach in time: FSDP over
    64 GPUs would gather gpt-oss-120b's 117e9 bf16 weights (234 GB) at least once per micro-batch,
    0.6 s each at 8 x 50 GB/s per node, 2.4 s for AM-007's four before any backward gather or
    reduction, against 4.3 s measured. Chosen after seeing the EP-1 error (+86% on AM-007)."""
    if ep > 1 or not model.num_experts or "deepep" not in row["notes"].lower():
        return ep
    return max(d for d in range(1, min(model.num_experts, ranks) + 1) if model.num_experts % d == 0 and ranks % d == 0)


def megatron_readme_schedule(model: ModelSpec, pp: int, seqs_per_replica: int, mbs: int, vpp: int,
                             stages: Optional[list[int]]) -> tuple[int, int, Optional[list[int]]]:
    """(mbs, vpp, stage_layers) of a Megatron-LM README row, whose micro-batch and virtual stages are
    not published. Read as the schedule that leaves the least pipeline idle time, because the README's
    own strong-scaling endpoints leave no room for more: GPT 177B on tp8 pp6 runs at 47% MFU with 576
    micro-batches per replica (96 GPUs) and still 42% with 12 (4,608 GPUs), while 1F1B with 2 virtual
    stages would idle (pp-1)/(m*v) = 5/24 of the step at 12. So: at pp = 1, one micro-batch of all the
    replica's sequences (pipelining gains nothing, a larger GEMM is faster); at pp > 1, one layer per
    virtual stage (Megatron --num-layers-per-virtual-pipeline-stage 1) when the layers divide evenly,
    else the row's own reading."""
    if pp == 1:
        return seqs_per_replica, 1, stages
    if model.num_layers % pp:
        return mbs, vpp, stages
    return mbs, model.num_layers // pp, None


def _layout(row: dict, model: ModelSpec, gpus: int) -> Layout:
    tp, pp, cp, ep = (_int(row, k) for k in ("tp", "pp", "cp", "ep"))
    ep = deepep_expert_parallel(row, model, ep, gpus // (tp * cp * pp))
    if row["source"] == "megatron-readme" and not row["tp"]:
        tp, pp = 8, 6  # strong-scaling rows: the weak-scaling layout of the 177B model
    vpp = 2 if row["vp"].startswith("unknown") else _int(row, "vp")
    stages = None
    if pp > 1 and model.num_layers % (pp * vpp):
        stages = uneven_stages(model.num_layers, pp)
    dp = gpus // (tp * cp * pp)
    gbs = int(row["global_batch_seqs"])
    mbs = _int(row, "micro_batch", 1)
    if gbs % (mbs * dp):
        mbs = 1
    if row["source"] == "megatron-readme":
        mbs, vpp, stages = megatron_readme_schedule(model, pp, gbs // dp, mbs, vpp, stages)
    if row["framework"] == "torchtitan" and pp > 1 and not row["micro_batch"].strip():
        mbs = torchtitan_pipeline_mbs(int(row["year"]), gbs // dp, pp * vpp)
    return Layout(tp=tp, sp=tp > 1, cp=cp, ep=ep, pp=pp, vpp=vpp, zero=ZERO.get(row["sharding"], 1), mbs=mbs,
                  recompute=_recompute(row), stage_layers=stages)


def torchtitan_pipeline_mbs(year: int, local_batch: int, total_stages: int) -> int:
    """The pipeline micro-batch of a torchtitan row that does not state it: its release's default. Before 2025
    torchtitan split the local batch into as many micro-batches as the schedule has stages in total
    (experimental.pipeline_parallel_microbatches unset -> n_microbatches = num_total_stages in
    build_pipeline_schedule), so the Dec 2024 405B rows (local batch 32, 8 ranks) ran micro-batches of 4 (1F1B)
    and 2 (interleaved, 16 stages). Since 2025 the default is parallelism.pipeline_parallel_microbatch_size = 1
    (torchtitan 0.1.0 config_manager.py)."""
    if year >= 2025 or local_batch % total_stages:
        return 1
    return max(local_batch // total_stages, 1)


def _train(row: dict, stack: str) -> TrainSpec:
    precision = row["precision"]
    grad = "fp32" if row["framework"] == "megatron" else None
    overlap = True if ("async tp" in row["notes"].lower() or row["framework"] == "megatron") else None
    # DualPipe (DeepSeek-V3 report section 3.2.1) runs each chunk's all-to-all beside another chunk's computation
    ep_overlap = "dualpipe" in row["notes"].lower()
    train = TrainSpec(global_batch_size=int(row["global_batch_seqs"]), seq_length=int(row["seq_len"]),
                      precision=precision, grad_dtype=grad, tp_comm_overlap=overlap, fp8_recipe=_fp8_recipe(row),
                      ep_comm_overlap=ep_overlap)
    return hp.resolve_train(train, stack)


def why_not(row: dict, models: dict) -> Optional[str]:
    """The reason a row cannot be a parplan problem, or None."""
    if not row["step_s"]:
        return "no step time (global batch or FLOP convention not published): relative checks only"
    if row["precision"] not in ("bf16", "fp16", "fp8"):
        return f"precision {row['precision']} is not a parplan precision"
    if row["model"] not in models:
        return f"model {row['model']} has no architecture in models.json"
    if _gpu_key(row["gpu"]) is None:
        return f"gpu {row['gpu']} has no parplan profile"
    return None


def load_measured() -> list[MeasuredCase]:
    """Every expressible measured row as a MeasuredCase (measured_s = the row's step_s)."""
    models, out = _models(), []
    for row in _rows():
        if why_not(row, models):
            continue
        gpu, gpus = _gpu_key(row["gpu"]), int(row["num_gpus"])
        model = ModelSpec.model_validate({**models[row["model"]], "seq_length": int(row["seq_len"])})
        stack = _stack(row)
        out.append(MeasuredCase(
            dataset=row["source"], label=row["id"], model=model, cluster=_cluster(row, gpu, gpus),
            train=_train(row, stack), layout=_layout(row, model, gpus), measured_s=float(row["step_s"]),
            row_id=row["id"], source=row["source"], stack=stack, sharding=row["sharding"], gpus=gpus))
    return out


def skipped() -> list[tuple[str, str]]:
    """(row id, reason) of every row load_measured leaves out."""
    models = _models()
    return [(r["id"], reason) for r in _rows() if (reason := why_not(r, models))]


def tokens_per_step(case: Case) -> int:
    """Global batch in tokens."""
    return case.train.global_batch_size * case.train.seq_len(case.model)


def same_problem_key(case: MeasuredCase) -> tuple:
    """What makes two runs comparable: hardware (GPU, count) and the work (model, tokens per step)."""
    return (case.cluster.gpu_profile.name, case.gpus, case.model.name, tokens_per_step(case))


ZPP_GPUS = 384  # Figures 6 and 7 of the ZeRO++ blog (Figure 8 does not state its GPU count: not used)


def _zpp_case(row: dict, models: dict) -> Optional[MeasuredCase]:
    """A DeepSpeed ZeRO-3 row of the ZeRO++ blog as a problem: 384 V100 on DGX-2 nodes, sequence 512
    (the ZeRO++ tutorial), the row's tokens per GPU as the micro-batch, one micro-batch per step."""
    if row["model"] not in models or row["sharding"] != "zero3" or row["num_gpus"] != str(ZPP_GPUS):
        return None
    tokens = 2048 if "2K tokens" in row["notes"] else 1024
    model = ModelSpec.model_validate(models[row["model"]])
    mbs = tokens // model.seq_length
    train = hp.resolve_train(TrainSpec(global_batch_size=ZPP_GPUS * mbs, precision="fp16",
                                       flash_attention=False), "deepspeed")
    return MeasuredCase(dataset=row["source"], label=row["id"], model=model,
                        cluster=_cluster(row, "v100-sxm3-32gb", ZPP_GPUS), train=train,
                        layout=Layout(zero=3, mbs=mbs, recompute="full"), measured_s=float("nan"),
                        row_id=row["id"], source=row["source"], stack="deepspeed", sharding="zero3", gpus=ZPP_GPUS)


def zpp_ratio_pairs() -> list[tuple[MeasuredCase, MeasuredCase, float]]:
    """(a, b, measured t_a / t_b) for every pair of ZeRO-3 rows of the same model on the same 384 GPUs:
    with the same model and sequence, t is proportional to tokens per GPU / TFLOP/s per GPU, whatever
    FLOP convention the blog used (its bar labels are rounded to integers)."""
    models, rows = _models(), _rows()
    cases = [(c, r) for r in rows if (c := _zpp_case(r, models)) is not None]
    out = []
    for i, (a, ra) in enumerate(cases):
        for b, rb in cases[i + 1:]:
            if a.model.name == b.model.name:
                ta = a.layout.mbs / float(ra["value"])
                tb = b.layout.mbs / float(rb["value"])
                out.append((a, b, ta / tb))
    return out


def production_recipe_cases() -> list[MeasuredCase]:
    """The 8 Megatron-Bridge H100 production recipes (data/measured/production_recipes_h100.json) as
    step-time rows, read as benchmarks/fit_verdicts.production_cases reads them for memory (stack nemo:
    Megatron-Core with TE userbuffers TP overlap; bf16 gradients and each row's performance-recipe settings,
    fit_verdicts.PERF_RECIPES; FP8 weights in FP8 recipes); the step
    time is the file's measured_step_s (global batch x sequence / (tokens/s/GPU x GPUs)). Source
    "production-recipes"; sharding from the layout's zero."""
    from fit_verdicts import H100_STACK, production_cases

    rows = {r["id"]: r for r in json.loads((DATA / "production_recipes_h100.json").read_text())["rows"]}
    out = []
    for rid, model, cluster, train, lay, _ in production_cases():
        r = rows[rid]
        out.append(MeasuredCase(
            dataset="production-recipes", label=rid, model=model, cluster=cluster, train=train, layout=lay,
            measured_s=float(r["measured_step_s"]), row_id=rid, source="production-recipes", stack=H100_STACK,
            sharding={0: "ddp", 3: "zero3"}.get(lay.zero, f"zero{lay.zero}"), gpus=r["gpus"]))
    return out
