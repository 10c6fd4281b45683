"""A winner whose headroom is inside the memory model's held-out error names the fastest shown layout that leaves
more (planner.search.explain._safer). Found by a new-user pass: `plan llama2-70b --cluster dgx-h100 --nodes 8
--global-batch 1024 --framework megatron` won tp2 pp8 at 0.2 GiB of headroom, "may not fit", while tp4 pp4 vpp7,
0.9% slower, leaves about 10 GiB; nothing pointed at it."""

from __future__ import annotations

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.search.explain import _safer, inside_error

MODEL = hp.load_model("llama2-70b")
CLUSTER = hp.load_cluster("dgx-h100", num_nodes=8)
TRAIN = hp.resolve_train(TrainSpec(global_batch_size=1024, seq_length=4096), "megatron-core")
EDGE = Layout(tp=2, pp=8, dp=4, sp=True, zero=1, mbs=1, recompute="none",
              stage_layers=[8, 9, 10, 10, 11, 11, 11, 10])
ROOMY = Layout(tp=4, pp=4, dp=4, vpp=7, sp=True, zero=1, mbs=1, recompute="none")


def test_the_safer_layout_is_named_when_the_winner_sits_inside_the_error():
    edge, roomy = estimate(MODEL, CLUSTER, TRAIN, EDGE), estimate(MODEL, CLUSTER, TRAIN, ROOMY)
    assert inside_error(edge.memory) and not inside_error(roomy.memory)
    [line] = _safer([edge, roomy])
    assert line.startswith("safer: tp=4 sp=1 pp=4 dp=4 vpp=7") and "outside the memory model's held-out error" in line


def test_nothing_is_said_when_the_winner_has_room():
    roomy = estimate(MODEL, CLUSTER, TRAIN, ROOMY)
    assert _safer([roomy, roomy]) == []


def test_a_winner_alone_at_the_edge_says_so():
    edge = estimate(MODEL, CLUSTER, TRAIN, EDGE)
    [line] = _safer([edge])
    assert "inside the memory model's held-out error" in line and "--top" in line
