""""It ran, so it fits": parplan's fit verdict on every run in the repository's data, and on the
published out-of-memory labels.

Usage: python benchmarks/fit_verdicts.py [--write]
Prints one line per run parplan misjudges and the counts; `--write` puts the counts and the misjudged
rows into docs/accuracy.md (between the fit-verdict markers). A run that happened must be judged to
fit (`fits`: the floor A + C + gN within the GPU, costmodels.device_memory); an out-of-memory label
must be judged not to fit.

Runs that happened (each judged as its data describes it):
- every measured memory peak that is not an OOM (benchmarks/memory_data.py);
- every measured step-time run: Narayanan et al. 2021 Table 1, vTrain's A100 ground truth, and the
  public measured runs (benchmarks/splits.measured()); a row whose source does not state its
  recompute is judged with full recompute, the least memory it can have run with (it ran with some
  setting; assuming none would turn a missing field into an out-of-memory verdict). Rows the
  step-time tables exclude as not being a run parplan can express (accuracy.EXCLUDED) are listed
  apart with that reason;
- the 8 Megatron-Bridge H100 production recipes (benchmarks/data/measured/production_recipes_h100.json,
  from NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md; production_cases below).
Out-of-memory labels: the `complete` OOM rows of benchmarks/data/measured/oom_and_fit_labels.json
(its README: public GitHub issues and docs), mapped to parplan problems in LABELS with each
assumption; the ones parplan cannot express (LoRA, a multi-model RLHF loop) are listed with why.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import measured_data  # noqa: E402
import splits  # noqa: E402
from accuracy import EXCLUDED  # noqa: E402
from doc_sections import replace_section  # noqa: E402
from memory_data import load_memory_cases  # noqa: E402
from reference_data import narayanan, preset_latencies, vtrain  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels.estimate import estimate  # noqa: E402
from costmodels.hardware_spec import ClusterSpec  # noqa: E402
from costmodels.layout import Layout  # noqa: E402
from costmodels.model_spec import ModelSpec  # noqa: E402
from costmodels.train_spec import TrainSpec  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "measured"
DOC = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"
BEGIN, END = "<!-- fit-verdicts:begin -->", "<!-- fit-verdicts:end -->"
GIB = 2**30


@dataclass(frozen=True)
class Judged:
    """One run or label and parplan's verdict on it."""

    source: str
    case_id: str
    ran: bool  # True: the run happened (must fit); False: it ran out of memory (must not fit)
    fits: bool
    device_gib: float  # the peak stage's predicted device use (unhindered reserve)
    budget_gib: float  # the GPU less the cluster's margin
    note: str = ""

    @property
    def right(self) -> bool:
        return self.fits == self.ran


def judge(source: str, case_id: str, ran: bool, model, cluster, train, layout, note: str = "") -> Judged:
    """parplan's verdict on one problem."""
    est = estimate(model, cluster, train, layout)
    peak = est.memory.stages[est.memory.peak_stage]
    budget = (cluster.gpu_profile.hbm_bytes - cluster.memory_reserve_gib * GIB) / GIB
    return Judged(source, case_id, ran, est.fits, peak.device_bytes / GIB, budget, note)


# ---- production recipes -------------------------------------------------------------------------

# Stage splits the recipes set that the table does not print (Megatron-Bridge recipes at the snapshot):
# Llama 3.1 405B counts the embedding and the loss as one layer each (account_for_embedding/loss_in_pipeline_
# split): 126 layers + 2 over 8 ranks, 15 on the first and last. DeepSeek-V3's is in PERF_RECIPES.
RECIPE_STAGES = {"llama3.1-405b": [15, 16, 16, 16, 16, 16, 16, 15]}
H100_STACK = "nemo"  # Megatron-Core with TE userbuffers TP overlap: the recipes' setting


def _recipe_model(name: str) -> ModelSpec:
    """A preset, or models.json's entry for a path the table names (models/gpt-oss-120b.json)."""
    key = name.removeprefix("models/").removesuffix(".json")
    if name.startswith("models/"):
        return ModelSpec.model_validate(json.loads((DATA / "models.json").read_text())[key])
    return hp.load_model(key)


