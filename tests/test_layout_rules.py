"""Every rule of costmodels.layout.resolve_layout, and ModelSpec's own validation.

The rules mirror Megatron-LM's argument checks (benchmarks/data/launch_formats.md, "Rules Megatron
enforces"): world % (tp*cp*pp), dp consistency, heads % tp, query groups a multiple or a divisor of
tp, ffn % tp, seq % (2*cp), the expert grid, layers % pp (or stage_layers), vpp and schedule rules,
global batch % (mbs*dp). Each failing case checks that a LayoutError is raised AND that its message
names the fields with the numbers involved, so a user can act on it.
"""

from __future__ import annotations

import pytest
from helpers import cluster, gpt, llama_like
from pydantic import ValidationError

from costmodels.layout import Layout, LayoutError, resolve_layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec

# A small dense Llama-style model every rule can be exercised on: 32 heads, 8 kv heads, f = 4096.
DENSE = llama_like(h=2048, a=32, kv=8, layers=8, ffn=4096, seq=4096)
# A small MoE model: 8 experts of width 1024, top-2.
MOE = llama_like(h=1024, a=16, kv=4, layers=8, ffn=4096, num_experts=8, top_k=2, moe_ffn_hidden_size=1024)


def _train(gbs: int = 64, seq: int | None = None) -> TrainSpec:
    return TrainSpec(global_batch_size=gbs, seq_length=seq)


def _resolve(model: ModelSpec, gpus: int, gbs: int = 64, seq: int | None = None, **layout) -> Layout:
    return resolve_layout(model, cluster(gpus), _train(gbs, seq), Layout(**layout))


def _error(model: ModelSpec, gpus: int, gbs: int = 64, seq: int | None = None, **layout) -> str:
    with pytest.raises(LayoutError) as info:
        _resolve(model, gpus, gbs, seq, **layout)
    return str(info.value)


def _has(message: str, *parts: str) -> None:
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


# ---- degrees -------------------------------------------------------------------------------------


def test_world_not_divisible_by_tp_cp_pp():
    msg = _error(DENSE, 8, tp=4, pp=2, cp=2)  # 4*2*2 = 16 GPUs per replica on an 8-GPU cluster
    _has(msg, "GPUs=8", "tp*cp*pp=4*2*2=16")
    msg = _error(gpt(768, 12, 12), 8, tp=3)
    _has(msg, "GPUs=8", "tp*cp*pp=3*1*1=3")


def test_world_not_divisible_reports_three_way_product():
    msg = _error(DENSE, 16, tp=2, pp=1, cp=3)
    _has(msg, "GPUs=16", "tp*cp*pp=2*3*1=6")


def test_dp_given_inconsistent_with_world():
    msg = _error(DENSE, 16, tp=2, pp=2, dp=2)
    _has(msg, "tp*cp*pp*dp=2*1*2*2=8", "GPUs=16")


def test_heads_not_divisible_by_tp():
    model = gpt(h=768, a=12, layers=4)  # f = 3072 divides by 8: only the heads rule is broken
    msg = _error(model, 8, tp=8)
    _has(msg, "num_attention_heads=12", "tp=8")
    msg = _error(llama_like(h=4096, a=64, kv=8, layers=4, ffn=6144), 6, tp=3)
    _has(msg, "num_attention_heads=64", "tp=3")


def test_kv_heads_neither_multiple_nor_divisor_of_tp():
    # kv=3, heads=12, tp=2: 12 % 2 = 0 but 3 % 2 = 1 and 2 % 3 = 2.
    model = llama_like(h=768, a=12, kv=3, layers=4, ffn=2048)
    msg = _error(model, 2, tp=2)
    _has(msg, "num_kv_heads=3", "tp=2")
    assert "num_attention_heads" not in msg  # heads % tp is fine: only the kv rule is broken


@pytest.mark.parametrize("kv,tp", [(8, 2), (8, 8), (2, 8), (1, 8), (4, 4)])
def test_kv_heads_multiple_or_divisor_of_tp_accepted(kv: int, tp: int):
    model = llama_like(h=1024, a=8 * kv if kv < 8 else 32, kv=kv, layers=4, ffn=4096)
    assert _resolve(model, tp, tp=tp).tp == tp


def test_ffn_not_divisible_by_tp():
    model = llama_like(h=1024, a=16, kv=8, layers=4, ffn=2730)
    msg = _error(model, 4, tp=4)
    _has(msg, "ffn_hidden_size=2730", "tp=4")


def test_seq_not_divisible_by_two_cp():
    msg = _error(DENSE, 4, cp=4, seq=4100)  # 4100 % 8 = 4
    _has(msg, "seq_length=4100", "2*cp=8")


def test_seq_rule_only_with_cp():
    assert _resolve(DENSE, 1, seq=4099).cp == 1  # odd length is fine without context parallelism


