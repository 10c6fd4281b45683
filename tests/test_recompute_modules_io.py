"""Named selective-recompute modules in and out: `--layout ...,recompute_modules=a:b`, the plan's layout string,
Megatron's `--recompute-modules a b` written and read back, and the formats that cannot name modules refusing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.framework import named_modules
from costmodels.layout import Layout, resolve_layout
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.exporters import ExportRefused, refuse_unrunnable
from planner.exporters.common import ExportPlan, layout_string
from planner.files.loading import parse_layout
from planner.files.native import load_native_text
from planner.frameworks.megatron import export as megatron_export

TEXT = "tp=1,pp=4,ep=8,dp=16,mbs=1,zero=1,recompute=selective,recompute_modules=layernorm:moe_act"


def _plan(layout: Layout) -> ExportPlan:
    model = hp.load_model("gpt-oss-120b")
    cluster = hp.load_cluster("dgx-h100", 8)
    train = hp.resolve_train(TrainSpec(global_batch_size=256, seq_length=4096), "megatron-core")
    return ExportPlan(model, cluster, train, resolve_layout(model, cluster, train, layout), 0, 1.0)


def test_the_layout_string_reads_and_writes_the_modules():
    lay = parse_layout(TEXT)
    assert lay.recompute_modules == ["layernorm", "moe_act"]
    plan = _plan(lay)
    assert parse_layout(layout_string(plan.layout)).recompute_modules == ["layernorm", "moe_act"]
    full = parse_layout("tp=1,pp=4,ep=8,dp=16,recompute=full,recompute_num_layers=3,recompute_method=block")
    back = parse_layout(layout_string(_plan(full).layout))
    assert (back.recompute_num_layers, back.recompute_method) == (3, "block")


def test_a_bad_module_names_the_field():
    with pytest.raises(UserError, match="recompute_modules"):
        parse_layout("tp=1,recompute=selective,recompute_modules=layernorm:attn")


def test_megatron_writes_the_modules_as_separate_words_and_check_reads_them_back():
    """argparse nargs="+" (megatron/training/arguments.py --recompute-modules): one word per module."""
    plan = _plan(parse_layout(TEXT))
    args = megatron_export.memory_args(plan)
    assert ("--recompute-modules", ("layernorm", "moe_act")) in args
    script = megatron_export.render(plan)[megatron_export.SCRIPT][0]
    assert "--recompute-modules layernorm moe_act" in script
    read = load_native_text(script, "megatron", None, "dgx-h100", None)
    assert read.layout.recompute == "selective" and read.layout.recompute_modules == ["layernorm", "moe_act"]


def test_full_recompute_writes_its_method_and_layer_count():
    plan = _plan(parse_layout("tp=1,pp=4,ep=8,dp=16,recompute=full,recompute_num_layers=3,recompute_method=block"))
    args = megatron_export.memory_args(plan)
    assert ("--recompute-method", "block") in args and ("--recompute-num-layers", 3) in args


def test_formats_that_cannot_name_modules_refuse_and_the_default_runs_everywhere():
    plan = _plan(parse_layout(TEXT))
    refuse_unrunnable("megatron", plan)
    for fmt in ("torchtitan", "deepspeed"):
        with pytest.raises(ExportRefused, match="recompute_modules=layernorm:moe_act"):
            refuse_unrunnable(fmt, plan)
    assert named_modules(parse_layout("tp=1,recompute=selective,recompute_modules=core_attn")) == []
    assert named_modules(parse_layout("tp=1,recompute=none")) == []


@pytest.mark.parametrize("text, field", [
    ("tp=1,recompute=selective,recompute_modules=:", "recompute_modules"),
    ("tp=1,recompute=none,recompute_modules=moe", "recompute_modules"),
    ("tp=1,recompute=selective,recompute_num_layers=2", "recompute_num_layers"),
])
def test_recompute_fields_outside_their_mode_are_refused_by_name(text, field):
    """An empty module list would price no recompute under recompute=selective, and modules or a layer count
    beside another mode would be silently ignored: each is refused, naming the field."""
    with pytest.raises(UserError, match=field):
        parse_layout(text)


def test_check_recompute_override_drops_the_config_modules():
    """`check --recompute full` over a script that recomputes named modules: the modules belonged to selective
    recompute, so the override runs full recompute without them instead of failing."""
    from planner.files.check_overrides import CheckOptions, apply_recompute

    lay = parse_layout(TEXT)
    full = apply_recompute(lay, CheckOptions(recompute="full"))
    assert full.recompute == "full" and full.recompute_modules is None
    assert apply_recompute(lay, CheckOptions(recompute="selective")).recompute_modules == ["layernorm", "moe_act"]


def test_check_recompute_full_is_every_layer():
    """`check --recompute full` over a full recompute of some layers (Megatron --recompute-num-layers, torchtitan's
    every-second block) prices every layer recomputed; it changed nothing before."""
    from costmodels.layout import Layout  # noqa: PLC0415
    from planner.files.check_overrides import CheckOptions, apply_recompute  # noqa: PLC0415

    some = Layout(recompute="full", recompute_num_layers=16, recompute_method="block")
    every = apply_recompute(some, CheckOptions(recompute="full"))
    assert (every.recompute, every.recompute_num_layers, every.recompute_method) == ("full", None, "uniform")


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 8]), cp=st.sampled_from([1, 2, 4]), cp_comm=st.sampled_from(["p2p", "a2a", "allgather"]),
       pp=st.sampled_from([1, 4]), vpp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 4, 8]), zero=st.sampled_from([0, 1, 3]),
       group=st.sampled_from([None, 2]), mbs=st.sampled_from([1, 2]), recompute=st.sampled_from(["none", "full"]))
def test_printed_layout_reads_back_as_the_same_layout(tp, cp, cp_comm, pp, vpp, dp, zero, group, mbs, recompute):
    """What plan, explain and the nothing-fits suggestions print (planner.search.explain.layout_text: blanks
    between parts) is a --layout the reader takes back to the same choices: sp, a cp algorithm and an HSDP
    shard group included (a workflow pass pasted 'tp=8 pp=1 dp=1 ...' and got 'not a whole number')."""
    from planner.search.explain import layout_text  # noqa: PLC0415

    group = group if zero and group and dp * cp % group == 0 else None
    lay = Layout(tp=tp, sp=tp > 1, cp=cp, cp_comm=cp_comm if cp > 1 else "p2p", pp=pp, vpp=vpp if pp > 1 else 1, dp=dp,
                 zero=zero, shard_group=group, mbs=mbs, recompute=recompute)
    back = parse_layout(layout_text(lay))
    names = ("tp", "sp", "cp", "cp_comm", "pp", "vpp", "dp", "zero", "mbs", "recompute")
    assert {k: getattr(back, k) for k in names} == {k: getattr(lay, k) for k in names}
    assert (back.shard_group or dp * cp) == (lay.shard_group or dp * cp)
