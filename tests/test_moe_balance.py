"""Router load balance as a priced mechanism (TrainSpec.moe_load_balancing, moe_expert_bias;
costmodels.moe_balance): the busiest expert-parallel rank's routed rows, which every rank waits for."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import moe_balance, moe_compute
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import stage_activation_bytes
from costmodels.step import step_time
from costmodels.moe_timing import microbatch_dispatch_s
from costmodels.timing import layer_time, make_context
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.exporters.common import ExportPlan
from planner.files.native import load_native_text
from planner.files.shellread import parse_flags
from planner.frameworks.megatron import export as megatron_export
from planner.frameworks.megatron import flags as mf
from planner.frameworks.megatron.train import balance_data
from helpers import MOE_MEGATRON_SCRIPT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _context(kind: str = "aux_loss", ep: int = 8, model: str = "mixtral-8x7b", bias: bool = False,
             recompute: str = "selective", dispatcher: str | None = None, **model_update):
    m = hp.load_model(model).model_copy(update={"seq_length": 4096, **model_update})
    cluster = hp.load_cluster("dgx-h100", 2)
    train = hp.resolve_train(TrainSpec(global_batch_size=256, seq_length=4096, moe_load_balancing=kind,
                                       moe_expert_bias=bias, ep_dispatcher=dispatcher), "megatron-core")
    lay = resolve_layout(m, cluster, train, Layout(ep=ep, zero=1, recompute=recompute))
    return make_context(m, cluster, train, lay)


# ---- the factor ---------------------------------------------------------------------------------------------

def test_hand_worked_rank_excess():
    """GPT-OSS-120B's layout: E = 128 experts over ep = 8 ranks, g = 16 per rank, no balancing (0.72 per expert):
    0.72 sqrt(ln 8 / ln 128) / sqrt(16) = 0.72 sqrt(3/7) / 4 = 0.1178."""
    assert moe_balance.rank_excess(0.72, 128, 8) == pytest.approx(0.18 * math.sqrt(3 / 7))
    assert moe_balance.rank_excess(0.72, 128, 8) == pytest.approx(0.1178, abs=1e-4)
    assert moe_balance.rank_excess(0.72, 128, 128) == pytest.approx(0.72)  # one expert per rank: the expert's
    assert moe_balance.rank_excess(0.72, 128, 1) == 0.0  # one rank holds every expert: nobody waits


def test_capacity_factor_caps_the_busiest_rank():
    assert moe_balance.load_factor(0.72, 8, 8) == pytest.approx(1.72)
    assert moe_balance.load_factor(0.72, 8, 8, capacity_factor=1.25) == pytest.approx(1.25)
    assert moe_balance.load_factor(0.0, 8, 8, capacity_factor=1.25) == 1.0


def test_kinds_and_the_expert_bias():
    assert moe_balance.expert_excess("none") > moe_balance.expert_excess("aux_loss") == 0.0
    assert moe_balance.expert_excess("forced") == 0.0
    assert moe_balance.expert_excess("none", expert_bias=True) == 0.0
    assert set(moe_balance.EXPERT_EXCESS) == set(moe_balance.BALANCE_KINDS)


@settings(max_examples=60, deadline=None)
@given(e=st.floats(0, 30), experts=st.integers(2, 512), ep=st.integers(1, 512))
def test_rank_excess_never_above_the_experts(e, experts, ep):
    assert 0.0 <= moe_balance.rank_excess(e, experts, ep) <= e + 1e-12


# ---- priced ---------------------------------------------------------------------------------------------------

def test_none_is_slower_than_aux_loss_and_forced_the_fastest():
    steps = {k: step_time(_context(k)).step_s for k in ("none", "aux_loss", "seq_aux_loss", "forced")}
    assert steps["none"] > steps["aux_loss"]
    assert steps["forced"] == min(steps.values())
    assert step_time(_context("none", bias=True)).step_s == steps["aux_loss"]  # the bias balances


def test_a_dense_model_and_one_rank_are_unaffected():
    for kwargs in (dict(model="llama3-8b", ep=1), dict(ep=1)):
        assert step_time(_context("none", **kwargs)).step_s == step_time(_context("aux_loss", **kwargs)).step_s


def test_what_scales_and_what_does_not():
    """The busiest rank's tokens per expert and all-to-all bytes scale by the factor; attention does not."""
    plain, hot = _context("aux_loss"), _context("none")
    factor = hot.x.moe_load
    assert factor == pytest.approx(1 + moe_balance.rank_excess(0.72, 8, 8)) and factor > 1
    assert moe_compute.tokens_per_expert(hot.model, hot.x) == pytest.approx(
        factor * moe_compute.tokens_per_expert(plain.model, plain.x))
    assert microbatch_dispatch_s(hot) > microbatch_dispatch_s(plain)
    dense_plain, dense_hot = layer_time(plain, moe=False), layer_time(hot, moe=False)
    assert dense_plain == dense_hot
    assert layer_time(hot, moe=True).ep_comm_s > layer_time(plain, moe=True).ep_comm_s


