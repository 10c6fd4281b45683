"""Axolotl's 16-bit weights and fused loss (planner.files.axolotl_states) and the Trainer's in-place optimizers
(planner.files.shell_trainer_optim.in_place), against axolotl 0.19.0, liger-kernel 0.8.5 and transformers 5.24.0.

Axolotl's own examples/llama-3/fft-8b.yaml (Llama 3.1 8B, DDP on 8 GPUs, 8,192 tokens, paged_adamw_8bit, Liger's
fused linear cross entropy) was called out of memory at 111 GiB on an H100: an fp32 master copy Axolotl does not
keep (30 GiB), a whole micro-batch's fp32 logits Liger never holds, and foreach-AdamW temporaries an 8-bit
optimizer does not make (27 GiB between them)."""

from __future__ import annotations

import json

import yaml

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.train_spec import TrainSpec
from planner.files import axolotl_states
from planner.files.native import load_native
from planner.files.shell_trainer_optim import in_place
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

FFT_8B = {"base_model": "NousResearch/Meta-Llama-3.1-8B", "plugins": ["axolotl.integrations.liger.LigerPlugin"],
          "liger_rope": True, "liger_rms_norm": True, "liger_glu_activation": True,
          "liger_fused_linear_cross_entropy": True, "datasets": [{"path": "tatsu-lab/alpaca", "type": "alpaca"}],
          "sequence_len": 8192, "sample_packing": True, "gradient_accumulation_steps": 8, "micro_batch_size": 1,
          "num_epochs": 1, "optimizer": "paged_adamw_8bit", "learning_rate": 2e-5, "bf16": "auto", "fp16": None,
          "tf32": False, "gradient_checkpointing": True, "flash_attention": True, "deepspeed": None, "fsdp": None}


def _load(tmp_path, doc):
    path = tmp_path / "fft.yaml"
    path.write_text(yaml.safe_dump(doc))
    read = ReadNotes()
    return load_native(path, None, "dgx-h100", None, TrainerFlags(), read), read


def test_axolotls_fft_8b_example_fits_an_h100(tmp_path):
    prob, read = _load(tmp_path, FFT_8B)
    t = prob.train
    assert (t.master_weights, t.grad_dtype, t.exp_avg_dtype, t.loss_chunks) == (False, "bf16", "fp8", 32)
    assert t.stack_spec.memory.optimizer_temp_bytes == 0
    peak = estimate(prob.model, prob.cluster, t, prob.layout).memory.stages[0]
    gib = 2**30
    assert round(peak.weights_bytes / gib, 1) == round(peak.grads_bytes / gib, 1) == 15.0
    assert round(peak.optimizer_bytes / gib, 1) == 15.0  # 8-bit moments, 2 B/param, no master copy
    assert peak.transient_bytes < 1 * gib
    assert estimate(prob.model, prob.cluster, t, prob.layout).fits
    assert not any("master copy is kept" in n for n in read.notes)
    assert any("no fp32 master copy" in n for n in read.notes)


def test_torch_adamw_moments_take_the_weights_dtype_and_deepspeed_keeps_its_masters(tmp_path):
    prob, _ = _load(tmp_path, {**FFT_8B, "optimizer": None, "liger_fused_linear_cross_entropy": False})
    t = prob.train  # Axolotl's default optimizer adamw_torch_fused: zeros_like(param) moments, no temporaries
    assert (t.master_weights, t.exp_avg_dtype, t.exp_avg_sq_dtype, t.loss_chunks) == (False, "bf16", "bf16", 1)
    ds = {"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
          "gradient_accumulation_steps": "auto"}
    (tmp_path / "zero2.json").write_text(json.dumps(ds))
    prob, read = _load(tmp_path, {**FFT_8B, "deepspeed": "zero2.json"})
    assert prob.train.master_weights and not any("no fp32 master copy" in n for n in read.notes)