# What each row's performance recipe sets beyond the table's columns, read from Megatron-Bridge 0.6.2's flat
# performance recipes (PyPI sdist megatron_bridge-0.6.2.tar.gz, src/megatron/bridge/perf_recipes, read 2026-11-26;
# ported, their docstrings say, from the legacy scripts/performance workload configs the table was measured with):
# {row id: {"train": TrainSpec fields, "layout": Layout fields, "model": ModelSpec fields}}.
# - every row: _common.py _perf_precision line 110 and _benchmark_common lines 71-72 set grad_reduce_in_fp32 False
#   ("Identical to scripts/performance/utils/precision.get_precision_config"): bf16 gradient buffer and reduction,
#   applied in production_cases.
# - gpt-oss-120b (gpt_oss/h100/gpt_oss.py gpt_oss_120b_pretrain_64gpu_h100_bf16_config, the table's PP4 EP8 GBS
#   1280): moe_router_force_load_balancing True (line 30; the model's own "none" is overridden), recompute_modules
#   ["layernorm", "moe_act"] selective (lines 39-40); the all-to-all dispatcher of its base recipe
#   (recipes/gpt_oss/h100/gpt_oss.py line 204; no flex backend is switched on).
# - deepseek-v3 (deepseek/h100/deepseek_v3.py, the bf16 and fp8cs 1024-GPU configs, TP2 PP8 VP4 EP64 as in the
#   table; their GBS is 16384, the 25.09 row's 8192): deepseek/common.py _deepseek_v3_common (forced balancing,
#   selective recompute), recompute_modules ["mla_up_proj", "mlp"] (line 42), overlap_grad_reduce False (line 44),
#   pipeline layout "Et|(tt|)*30mL" (line 47: embedding and 1 layer, 30 chunks of 2 layers, the MTP module and the
#   loss in the last chunk: ranks hold 7, 8 x 6, 6 layers), and the MTP module the model's HF config names
#   (models/deepseek/deepseek_v3_bridge.py line 97: num_nextn_predict_layers 1).
# - qwen3-30b-a3b (qwen/h100/qwen3_moe.py qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs_config): forced balancing
#   (line 77), the flex dispatcher with HybridEP (line 89; priced as DeepEP, the stack's), no recompute.
PERF_RECIPES = {
    "mb2604-h100-gpt-oss-120b": {
        "train": dict(moe_load_balancing="forced", ep_dispatcher="alltoall"),
        "layout": dict(recompute="selective", recompute_modules=["layernorm", "moe_act"])},
    "mb2509-h100-deepseek-v3": {
        "train": dict(moe_load_balancing="forced", overlap_grad_reduce=False),
        "layout": dict(recompute="selective", recompute_modules=["mla_up_proj", "mlp"],
                       stage_layers=[7, 8, 8, 8, 8, 8, 8, 6], vpp=4, chunk_layers=[1] + [2] * 30 + [0]),
        "model": dict(mtp_num_layers=1)},
    "mb2604-h100-qwen3-30b-ep16": {"train": dict(moe_load_balancing="forced")},
}