def test_the_allgather_dispatcher_moves_every_token_whatever_the_routing():
    hot, plain = _context("none", dispatcher="allgather"), _context("aux_loss", dispatcher="allgather")
    assert microbatch_dispatch_s(hot) == microbatch_dispatch_s(plain)


def test_the_busiest_rank_stores_more_routed_activations_unless_capacity_pads():
    def act(kind, **kw):
        c = _context(kind, recompute="none", **kw)
        return stage_activation_bytes(c.model, c.train, c.lay, 0)

    assert act("none") > act("aux_loss")
    assert act("none", capacity_factor=1.0) == act("aux_loss", capacity_factor=1.0)


@settings(max_examples=30, deadline=None)
@given(a=st.floats(1.0, 3.0), b=st.floats(1.0, 3.0), dispatcher=st.sampled_from(["alltoall", "deepep", "allgather"]),
       recompute=st.sampled_from(["none", "selective", "full"]), ep=st.sampled_from([2, 4, 8]))
def test_step_time_never_falls_as_the_imbalance_grows(a, b, dispatcher, recompute, ep):
    c = _context(ep=ep, recompute=recompute, dispatcher=dispatcher)
    low, high = sorted((a, b))
    t_low = step_time(replace(c, x=replace(c.x, moe_load=low))).step_s
    t_high = step_time(replace(c, x=replace(c.x, moe_load=high))).step_s
    assert t_high >= t_low - 1e-12
    if high > low + 1e-3:  # the busiest rank's grouped GEMMs grow with it whatever the dispatcher
        assert t_high > t_low


# ---- read and written -----------------------------------------------------------------------------------------

def _read(extra: str):
    return load_native_text(MOE_MEGATRON_SCRIPT.format(extra=extra), "megatron", None, "dgx-h100", None)


def _step(p) -> float:
    return step_time(make_context(p.model, p.cluster, p.train, resolve_layout(p.model, p.cluster, p.train,
                                                                              p.layout))).step_s


def test_megatron_flags_are_read_and_priced():
    plain, none = _read(""), _read("--moe-router-load-balancing-type none")
    assert plain.train.moe_load_balancing == "aux_loss" and none.train.moe_load_balancing == "none"
    assert _step(none) > _step(plain)
    forced = _read("--moe-router-force-load-balancing --moe-router-load-balancing-type none")
    assert forced.train.moe_load_balancing == "forced" and _step(forced) == _step(plain)
    biased = _read("--moe-router-enable-expert-bias --moe-router-score-function sigmoid "
                   "--moe-router-load-balancing-type seq_aux_loss")
    assert biased.train.moe_expert_bias and biased.train.moe_load_balancing == "seq_aux_loss"


@pytest.mark.parametrize("words, kind", [("aux_loss seq_aux_loss", "aux_loss"), ("none", "none"),
                                         ("none global_aux_loss", "global_aux_loss"), ("sinkhorn", "sinkhorn")])
def test_a_list_of_kinds_is_read_as_its_balancing_one(words, kind):
    a = mf.MegatronArgs(parse_flags(["--moe-router-load-balancing-type", *words.split(), "--bf16"],
                                    mf.SWITCHES, mf.LIST_FLAGS))
    assert balance_data(a)["moe_load_balancing"] == kind


def test_a_zero_aux_loss_coefficient_is_warned():
    """Megatron's --moe-aux-loss-coeff defaults to 0.0: an aux_loss router without it trains unbalanced."""
    assert any("--moe-aux-loss-coeff 0" in w for w in _read("").warnings)
    assert not any("aux-loss-coeff" in w for w in _read("--moe-aux-loss-coeff 1e-2").warnings)
    assert not any("aux-loss-coeff" in w for w in _read("--moe-router-load-balancing-type none").warnings)


def test_moe_kernel_switches_left_off_are_read_or_warned():
    """Without --moe-grouped-gemm Megatron runs SequentialMLP, whose host time parplan does not price: warned once.
    Without --moe-permute-fusion it runs the unfused permute, which is priced (TrainSpec.moe_permute_fusion false,
    slower), so it is not warned."""
    plain, both = _read(""), _read("--moe-grouped-gemm --moe-permute-fusion")
    assert sum("--moe-grouped-gemm is not set" in w for w in plain.warnings) == 1
    assert not any("moe-permute-fusion" in w for w in plain.warnings)
    assert not any("is not set: Megatron runs" in w for w in both.warnings)
    assert plain.train.moe_permute_fusion is False and both.train.moe_permute_fusion is True
    assert _step(plain) > _step(both)


