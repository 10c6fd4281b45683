"""MoE all-to-all hidden behind another micro-batch's computation (TrainSpec.ep_comm_overlap): Megatron-Core
--overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe (costmodels.moe_timing.ep_exposed_s)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.layout import Layout, resolve_layout
from costmodels.overlap import exposed_s
from costmodels.step import step_time
from costmodels.timing import layer_time, make_context
from costmodels.train_spec import TrainSpec
from planner.exporters import ExportRefused, refuse_unrunnable
from planner.exporters.common import ExportPlan
from planner.exporters.launch_rules import megatron_rule_problems
from planner.files.native import load_native_text
from planner.frameworks.megatron import export as megatron_export
from planner.frameworks.megatron import flags as mf
from planner.files.shellread import parse_flags
from helpers import MOE_MEGATRON_SCRIPT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _context(overlap: bool, ep: int = 8, recompute: str = "selective", pp: int = 1, vpp: int = 1, nodes: int = 2):
    model = hp.load_model("mixtral-8x7b").model_copy(update={"seq_length": 4096})
    cluster = hp.load_cluster("dgx-h100", nodes)
    train = hp.resolve_train(TrainSpec(global_batch_size=256, seq_length=4096, ep_comm_overlap=overlap),
                             "megatron-core")
    lay = resolve_layout(model, cluster, train, Layout(ep=ep, pp=pp, vpp=vpp, zero=1, recompute=recompute))
    return make_context(model, cluster, train, lay)


def test_overlapped_all_to_all_is_what_the_layer_compute_leaves_exposed():
    plain, hidden = layer_time(_context(False), moe=True), layer_time(_context(True), moe=True)
    assert plain.ep_comm_s > 0 and plain.compute_s == hidden.compute_s
    kappa = _context(True).kappa
    assert hidden.ep_comm_s == pytest.approx(exposed_s(plain.compute_s + plain.recompute_s, plain.ep_comm_s, kappa))
    assert hidden.ep_comm_s < plain.ep_comm_s


def test_no_expert_parallelism_no_change():
    assert step_time(_context(True, ep=1)).step_s == step_time(_context(False, ep=1)).step_s


@settings(max_examples=25, deadline=None)
@given(ep=st.sampled_from([2, 4, 8]), recompute=st.sampled_from(["none", "selective", "full"]),
       nodes=st.sampled_from([1, 2, 4]))
def test_overlap_never_makes_a_step_slower(ep, recompute, nodes):
    assert step_time(_context(True, ep, recompute, nodes=nodes)).step_s <= \
        step_time(_context(False, ep, recompute, nodes=nodes)).step_s + 1e-12


def test_megatron_flag_is_read_and_priced():
    plain = load_native_text(MOE_MEGATRON_SCRIPT.format(extra=""), "megatron", None, "dgx-h100", None)
    hidden = load_native_text(MOE_MEGATRON_SCRIPT.format(extra="--overlap-moe-expert-parallel-comm"), "megatron", None,
                              "dgx-h100", None)
    assert hidden.train.ep_comm_overlap and not plain.train.ep_comm_overlap
    t_plain, t_hidden = (step_time(make_context(p.model, p.cluster, p.train, resolve_layout(
        p.model, p.cluster, p.train, p.layout))) for p in (plain, hidden))
    assert t_hidden.ep_comm_s < t_plain.ep_comm_s


@pytest.mark.parametrize("extra, problem", [
    ("--overlap-moe-expert-parallel-comm --pipeline-model-parallel-size 2", "needs virtual pipeline stages"),
    ("--overlap-moe-expert-parallel-comm --recompute-granularity full --recompute-method uniform "
     "--recompute-num-layers 1", "full recompute"),
    ("--overlap-moe-expert-parallel-comm --moe-shared-expert-overlap", "--moe-shared-expert-overlap"),
])
def test_megatron_rules_of_the_overlap(extra, problem):
    assert any(problem in p for p in megatron_rule_problems(_args(extra), 16))
    ok = megatron_rule_problems(_args("--overlap-moe-expert-parallel-comm"), 16)
    assert not [p for p in ok if "overlap-moe" in p]


def _args(extra: str) -> mf.MegatronArgs:
    """MOE_MEGATRON_SCRIPT's pretrain_gpt.py flags with `extra`, parsed as the check of written scripts parses them."""
    words = MOE_MEGATRON_SCRIPT.format(extra=extra).split("pretrain_gpt.py", 1)[1].replace("\\\n", " ").split()
    return mf.MegatronArgs(parse_flags(words, mf.SWITCHES), [], {})


def _plan(overlap: bool, recompute: str = "selective", pp: int = 1, vpp: int = 1) -> ExportPlan:
    c = _context(overlap, recompute=recompute, pp=pp, vpp=vpp)
    return ExportPlan(c.model, c.cluster, c.train, c.lay, 0, 1.0)


def test_exporter_writes_the_flag_only_when_priced():
    assert ("--overlap-moe-expert-parallel-comm", None) in megatron_export.moe_args(_plan(True))
    assert ("--overlap-moe-expert-parallel-comm", None) not in megatron_export.moe_args(_plan(False))


def test_exporter_refuses_what_megatron_core_asserts_against():
    with pytest.raises(ExportRefused, match="recompute=full"):
        refuse_unrunnable("megatron", _plan(True, recompute="full"))
    with pytest.raises(ExportRefused, match="without vpp"):
        refuse_unrunnable("megatron", _plan(True, pp=2))
    refuse_unrunnable("megatron", _plan(True, pp=2, vpp=2))  # interleaved: runs
    megatron_export.refusal(_plan(True, pp=2, vpp=2))
    with pytest.raises(ExportRefused, match="has no all-to-all overlap"):
        refuse_unrunnable("torchtitan", _plan(True))  # only Megatron-Core runs it