def test_ep_without_experts():
    msg = _error(DENSE, 4, ep=2)
    _has(msg, "ep=2", "num_experts=0")
    msg = _error(DENSE, 4, etp=2)
    _has(msg, "etp=2", "num_experts=0")


def test_experts_not_divisible_by_ep():
    msg = _error(MOE, 6, ep=3)
    _has(msg, "num_experts=8", "ep=3")


def test_world_not_divisible_by_expert_grid():
    # world 6 is divisible by tp*cp*pp = 1, but not by etp*ep*pp = 1*4*1.
    msg = _error(MOE, 6, ep=4)
    _has(msg, "GPUs=6", "etp*ep*pp=1*4*1=4")
    assert "tp*cp*pp=" not in msg.replace("etp*ep*pp", "")


def test_moe_ffn_not_divisible_by_etp():
    model = llama_like(h=1024, a=16, kv=4, layers=4, ffn=4096, num_experts=8, top_k=2, moe_ffn_hidden_size=1000)
    msg = _error(model, 16, etp=16)
    _has(msg, "moe_ffn_hidden_size=1000", "etp=16")


def test_ep_with_tp_needs_sequence_parallelism():
    msg = _error(MOE, 4, tp=2, ep=2, sp=False)
    _has(msg, "ep=2", "tp=2", "sp=1")
    assert _resolve(MOE, 4, tp=2, ep=2, sp=True).sp is True


def test_all_broken_rules_are_listed():
    model = gpt(h=768, a=12, layers=4, ffn_hidden_size=3003)
    msg = _error(model, 8, tp=8)
    _has(msg, "num_attention_heads=12", "ffn_hidden_size=3003", "tp=8")


# ---- stages --------------------------------------------------------------------------------------


def test_layers_not_divisible_by_pp_suggests_stage_layers():
    model = llama_like(h=1024, a=16, kv=8, layers=10, ffn=4096)
    msg = _error(model, 4, pp=4)
    _has(msg, "num_layers=10", "pp=4", "stage_layers")
    suggestion = msg.split("(e.g. ")[1].split(")")[0]
    stages = [int(n) for n in suggestion.split(",")]
    assert sum(stages) == 10 and len(stages) == 4
    assert _resolve(model, 4, pp=4, stage_layers=stages).stage_layers == stages  # the suggestion works


def test_stage_layers_wrong_length():
    msg = _error(DENSE, 4, pp=4, stage_layers=[4, 4])
    _has(msg, "stage_layers has 2 entries", "pp=4")


def test_stage_layers_zero_entry():
    msg = _error(DENSE, 4, pp=4, stage_layers=[4, 0, 2, 2])
    _has(msg, "stage_layers=[4, 0, 2, 2]", "no layers")


def test_stage_layers_wrong_sum():
    msg = _error(DENSE, 2, pp=2, stage_layers=[4, 5])
    _has(msg, "stage_layers=[4, 5]", "sums to 9", "num_layers=8")


def test_vpp_needs_pp_above_one():
    msg = _error(DENSE, 1, vpp=2)
    _has(msg, "vpp=2", "pp=1")


def test_stage_needs_a_layer_per_virtual_chunk():
    # was test_stage_not_divisible_by_vpp: Megatron's --pipeline-model-parallel-layout and torchtitan's
    # module split run chunks that differ by one layer, so only an empty chunk is an error now
    msg = _error(DENSE, 2, pp=2, vpp=4, stage_layers=[3, 5])
    _has(msg, "stage_layers=[3, 5]", "vpp=4")
    assert _resolve(DENSE, 2, pp=2, vpp=2, stage_layers=[3, 5]).stage_layers == [3, 5]
    model = llama_like(h=1024, a=16, kv=8, layers=6, ffn=4096)
    assert _resolve(model, 2, pp=2, vpp=2).stage_layers == [3, 3]  # chunks of 2 and 1 layers


def test_interleaved_schedule_needs_vpp():
    msg = _error(DENSE, 2, pp=2, schedule="interleaved")
    _has(msg, "schedule=interleaved", "vpp=1")


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_non_interleaved_schedule_rejects_vpp(schedule: str):
    msg = _error(DENSE, 2, pp=2, vpp=2, schedule=schedule)
    _has(msg, f"schedule={schedule}", "vpp=2")


# ---- batch ---------------------------------------------------------------------------------------


def test_global_batch_not_divisible_by_mbs_dp():
    msg = _error(DENSE, 8, gbs=10, tp=2, mbs=2)  # dp = 4, mbs*dp = 8
    _has(msg, "global_batch_size=10", "mbs*dp=2*4=8")


def test_num_microbatches_mismatch():
    msg = _error(DENSE, 4, gbs=16, num_microbatches=3)  # dp = 4, m = 16 / 4 = 4
    _has(msg, "num_microbatches=3", "16/(1*4)=4")


# ---- positive cases ------------------------------------------------------------------------------


