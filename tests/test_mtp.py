"""Multi-token prediction (ModelSpec.mtp_num_layers) and Megatron-Core's routed-expert activations:
parameter counts against DeepSeek's published sizes, hand-worked memory and time on the last stage,
the readers and writers, and the GELU expert's extra tensor."""

from __future__ import annotations

import pytest
from helpers import cluster, llama_like

import hardware_profiles as hp
from costmodels import activations as act
from costmodels import compute as cmp
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import memory_by_stage
from costmodels.model_spec import ModelSpec
from costmodels.params import active_params, layer_params, local_stage_params, norm_params, total_params
from costmodels.step import model_flops_per_step
from costmodels.timing import layer_time, make_context, stage_time
from costmodels.train_spec import TrainSpec
from planner.files.hf_config import model_from_hf_config

MOE = llama_like(256, 8, 8, 4, 512, vocab=1000, seq=512, num_experts=4, top_k=2, moe_ffn_hidden_size=128)


def with_mtp(m: ModelSpec, n: int = 1) -> ModelSpec:
    return ModelSpec.model_validate({**m.model_dump(), "mtp_num_layers": n})


def test_deepseek_v3_with_its_mtp_module_is_the_685b_checkpoint():
    """DeepSeek-V3 model card: 685B on Hugging Face = 671B main model + 14B MTP module. The checkpoint
    stores the module's embedding and output head again (2 V h); parplan shares them with the main model,
    as Megatron-Core does, so adding them back gives the checkpoint's size."""
    m = hp.load_model("deepseek-v3")
    mtp = with_mtp(m)
    stored_copies = 2 * m.vocab_size * m.hidden_size
    assert total_params(mtp) + stored_copies == pytest.approx(685e9, rel=0.002)
    assert round((total_params(mtp) - total_params(m) + stored_copies) / 1e9) == 13  # the card's "14B", rounded up
    assert active_params(mtp) - active_params(m) < 1e9  # one more MoE layer, top-8 of 256 experts active


def test_mtp_params_hand_worked():
    """One module: a layer of the last layer's kind, enorm + hnorm + final norm (h each), eh_proj 2h x h."""
    m = with_mtp(MOE, 2)
    one = layer_params(MOE, MOE.num_layers - 1).total + 3 * norm_params(MOE, 256) + 2 * 256 * 256
    assert total_params(m) - total_params(MOE) == 2 * one
    last = local_stage_params(m, [2, 2], 1, 1, 1, 1, 512).total - local_stage_params(MOE, [2, 2], 1, 1, 1, 1, 512).total
    assert last == 2 * one + 1000 * 256  # and the MTP stage's embedding copy (next test)
    assert local_stage_params(m, [2, 2], 0, 1, 1, 1, 512) == local_stage_params(MOE, [2, 2], 0, 1, 1, 1, 512)


def _stages(model: ModelSpec, lay: Layout, stack: str = "megatron-core"):
    clus = cluster(4)
    train = hp.resolve_train(TrainSpec(global_batch_size=8), stack)
    resolved = resolve_layout(model, clus, train, lay)
    return memory_by_stage(model, clus, train, resolved), make_context(model, clus, train, resolved)


@pytest.mark.parametrize("schedule,vpp,held", [("1f1b", 1, 1), ("interleaved", 2, 1), ("gpipe", 1, 4)])
def test_mtp_activations_sit_on_the_last_stage_once_per_micro_batch_its_last_chunk_holds(schedule, vpp, held):
    lay = Layout(pp=2, vpp=vpp, mbs=1, schedule=schedule)
    base, _ = _stages(MOE, lay)
    mtp, ctx = _stages(with_mtp(MOE), lay)
    x = ctx.x
    assert mtp[0].activations_bytes == base[0].activations_bytes
    extra = act.mtp_bytes(with_mtp(MOE), x)
    layer = act.layer_bytes(MOE, x, True)
    assert extra == layer + (2 + 2 * 2) * 512 * 256 + act.head_bytes(MOE, x)  # enorm input, eh_proj's 2h input
    assert mtp[1].activations_bytes - base[1].activations_bytes == pytest.approx(held * extra, abs=2)


def test_mtp_loss_keeps_its_fp32_softmax_through_the_main_loss():
    lay = Layout(pp=2, mbs=1)
    base, _ = _stages(MOE, lay)
    mtp, _ = _stages(with_mtp(MOE), lay)
    assert mtp[1].transient_bytes - base[1].transient_bytes == 4 * 512 * 1000


def test_mtp_time_and_flops_on_the_last_stage():
    """The last stage adds per module one MoE layer, eh_proj and one more output layer and loss; model
    FLOPs count the same as Megatron's num_floating_point_operations."""
    lay = Layout(pp=2, mbs=1)
    _, base = _stages(MOE, lay)
    _, ctx = _stages(with_mtp(MOE), lay)
    added = stage_time(ctx, 1).total_s - stage_time(base, 1).total_s
    assert added > layer_time(ctx, True).total_s
    assert stage_time(ctx, 0).total_s == stage_time(base, 0).total_s
    model_base, _ = model_flops_per_step(base)
    model_mtp, _ = model_flops_per_step(ctx)
    tokens = 8 * 512
    expected_fwd = tokens * (2 * 2 * 256 * 256 + 2 * 256 * 1000)  # eh_proj and the extra logits
    layer_fwd = (model_mtp - model_base) / 3 - expected_fwd
    assert layer_fwd == pytest.approx(8 * cmp.layer_flops(MOE, act.ActShape(seq=512, mbs=1), True))