def test_liger_chunks_as_its_kernel_counts_them():
    """liger-kernel 0.8.5 ops/fused_linear_cross_entropy.py: inc = ceil(V / H), chunk = next_pow2(ceil(BT / inc)),
    its own comment's example BT = 4096 * 4, V = 32000, H = 4096: inc 8, chunk 2048, 8 chunks."""
    from types import SimpleNamespace
    model = hp.load_model("llama2-7b").model_copy(update={"vocab_size": 32000})
    prob = SimpleNamespace(model=model, layout=SimpleNamespace(mbs=4, cp=1),
                           train=SimpleNamespace(seq_length=4096))
    assert axolotl_states.loss_chunks(prob, {"liger_fused_linear_cross_entropy": True}) == 8
    prob.layout.mbs, prob.train.seq_length = 1, 8192  # Llama 3: inc ceil(128256 / 4096) = 32, chunk 256
    prob.model = hp.load_model("llama3-8b")
    assert axolotl_states.loss_chunks(prob, {"cut_cross_entropy": True}) == 32
    assert axolotl_states.loss_chunks(prob, {}) == 1


def test_only_in_place_optimizers_drop_the_step_temporaries():
    train = hp.resolve_train(TrainSpec(global_batch_size=8), "fsdp")
    assert train.stack_spec.memory.optimizer_temp_bytes == 4.0  # torch's foreach AdamW: sqrt(exp_avg_sq)
    for name in ("adamw_torch_fused", "paged_adamw_8bit", "adamw_bnb_8bit", "adamw_torch_4bit", "paged_adamw_32bit"):
        assert in_place(train, name).stack_spec.memory.optimizer_temp_bytes == 0, name
    for name in ("adamw_torch", "sgd", "adafactor"):
        assert in_place(train, name).stack_spec.memory.optimizer_temp_bytes == 4.0, name


def test_a_no_trainer_script_keeps_torch_adamws_temporaries(tmp_path):
    """Accelerate's run_clm_no_trainer.py builds torch.optim.AdamW (foreach on CUDA): its sqrt(exp_avg_sq)
    temporaries stay priced, while the Trainer's run_clm.py runs the fused default without them."""
    from planner.files.native import load_native as load
    temps = {}
    for script in ("run_clm.py", "run_clm_no_trainer.py"):
        path = tmp_path / f"{script}.sh"
        path.write_text(f"accelerate launch --multi_gpu --num_processes 8 {script} --model_name_or_path meta-llama/Meta-Llama-3-8B "
                        "--per_device_train_batch_size 1 --block_size 2048 --output_dir out\n")
        prob = load(path, None, "dgx-h100", None, TrainerFlags(), ReadNotes())
        temps[script] = prob.train.stack_spec.memory.optimizer_temp_bytes
    assert temps == {"run_clm.py": 0.0, "run_clm_no_trainer.py": 4.0}


def test_fsdp_keeps_the_fp32_master_copy_accelerate_upcasts_to(tmp_path):
    """accelerate 1.15.0 upcasts the trainable weights to fp32 under FSDP1 and FSDP2 whenever mixed precision is
    on (Axolotl's bf16 turns it on): an Axolotl FSDP run of a 70B model keeps 16 B/param of states (sharded), not the
    no-master 6 B/param that first called it a fit on one H100 node."""
    doc = {**FFT_8B, "base_model": "meta-llama/Llama-3.1-70B", "sequence_len": 2048, "optimizer": "adamw_torch_fused",
           "liger_fused_linear_cross_entropy": False, "fsdp_version": 2,
           "fsdp_config": {"reshard_after_forward": True, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                           "transformer_layer_cls_to_wrap": "LlamaDecoderLayer", "state_dict_type": "FULL_STATE_DICT"}}
    prob, read = _load(tmp_path, doc)
    assert prob.layout.zero == 3 and prob.train.master_weights and prob.train.exp_avg_dtype == "fp32"
    assert not any("no fp32 master copy" in n for n in read.notes)
    assert not estimate(prob.model, prob.cluster, prob.train, prob.layout).fits  # 70 B x 16 B / 8 = 131 GiB
    assert axolotl_states.fsdp({"fsdp": ["full_shard"]}) and not axolotl_states.fsdp({"fsdp": None})