def test_dp_derived_from_world():
    lay = _resolve(DENSE, 64, gbs=128, tp=4, pp=2, cp=2)
    assert lay.dp == 64 // (4 * 2 * 2) == 4
    assert lay.num_microbatches == 128 // (1 * 4)


def test_dp_given_consistent_is_kept():
    lay = _resolve(DENSE, 16, tp=2, pp=2, dp=4, gbs=32, num_microbatches=8)
    assert (lay.dp, lay.num_microbatches) == (4, 8)


def test_schedule_defaults():
    assert _resolve(DENSE, 2, pp=2).schedule == "1f1b"
    assert _resolve(DENSE, 1).schedule == "1f1b"
    assert _resolve(DENSE, 2, pp=2, vpp=2).schedule == "interleaved"
    assert _resolve(DENSE, 2, pp=2, schedule="gpipe").schedule == "gpipe"


def test_sequence_parallel_dropped_at_tp1():
    assert _resolve(DENSE, 4, sp=True).sp is False
    assert _resolve(DENSE, 4, tp=2, sp=True).sp is True


def test_uniform_stage_layers_filled():
    assert _resolve(DENSE, 4, pp=4).stage_layers == [2, 2, 2, 2]


def test_uneven_stage_layers_accepted():
    model = llama_like(h=1024, a=16, kv=8, layers=10, ffn=4096)
    lay = _resolve(model, 4, pp=4, stage_layers=[2, 3, 3, 2])
    assert lay.stage_layers == [2, 3, 3, 2]
    lay = _resolve(model, 2, pp=2, vpp=2, stage_layers=[4, 6])
    assert lay.schedule == "interleaved"


def test_resolve_is_idempotent():
    lay = _resolve(DENSE, 16, gbs=64, tp=2, pp=2, sp=True, recompute="selective")
    again = resolve_layout(DENSE, cluster(16), _train(64), lay)
    assert again == lay


def test_layout_is_strict():
    with pytest.raises(ValidationError):
        Layout(tp="2")
    with pytest.raises(ValidationError):
        Layout(pipeline=2)
    with pytest.raises(ValidationError):
        Layout(sp=2)
    assert Layout(sp=1).sp is True


# ---- ModelSpec validation ------------------------------------------------------------------------

BASE = dict(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=100)


def _model_error(**kw) -> str:
    with pytest.raises(ValidationError) as info:
        ModelSpec(**{**BASE, **kw})
    return str(info.value)


def test_heads_not_divisible_by_kv_heads():
    _has(_model_error(num_attention_heads=12, hidden_size=96, num_kv_heads=5), "num_attention_heads=12",
         "num_kv_heads=5")


def test_hidden_not_divisible_by_heads_without_head_dim():
    _has(_model_error(hidden_size=100, num_attention_heads=3), "hidden_size=100", "num_attention_heads=3",
         "head_dim")
    assert ModelSpec(**{**BASE, "hidden_size": 100, "num_attention_heads": 3, "head_dim": 32}).q_width == 96


def test_top_k_above_experts():
    _has(_model_error(num_experts=2, top_k=3), "top_k=3", "num_experts=2")


def test_moe_needs_top_k():
    _has(_model_error(num_experts=4, top_k=0), "top_k=0", "num_experts=4")


def test_top_k_without_experts():
    _has(_model_error(top_k=2), "top_k=2", "num_experts")


def test_first_k_dense_layers_must_leave_moe_layers():
    _has(_model_error(num_experts=4, top_k=1, first_k_dense_layers=2), "first_k_dense_layers=2", "num_layers=2")
    assert ModelSpec(**{**BASE, "num_experts": 4, "top_k": 1, "first_k_dense_layers": 1}).num_moe_layers == 1


def test_unknown_model_field_rejected():
    _has(_model_error(num_hidden_layers=2), "num_hidden_layers", "Extra inputs are not permitted")


@pytest.mark.parametrize("field", ["num_layers", "hidden_size", "num_attention_heads", "vocab_size"])
def test_string_int_rejected_strict(field: str):
    _has(_model_error(**{field: str(BASE[field])}), field)


def test_bool_int_rejected_strict():
    _has(_model_error(num_layers=True), "num_layers")


def test_model_defaults_filled():
    m = ModelSpec(**BASE)
    assert (m.num_kv_heads, m.head_dim, m.ffn_hidden_size, m.moe_ffn_hidden_size) == (4, 16, 256, 256)


def test_a_layout_key_typo_names_the_key_it_resembles():
    """`--layout zer0=1` said only "layout.zer0: Extra inputs are not permitted" (a new-user pass)."""
    import pytest

    from planner.errors import UserError
    from planner.files.loading import parse_layout

    with pytest.raises(UserError, match=r"unknown key 'zer0' \(did you mean zero\?\)"):
        parse_layout("zer0=1,dp=8")
    with pytest.raises(UserError, match=r"unknown key 'foo'; keys: tp, sp"):
        parse_layout("foo=1")