def production_cases() -> list[tuple]:
    """(id, model, cluster, train, layout, note) per production recipe. Assumptions, the same for every
    recipe: Megatron-Bridge's performance scripts run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    and the fused cross-entropy loss (GPTModelProvider cross_entropy_loss_fusion True; _benchmark_common sets
    Transformer Engine's); gradients reduced in bf16 (PERF_RECIPES' note); FP8 recipes keep FP8 weights
    (megatron-bridge 0.3.1 megatron/bridge/training/mixed_precision.py: bf16_with_fp8_current_scaling_mixed,
    the recipes' FP8 preset, sets fp8_param_gather True, as do the delayed, MXFP8 and blockwise presets;
    read from the wheel on 2026-11-26). Then each row's PERF_RECIPES settings; a selective row without named
    modules recomputes Megatron's default, the attention core."""
    rows = json.loads((DATA / "production_recipes_h100.json").read_text())["rows"]
    out = []
    for r in rows:
        recipe = PERF_RECIPES.get(r["id"], {})
        model = _recipe_model(r["model"]).model_copy(update=recipe.get("model", {}))
        cluster = hp.load_cluster(r["cluster"]).model_copy(update={"num_nodes": r["gpus"] // 8})
        lay = Layout.model_validate({k: _layout_value(v) for k, v in
                                     (kv.split("=") for kv in r["layout"].split(","))})
        if model.num_layers % lay.pp:
            stages = RECIPE_STAGES.get(model.name) or measured_data.uneven_stages(model.num_layers, lay.pp)
            lay = lay.model_copy(update={"stage_layers": stages})
        lay = Layout.model_validate({**lay.model_dump(), **recipe.get("layout", {})})
        train = hp.resolve_train(TrainSpec(
            global_batch_size=r["gbs"], seq_length=r["seq"], precision=r["precision"],
            fp8_recipe=r.get("fp8_recipe") or "tensorwise", grad_dtype="bf16", fused_loss=True,
            expandable_segments=True, fp8_param_gather=r["precision"] == "fp8", **recipe.get("train", {})),
            H100_STACK)
        out.append((r["id"], model, cluster, train, lay, r.get("notes", "")))
    return out


def _layout_value(text: str):
    if text in ("none", "selective", "full"):
        return text
    return int(text)


# ---- out-of-memory labels -----------------------------------------------------------------------

def _gpu(name: str, hbm_gib: float | None = None):
    """A GPU profile, resized for cards parplan has no profile of (memory is all the verdict reads)."""
    base = hp.load_gpu(name)
    if hbm_gib is None:
        return base
    return base.model_copy(update={"name": f"{name}-as-{hbm_gib:g}gib", "hbm_gib": hbm_gib})


def _cluster(gpu, gpus: int, preset: str = "dgx-a100") -> ClusterSpec:
    per = min(gpus, 8)
    c = hp.load_cluster(preset)
    return ClusterSpec(name=f"label-{gpu.name}", gpu=gpu, gpus_per_node=per, num_nodes=gpus // per,
                       scale_up_gb_per_s=c.scale_up_gb_per_s, scale_out_gb_per_s=c.scale_out_gb_per_s,
                       **preset_latencies(preset))


# Qwen2-72B's text model (Qwen2-VL-72B's language tower: config.json of Qwen/Qwen2-72B); the vision tower is
# left out, so its memory is a lower bound of the real run's, which is enough for an out-of-memory verdict.
QWEN2_72B = ModelSpec(name="qwen2-72b-text", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                      ffn_hidden_size=29568, vocab_size=152064, seq_length=2048, activation="swiglu", norm="rmsnorm",
                      position_embedding="rope", linear_bias=False, qkv_bias=True, tied_embeddings=False,
                      dropout=False)
# HuggingFaceTB/SmolLM2-1.7B config.json.
SMOLLM2_17B = ModelSpec(name="smollm2-1.7b", num_layers=24, hidden_size=2048, num_attention_heads=32, num_kv_heads=32,
                        ffn_hidden_size=8192, vocab_size=49152, seq_length=16384, activation="swiglu", norm="rmsnorm",
                        position_embedding="rope", linear_bias=False, tied_embeddings=True, dropout=False)


def _model(name: str, seq: int) -> ModelSpec:
    spec = {"qwen2-72b-text": QWEN2_72B, "smollm2-1.7b": SMOLLM2_17B}.get(name) or hp.load_model(name)
    return spec.model_copy(update={"seq_length": max(spec.seq_length, seq)})


# id -> (model, GPU profile, GiB if resized, GPUs, stack, layout, train fields, note)
LABELS = {
    "tt-old-llama2-70b-lbs2-selop-OOM": ("llama2-70b", "a100-80gb", None, 64, "torchtitan-eager",
                                         dict(zero=3, mbs=2, recompute="selective"), dict(global_batch_size=128,
                                         seq_length=4096), "torchtitan 2024 (no compile), per-op SAC"),
    "megatron-606": ("llama2-7b", "a100-40gb", None, 8, "megatron-core", dict(zero=1, mbs=1),
                     dict(global_batch_size=8, seq_length=64, grad_dtype="fp32"),
                     "one node (NNODES not stated; gbs 8 = mbs 1 x dp 8); the distributed optimizer assumed on "
                     "(the least memory of the two)"),
    "automodel-2673": ("llama3-70b", "h100-sxm", None, 32, "automodel", dict(pp=8, zero=3, mbs=4),
                       dict(global_batch_size=128, seq_length=1024, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16",
                            master_weights=False),
                       "Llama 3.3 70B = llama3-70b's shape; bf16 Adam states without fp32 master (PR text); 8 "
                       "micro-batches (gbs not stated); recompute not stated: full, the least memory"),
    "openrlhf-698-oom": ("llama3-8b", "a100-80gb", None, 1, "deepspeed", dict(zero=2, mbs=1, recompute="full"),
                         dict(global_batch_size=1, seq_length=128), "ZeRO-2 on one GPU shards nothing"),
    "llamafactory-5977-z3-oom": ("llama3-8b", "a100-40gb", 24.0, 8, "deepspeed",
                                 dict(zero=3, mbs=1, recompute="full"),
                                 dict(global_batch_size=16, seq_length=1024, precision="fp16"),
                                 "RTX 3090 as a 24 GiB GPU; cutoff_len 1024 taken as the sequence"),
    "llamafactory-5590-oom": ("qwen2-72b-text", "a100-80gb", None, 16, "deepspeed",
                              dict(zero=3, mbs=1, recompute="full"), dict(global_batch_size=256, seq_length=2048),
                              "Qwen2-VL-72B's text tower only (a lower bound)"),
    "llamafactory-6270-oom": ("qwen2-72b-text", "a100-80gb", None, 4, "deepspeed",
                              dict(zero=3, mbs=1, recompute="full"), dict(global_batch_size=8, seq_length=2048),
                              "A800 = a100-80gb; Qwen2-VL-72B's text tower only (a lower bound)"),
    "axolotl-2412-sp1-oom": ("smollm2-1.7b", "h100-sxm", None, 1, "deepspeed", dict(mbs=1),
                             dict(global_batch_size=1, seq_length=16384, exp_avg_dtype="fp8", exp_avg_sq_dtype="fp8"),
                             "HF Trainer eager (the deepspeed stack's Hugging Face activations) on one GPU; "
                             "adamw_8bit as 1-byte moments"),
    "fastchat-2086-oom": ("llama2-7b", "a100-40gb", 48.0, 2, "fsdp", dict(zero=3, mbs=2, recompute="full"),
                          dict(global_batch_size=64, seq_length=2048), "RTX A6000 as a 48 GiB GPU; LLaMA-1 7B = "
                          "llama2-7b's shape"),
}
NOT_EXPRESSIBLE = {
    "llamafactory-4026-oom": "LoRA fine-tuning (parplan prices full training)",
    "llamafactory-6531-bs2-oom": "LoRA fine-tuning, micro-batch '>1' not stated",
    "axolotl-814-mbs2-oom": "LoRA on an 8-bit base model",
    "dschat-368-a100-40g-oom": "RLHF: actor, critic, reference and reward models and DeepSpeed's hybrid engine",
}


def label_rows() -> list[dict]:
    return json.loads((DATA / "oom_and_fit_labels.json").read_text())


def complete_oom_ids() -> list[str]:
    """Ids of the labels whose outcome is OOM and whose completeness starts with 'complete'."""
    return [r["id"] for r in label_rows() if r["outcome"] == "OOM" and r["completeness"].startswith("complete")]


def label_problem(case_id: str) -> tuple:
    """(model, cluster, train, layout, note) of a mapped label."""
    name, gpu, gib, gpus, stack, lay, train, note = LABELS[case_id]
    model = _model(name, train["seq_length"])
    cluster = _cluster(_gpu(gpu, gib), gpus, "dgx-h100" if gpu.startswith("h100") else "dgx-a100")
    return model, cluster, hp.resolve_train(TrainSpec(**train), stack), Layout(**lay), note


# ---- collection ---------------------------------------------------------------------------------

def _least_memory_recompute(case) -> tuple:
    """(layout, note) of a step-time row: full recompute where its source does not state recompute."""
    row = _raw_rows().get(getattr(case, "row_id", ""))
    if row is None or row["recompute"] in ("none", "selective", "full"):
        return case.layout, ""
    return case.layout.model_copy(update={"recompute": "full"}), "recompute not stated: judged with full"


# NeMo AutoModel's performance table does not state the optimizer. AutoModel builds DeepSeek-V3 and Kimi K2 in
# their config's torch_dtype, bf16 (components/models/deepseek_v3/model.py get_dtype(config.torch_dtype)), and
# with ep = dp the experts stay outside FSDP's fp32 policy (stack automodel: whole_experts_outside_fsdp), so
# torch.optim.Adam keeps bf16 moments and no fp32 master (AutoModel warns of exactly this setup:
# components/optim/precision_warnings.py). Read so: with TE FusedAdam's fp32 master and moments the published
# AM-002/AM-003 runs would need 87 and 96 GiB of an 80 GB H100 (tests/test_it_ran_so_it_fits.py).
AUTOMODEL_BF16_ADAM = {"master_weights": False, "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}

MLA_MODELS = ("deepseek-v3", "kimi-k2")  # Kimi K2 is DeepSeek-V3's architecture with 64 heads and 384 experts


def _step_problem(case) -> tuple:
    """(model, train, layout, note) of a step-time row as its memory verdict sees it. Beyond the recompute
    rule: DeepSeek-V3-shaped models get their multi-head latent attention (models.json stores them as MHA,
    2.5x the attention weights, because the time model's data predates ModelSpec.mla; the MLA widths are the
    deepseek-v3 preset's, Kimi K2's config.json has the same); NeMo AutoModel rows, which run "kernels TE",
    get Transformer Engine's fused parallel cross entropy (the loss is not stated)."""
    lay, note = _least_memory_recompute(case)
    model, train = case.model, case.train
    if model.name in MLA_MODELS and model.mla is None:
        data = model.model_dump(exclude={"head_dim", "num_kv_heads"})
        model = ModelSpec.model_validate({**data, "mla": hp.load_model("deepseek-v3").mla.model_dump(),
                                          "qk_norm": True})
        note = "; ".join(n for n in (note, "with MLA") if n)
    if getattr(case, "source", "") == "automodel-moe":
        train = train.model_copy(update={"fused_loss": True, **AUTOMODEL_BF16_ADAM})
        note = "; ".join(n for n in (note, "TE fused loss", "bf16 Adam states") if n)
    return model, train, lay, note


_RAW: dict = {}


def _raw_rows() -> dict:
    if not _RAW:
        _RAW.update({r["id"]: r for r in measured_data._rows()})
    return _RAW


def ran() -> tuple[list[Judged], list[tuple[str, str]]]:
    """(verdicts on every run that happened, (id, reason) of the rows left out)."""
    out, left = [], []
    for c in load_memory_cases():
        if c.kind != "oom" and ":" not in c.case_id:
            out.append(judge("memory runs", c.case_id, True, c.model, c.cluster, c.train, c.layout))
    a100 = hp.load_gpu("a100-80gb")
    step_cases = [*narayanan(a100), *vtrain(a100, "single"), *vtrain(a100, "multi"), *splits.measured()]
    for c in step_cases:
        case_id = getattr(c, "row_id", "") or f"{c.dataset}:{c.label}"
        if case_id in EXCLUDED:
            left.append((case_id, EXCLUDED[case_id]))
            continue
        model, train, lay, note = _step_problem(c)
        out.append(judge("step-time runs", case_id, True, model, c.cluster, train, lay, note))
    for case_id, *problem, note in production_cases():
        out.append(judge("production recipes", case_id, True, *problem, note))
    return out, left


def oom_labels() -> tuple[list[Judged], list[tuple[str, str]]]:
    """(verdicts on the expressible complete OOM labels, (id, reason) of the others)."""
    out, left = [], []
    for case_id in complete_oom_ids():
        if case_id in NOT_EXPRESSIBLE:
            left.append((case_id, NOT_EXPRESSIBLE[case_id]))
            continue
        model, cluster, train, lay, note = label_problem(case_id)
        out.append(judge("OOM labels", case_id, False, model, cluster, train, lay, note))
    return out, left


def table() -> str:
    """Markdown: counts per source, then every misjudged row and every row left out."""
    runs, left_runs = ran()
    labels, left_labels = oom_labels()
    lines = ["| data | rows | judged right | verdict wanted |", "|---|---|---|---|"]
    for source in ("memory runs", "step-time runs", "production recipes", "OOM labels"):
        rows = [j for j in runs + labels if j.source == source]
        want = "fits" if source != "OOM labels" else "does not fit"
        lines.append(f"| {source} | {len(rows)} | {sum(j.right for j in rows)} | {want} |")
    wrong = [j for j in runs + labels if not j.right]
    if wrong:
        lines += ["", "Misjudged:", "", "| data | row | predicted device GiB | GPU budget GiB | note |",
                  "|---|---|---|---|---|"]
        lines += [f"| {j.source} | {j.case_id} | {j.device_gib:.1f} | {j.budget_gib:.1f} | {j.note} |" for j in wrong]
    lines += ["", "Left out:", ""] + [f"- {i}: {why}" for i, why in left_runs + left_labels]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    replace_section(DOC, BEGIN, END, text, "## It ran, so it fits (memory verdicts)\n\nWritten by "
                    "`python benchmarks/fit_verdicts.py --write`.")


def main() -> None:
    text = table()
    print(text)
    if "--write" in sys.argv[1:]:
        write_doc(text)


if __name__ == "__main__":
    main()