def test_a_bad_kind_names_the_flag():
    a = mf.MegatronArgs(parse_flags(["--moe-router-load-balancing-type", "balanced"], mf.SWITCHES, mf.LIST_FLAGS))
    with pytest.raises(UserError, match="--moe-router-load-balancing-type 'balanced'"):
        balance_data(a)


@pytest.mark.parametrize("kind, bias", [("none", False), ("forced", False), ("aux_loss", False),
                                        ("seq_aux_loss", True), ("sinkhorn", False)])
def test_the_exporter_writes_what_differs_from_megatron_and_reads_back(kind, bias):
    c = _context(kind, bias=bias)
    args = megatron_export.balance_args(c.train)
    if kind == "aux_loss" and not bias:
        assert args == [("--moe-aux-loss-coeff", "1e-2")]  # Megatron's default coefficient, 0.0, balances nothing
    words = [str(w) for pair in args for w in pair if w is not None]
    back = balance_data(mf.MegatronArgs(parse_flags(words, mf.SWITCHES, mf.LIST_FLAGS)))
    assert back.get("moe_load_balancing", "aux_loss") == kind and back.get("moe_expert_bias", False) == bias
    plan = ExportPlan(c.model, c.cluster, c.train, c.lay, 0, 1.0)
    assert set(args) <= set(megatron_export.moe_args(plan))


def test_the_cli_option_prices_the_imbalance():
    from typer.testing import CliRunner

    from planner.cli import app

    args = ["estimate", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--layout",
            "ep=8,zero=1,recompute=selective", "--global-batch", "256", "--json"]
    plain, none, forced = (json.loads(CliRunner().invoke(app, a).stdout)["time"]["step_s"] for a in (
        args, args + ["--moe-router-load-balancing-type", "none"], args + ["--moe-router-load-balancing-type",
                                                                          "forced"]))
    assert none > plain == forced
    bad = CliRunner().invoke(app, args + ["--moe-router-load-balancing-type", "nope"])
    assert bad.exit_code == 2 and "--moe-router-load-balancing-type 'nope'" in bad.output
    assert "Traceback" not in bad.output


def test_the_production_rows_read_their_performance_recipes():
    """megatron-bridge 0.6.2 perf_recipes (PyPI sdist): GPT-OSS-120B H100 BF16 forces load balancing and recomputes
    layernorm + moe_act on the all-to-all dispatcher; DeepSeek-V3 H100 recomputes mla_up_proj + mlp, does not
    overlap the gradient reduce, splits 61 layers 7 / 8 x 6 / 6 ("Et|(tt|)*30mL") and trains its MTP module; Qwen3
    forces balancing with no recompute; every row reduces gradients in bf16 (_perf_precision)."""
    from fit_verdicts import production_cases

    cases = {rid: (model, train, lay) for rid, model, _, train, lay, _ in production_cases()}
    _, oss, oss_lay = cases["mb2604-h100-gpt-oss-120b"]
    assert (oss.moe_load_balancing, oss.ep_dispatcher) == ("forced", "alltoall")
    assert oss_lay.recompute == "selective" and oss_lay.recompute_modules == ["layernorm", "moe_act"]
    dsv3, dsv3_train, dsv3_lay = cases["mb2509-h100-deepseek-v3"]
    assert dsv3_lay.recompute_modules == ["mla_up_proj", "mlp"] and dsv3_train.overlap_grad_reduce is False
    assert dsv3_lay.stage_layers == [7, 8, 8, 8, 8, 8, 8, 6] and sum(dsv3_lay.stage_layers) == dsv3.num_layers
    assert dsv3.mtp_num_layers == 1
    _, qwen, qwen_lay = cases["mb2604-h100-qwen3-30b-ep16"]
    assert qwen.moe_load_balancing == "forced" and qwen_lay.recompute == "none"
    assert {train.grad_reduce_bytes_per_param for _, train, _ in cases.values()} == {2}


def test_a_switch_given_a_value_is_refused_as_megatron_refuses_it():
    """Megatron's argparse exits on `--moe-permute-fusion=yes` (store_true: "ignored explicit argument"); read on, the
    switch would have been priced as on."""
    with pytest.raises(UserError, match=r"--moe-permute-fusion=yes: --moe-permute-fusion is a switch and takes no"):
        _read("--moe-permute-fusion=yes")