def test_deepseek_v3_dualpipe_row_is_read_with_the_overlap():
    """The DeepSeek-V3 report's own run (DSV3-001, a validation row): DualPipe hides the all-to-all; read
    without it the row was priced at 2.2x its measured step (43.4 s against 19.9 s)."""
    import splits

    case = next(c for c in splits.measured() if c.row_id == "DSV3-001")
    assert case.train.ep_comm_overlap
    lay = resolve_layout(case.model, case.cluster, case.train, case.layout)
    t = step_time(make_context(case.model, case.cluster, case.train, lay))
    assert t.ep_comm_s < 0.2 * t.compute_s
    assert abs(t.step_s / case.measured_s - 1) < 0.15  # +6.7% with blockwise FP8 at the tensorwise rate


@pytest.mark.parametrize("stack", ["megatron-core", "nemo", "torchtitan", "deepspeed"])
def test_blockwise_fp8_gemms_run_at_the_tensorwise_rate(stack):
    """DeepGEMM's block-scaled FP8 dense GEMMs (README @989c9e3, H800: 1,127-1,520 TFLOP/s at 4,096 rows) are at
    or above cuBLAS tensorwise FP8 at like shapes on our H100 (1,014-1,383): no source makes them slower. The
    default was 0.65 with no source, which priced DeepSeek-V3's own run 24% slower in compute. Both run at the
    per-tensor fraction, H100's FP8 over bf16 matmul ceiling (MAMF 0.709 / 0.803, benchmarks/calibrate.py)."""
    fp8 = hp.load_stack(stack).fp8
    assert fp8.of("blockwise") == fp8.of("tensorwise") == pytest.approx(0.709 / 0.803, abs=1e-3)


def test_the_cli_option_prices_the_overlap():
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    args = ["estimate", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--layout",
            "ep=8,zero=1,recompute=selective", "--global-batch", "256", "--json"]
    plain, hidden = (json.loads(CliRunner().invoke(app, a).stdout)["time"]["ep_comm_s"]
                     for a in (args, args + ["--overlap-moe-expert-parallel-comm"]))
    assert 0 < hidden < plain


@pytest.mark.parametrize("pp, vpp, ep", [(1, 1, 8), (2, 4, 8), (2, 4, 1)])
def test_the_paired_micro_batch_adds_one_moe_layer_of_activations(pp, vpp, ep):
    """megatron-core 0.19.2's combined 1F1B runs forward layer i of one micro-batch with backward layer L-1-i of
    another and releases the backward layer only after; its extra warm-up chunk replaces the forward interleaved
    1F1B holds before each backward. So every rank's peak grows by one MoE layer's activations (times the
    stack's activation scale), not by a micro-batch; the search's tables see the same bytes; ep = 1 (no
    overlap: Megatron asserts ep > 1) adds nothing."""
    from costmodels import activations as act  # noqa: PLC0415
    from costmodels.memory import memory_by_stage  # noqa: PLC0415
    from costmodels.params import stage_layer_mix  # noqa: PLC0415
    from costmodels.stage_linear import layout_coefficients  # noqa: PLC0415

    plain, paired = _context(False, ep, "none", pp, vpp), _context(True, ep, "none", pp, vpp)
    layer = act.layer_bytes(plain.model, plain.x, True) * plain.train.activation_scale if ep > 1 else 0.0
    before = memory_by_stage(plain.model, plain.cluster, plain.train, plain.lay)
    after = memory_by_stage(paired.model, paired.cluster, paired.train, paired.lay)
    for a, b in zip(before, after):
        assert b.activations_bytes - a.activations_bytes == pytest.approx(layer, abs=1)
    k = layout_coefficients(paired.model, paired.cluster, paired.train, paired.lay)
    for i, (s, mem) in enumerate(zip(k.stages, after)):
        n = stage_layer_mix(paired.model, paired.lay.stage_layers, i, paired.lay.vpp)[::-1]
        assert s.memory_bytes.at(*n) == pytest.approx(mem.total_bytes, abs=8)


def test_check_refuses_a_megatron_launch_that_breaks_the_overlaps_assertions(tmp_path):
    """megatron-core 0.16.1 transformer_config.py asserts virtual stages with pp > 1 and no full recompute under
    --overlap-moe-expert-parallel-comm; check priced such launches at 0.03 s of all-to-all (a new-user pass)."""
    from planner.errors import UserError
    from planner.files.native import load_native

    base = ("#!/bin/bash\ntorchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
            "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
            "--seq-length 4096 --max-position-embeddings 4096 --swiglu --normalization RMSNorm "
            "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
            "--vocab-size 32000 --micro-batch-size 1 --global-batch-size 256 --bf16 --num-experts 8 "
            "--moe-router-topk 2 --moe-token-dispatcher-type alltoall --expert-model-parallel-size 8 "
            "--moe-grouped-gemm --overlap-moe-expert-parallel-comm {extra}\n")
    path = tmp_path / "train.sh"
    for extra, rule in (("--pipeline-model-parallel-size 4", "needs virtual stages"),
                        ("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
                         "refuses full recomputation")):
        path.write_text(base.format(extra=extra))
        with pytest.raises(UserError, match=rule):
            load_native(path, None, "dgx-h100", None)
    path.write_text(base.format(extra="--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2"))
    assert load_native(path, None, "dgx-h100", None).train.ep_comm_overlap
