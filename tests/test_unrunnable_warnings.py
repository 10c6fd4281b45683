"""A layout priced with a stack whose framework cannot run it says so (estimate, check of a plan file, plan with a
stack named and no --framework), and ZeRO-2 with pipelining holds its gradients unsharded, as ZeRO-3 does.

Found by a new-user pass: `plan llama3-70b --stack deepspeed` won with tp=4 and a stage split DeepSpeed does not
build ("runs on" empty, "winner: fits"); `estimate ... zero=3,pp=4` under megatron-core priced a layout Megatron
refuses without a word; and zero=2 with pp priced sharded gradients that FSDP2 under torch.distributed.pipelining
does not reduce-scatter until the last micro-batch."""

from __future__ import annotations

from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.cli import app

runner = CliRunner()
LAYOUT = "tp=8,pp=4,dp=2,mbs=1,zero={z},recompute=none,sp=1"


def _estimate(zero: int):
    return runner.invoke(app, ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch",
                               "64", "--layout", LAYOUT.format(z=zero)])


def test_estimate_names_a_layout_its_stacks_framework_cannot_run():
    result = _estimate(3)
    assert result.exit_code in (0, 1)
    assert "warning: megatron (stack megatron-core) cannot run this layout (zero=3 with pp>1" in result.stderr
    assert "cannot run this layout" not in _estimate(1).stderr


def test_estimate_json_carries_the_same_warning():
    import json

    result = runner.invoke(app, ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch",
                                 "64", "--layout", LAYOUT.format(z=3), "--json"])
    warnings = json.loads(result.stdout)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("megatron (stack megatron-core) cannot run this layout")


def test_zero2_with_pipelining_holds_unsharded_gradients():
    """torch 2.13 pipelining/stage.py: every backward but the last sets set_requires_gradient_sync(False) on an
    FSDP module, so ZeRO-2's gradients stay whole until the step ends: ZeRO-1's gradient memory, not ZeRO-2's."""
    model, clus = hp.load_model("llama3-70b"), hp.load_cluster("dgx-h100", num_nodes=8)
    train = hp.resolve_train(TrainSpec(global_batch_size=64), "torchtitan")
    grads = {z: estimate(model, clus, train, Layout(tp=8, pp=4, zero=z, mbs=1)).memory.stages[0].grads_bytes
             for z in (1, 2)}
    assert grads[2] == grads[1]
    flat = {z: estimate(model, clus, train, Layout(tp=8, pp=1, zero=z, mbs=1)).memory.stages[0].grads_bytes
            for z in (1, 2)}
    assert flat[2] < flat[1]  # without pipelining ZeRO-2 still shards them


def test_plan_with_a_stack_and_no_framework_warns_when_its_winner_is_not_that_frameworks():
    result = runner.invoke(app, ["plan", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--stack",
                                 "deepspeed", "--top", "1", "--time-limit", "10"])
    assert result.exit_code == 0
    assert "warning: the winner: deepspeed (stack deepspeed) cannot run this layout" in result.stderr
    assert "add --framework deepspeed" in result.stderr


def test_a_fit_inside_the_memory_models_own_error_says_so():
    """A winner at 78.5 of 78.6 GiB while held-out device peaks run 9% low is flagged; a plan with room is not."""
    from planner.report.render import memory_verdict

    model, clus = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64), "megatron-core")
    roomy = estimate(model, clus, train, Layout(tp=8, mbs=1, recompute="full"))
    assert roomy.fits and "inside that error" not in memory_verdict(roomy)
    mem = roomy.memory.model_copy(update={"headroom_bytes": 2**27})
    edge = roomy.model_copy(update={"memory": mem})
    assert "the headroom is inside that error" in memory_verdict(edge)


def test_the_validated_alternative_is_not_searched_when_no_regime_of_that_kind_validates():
    """MoE regimes are banded by MoE runs, and none validates: the second search for a validated alternative could
    never succeed, and every MoE plan ran it. It runs only where some regime of the model's kind validates."""
    from planner.api import _can_validate

    stack = hp.load_stack("megatron-core")
    assert _can_validate(stack, hp.load_model("llama3-70b"))  # hopper/zero1-2/>512 validates
    assert not _can_validate(stack, hp.load_model("mixtral-8x7b"))
    assert not _can_validate(stack.model_copy(update={"held_out": {}}), hp.load_model("llama3-70b"))


def test_torchtitan_fp8_is_priced_as_torchtitan_running_it_not_as_a_run_it_cannot_make():
    """torchtitan trains FP8 (a float8 model converter; the torchtitan stack was fitted on such runs); only parplan's
    torchtitan files cannot say so. The warning says that, not that torchtitan cannot run the layout."""
    result = runner.invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "16",
                                 "--seq-len", "8192", "--precision", "fp8", "--stack", "torchtitan",
                                 "--layout", "dp=8,zero=3,mbs=2,recompute=selective"])
    assert result.exit_code in (0, 1)
    assert "cannot run this layout" not in result.stderr
    assert "export cannot write it" in result.stderr
