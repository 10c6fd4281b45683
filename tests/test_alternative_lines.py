"""`plan`'s validated alternative says so when it is the winner's own layout repriced with another stack (Llama 3
70B on 64 H100: the Megatron winner tp4 zero3 and its torchtitan pricing, 16% slower, read as a different plan)."""

from __future__ import annotations

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.train_spec import TrainSpec
from planner.report.render import alternative_lines


def _estimate(stack: str, layout: Layout):
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", 1)
    train = hp.resolve_train(TrainSpec(global_batch_size=16, seq_length=4096), stack)
    return estimate(model, cluster, train, resolve_layout(model, cluster, train, layout))


def test_the_same_layout_under_another_stack_is_named_so():
    lay = Layout(tp=1, dp=8, zero=3, mbs=1)
    win = _estimate("megatron-core", lay)
    win = win.model_copy(update={"uncertainty": win.uncertainty.model_copy(update={"validated": False})})
    same = _estimate("torchtitan", lay)
    lines = alternative_lines(win, same)
    assert "(the winner's own layout, as stack torchtitan runs it)" in lines[1]
    other = _estimate("torchtitan", Layout(tp=2, sp=True, dp=4, zero=3, mbs=1))
    assert "winner's own layout" not in alternative_lines(win, other)[1]