def test_readers_and_megatron_writer_carry_mtp(tmp_path):
    from planner.frameworks.megatron.export import model_args
    from planner.frameworks.megatron.flags import model_data, read_megatron
    v3 = {"model_type": "deepseek_v3", "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
          "intermediate_size": 4096, "moe_intermediate_size": 512, "n_routed_experts": 8, "n_shared_experts": 1,
          "num_experts_per_tok": 2, "first_k_dense_replace": 1, "q_lora_rank": None, "kv_lora_rank": 512,
          "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 1000,
          "num_nextn_predict_layers": 1}
    assert model_from_hf_config(v3).mtp_num_layers == 1
    with pytest.raises(ValueError, match="num_nextn_predict_layers"):
        model_from_hf_config({**v3, "num_nextn_predict_layers": 99})
    script = tmp_path / "run.sh"
    script.write_text("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
                      "--vocab-size 1000 --seq-length 512 --mtp-num-layers 2\n")
    assert model_data(read_megatron(script.read_text()))["mtp_num_layers"] == 2

    class Plan:
        model, seq = with_mtp(MOE), 512
        train = TrainSpec(global_batch_size=8)
    assert ("--mtp-num-layers", 1) in model_args(Plan)


def test_megatron_gelu_experts_keep_the_probability_weighted_product():
    """Megatron-Core 0.19 TEGroupedMLP weights a GELU expert's activation by its routing probability in a
    separate multiply: activation input, output and product, 3 f-wide tensors (a dense GELU MLP keeps 2).
    One token, no tp, top-2: routed tokens 2 x (h + 3 f) instead of 2 x (h + 2 f)."""
    gelu_moe = ModelSpec(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=100, num_experts=4,
                         top_k=2, ffn_hidden_size=256, dropout=False)
    plain = act.ActShape(seq=1, mbs=1)
    megatron = act.ActShape(seq=1, mbs=1, expert_plain_widths=3.0)
    assert act.moe_mlp_bytes(gelu_moe, megatron) - act.moe_mlp_bytes(gelu_moe, plain) == 2 * 2 * 256
    assert act.dense_mlp_bytes(gelu_moe, megatron) == act.dense_mlp_bytes(gelu_moe, plain)
    assert act.moe_mlp_bytes(MOE, megatron) == act.moe_mlp_bytes(MOE, plain)  # SwiGLU: fused weighted kernel
    assert hp.load_stack("megatron-core").memory.expert_plain_widths == 3.0


def test_zero3_edges_gather_only_the_mtp_norms_and_projection():
    """ZeRO-3 without pipelining gathers the stage's non-layer parameters every micro-batch; an MTP module's
    layer is gathered in its own layer time (timing.mtp_time), so the edges add only its norms and eh_proj."""
    from costmodels.step import _extras
    lay = Layout(zero=3, mbs=1)
    _, base = _stages(MOE, lay, "torchtitan")
    _, ctx = _stages(with_mtp(MOE), lay, "torchtitan")
    assert _extras(ctx) - _extras(base) == 3 * norm_params(MOE, 256) + 2 * 256 * 256


def test_the_mtp_stage_builds_its_own_embedding_copy():
    """Megatron-Core builds an embedding wherever MTP runs (gpt_model.py: pre_process or mtp_process): with
    pp > 1 and untied embeddings the last rank holds V*h more; tied, its output layer's copy serves; pp = 1
    shares the first rank's."""
    m = with_mtp(MOE)
    one = local_stage_params(m, [2, 2], 1, 1, 1, 1, 512).total - local_stage_params(MOE, [2, 2], 1, 1, 1, 1, 512).total
    assert one == total_params(m) - total_params(MOE) + 1000 * 256
    tied = ModelSpec.model_validate({**m.model_dump(), "tied_embeddings": True})
    tied_base = ModelSpec.model_validate({**MOE.model_dump(), "tied_embeddings": True})
    assert local_stage_params(tied, [2, 2], 1, 1, 1, 1, 512).total - \
        local_stage_params(tied_base, [2, 2], 1, 1, 1, 1, 512).total == total_params(m) - total_params(MOE)
    assert local_stage_params(m, [4], 0, 1, 1, 1, 512).total - local_stage_params(MOE, [4], 0, 1, 1, 1, 512).total \
        == total_params(m) - total_params(MOE)


def test_the_head_is_held_once_per_micro_batch_of_the_last_chunk():
    """Interleaved 1F1B: the last rank holds (v - 1) p + 1 chunks at its peak, but only one micro-batch of its
    last chunk, the one with the final norm and output layer: the head counts once, not chunks / v times."""
    lay = Layout(pp=2, vpp=2, mbs=1, schedule="interleaved")
    stages, ctx = _stages(MOE, lay)
    x = ctx.x
    inflight = act.inflight_microbatches("interleaved", 1, 2, 2, 4)
    assert inflight == 1.5  # 3 chunks of 2
    expected = 2 * act.layer_bytes(MOE, x, True) * inflight + act.head_bytes(MOE, x)
    assert stages[1].activations_bytes == pytest.approx(expected, abs=2)
