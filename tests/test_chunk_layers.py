"""Virtual stages of explicit sizes (Layout.chunk_layers): Megatron's --pipeline-model-parallel-layout read as
written, priced over the chunks it names, and written back the same.

Megatron-Bridge's DeepSeek-V3 recipe (deepseek/h100/deepseek_v3.py line 47) runs pp 8 with "Et|(tt|)*30mL":
the embedding and one layer, 30 chunks of two layers, the MTP module and the loss in a chunk of none. Chunk j
of rank r is entry j * pp + r (megatron-core pipeline_parallel_layer_layout.py), so ranks hold 7, 8 x 6 and 6
layers, and rank 0's first chunk holds one layer where an even split (larger chunks first) puts two."""

from __future__ import annotations

import pytest
from helpers import MOE_MEGATRON_SCRIPT

from costmodels.layout import Layout, LayoutError, resolve_layout
from costmodels.params import rank_layer_ranges, stage_layer_mix
from costmodels.pipeline import chunk_excess_layers, rank_chunks
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files.loading import parse_layout
from planner.files.native import load_native_text
from planner.frameworks.megatron.export import stage_args
from planner.search.frameworks import framework_refusals

DSV3_CHUNKS = [1] + [2] * 30 + [0]
DSV3_STAGES = [7, 8, 8, 8, 8, 8, 8, 6]


def test_chunks_are_the_layout_entries_dealt_round_robin():
    """Rank r's chunks are entries r, r + pp, ...: rank 0 holds 1, 2, 2, 2 layers, rank 7 holds 2, 2, 2, 0."""
    sizes = rank_chunks(DSV3_STAGES, 4, DSV3_CHUNKS)
    assert sizes[0] == [1, 2, 2, 2] and sizes[7] == [2, 2, 2, 0] and [sum(s) for s in sizes] == DSV3_STAGES
    assert rank_chunks(DSV3_STAGES, 4)[0] == [2, 2, 2, 1]  # the even split, larger chunks first
    assert [r.start for r in rank_layer_ranges(DSV3_STAGES, 1, 4, DSV3_CHUNKS)] == [1, 17, 33, 49]


def test_a_dense_prefix_lands_where_the_layout_puts_it():
    """DeepSeek-V3's three dense layers: layer 0 on rank 0 and layers 1-2 on rank 1 as the layout writes them;
    the even split would put two on rank 0 and one on rank 1."""
    from costmodels.model_spec import ModelSpec  # noqa: PLC0415

    m = ModelSpec(num_layers=61, hidden_size=64, num_attention_heads=4, num_kv_heads=4, vocab_size=100,
                  ffn_hidden_size=128, num_experts=8, top_k=2, moe_ffn_hidden_size=32, first_k_dense_layers=3)
    assert [stage_layer_mix(m, DSV3_STAGES, r, 4, DSV3_CHUNKS)[1] for r in range(3)] == [1, 2, 0]
    assert [stage_layer_mix(m, DSV3_STAGES, r, 4)[1] for r in range(3)] == [2, 1, 0]


def test_the_bubble_follows_the_largest_chunk():
    """A rank's extra bubble is its largest chunk less its even share: chunks 2, 2, 2, 0 of 6 layers exceed
    6 / 4 by 0.5, as 2, 2, 1, 1 do."""
    assert chunk_excess_layers(DSV3_STAGES, 4, DSV3_CHUNKS)[7] == pytest.approx(0.5)
    assert chunk_excess_layers([6, 6], 3, [4, 2, 1, 2, 1, 2])[0] == pytest.approx(2.0)


def _script(layout: str) -> str:
    return MOE_MEGATRON_SCRIPT.format(extra=f"--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout "
                                            f"'{layout}'").replace("--expert-model-parallel-size 8",
                                                                   "--expert-model-parallel-size 4")


def test_megatron_layout_is_read_with_its_chunks_and_written_back():
    """'Et|t*3|t*2|tL' on pp 2 (8 layers): ranks hold 1 + 2 = 3 and 3 + 2 = 5 layers in chunks of 1, 3, 2, 2,
    which the even split (2, 1 and 3, 2) is not; the Megatron export writes the same layout string back. An
    even layout leaves chunk_layers null."""
    prob = load_native_text(_script("Et|t*3|t*2|t*2L"), "megatron", None, "dgx-h100", 2)
    assert (prob.layout.stage_layers, prob.layout.vpp, prob.layout.chunk_layers) == ([3, 5], 2, [1, 3, 2, 2])
    even = load_native_text(_script("Et*2|t*3|t|t*2L"), "megatron", None, "dgx-h100", 2)
    assert (even.layout.stage_layers, even.layout.chunk_layers) == ([3, 5], None)
    from planner.exporters.common import ExportPlan  # noqa: PLC0415

    lay = resolve_layout(prob.model, prob.cluster, prob.train, prob.layout)
    plan = ExportPlan(model=prob.model, cluster=prob.cluster, train=prob.train, layout=lay, peak_bytes=0, step_s=0.0)
    assert stage_args(plan) == [("--pipeline-model-parallel-layout", "Et*1|t*3|t*2|t*2L")]


def test_chunk_layers_checks_and_framework_rules():
    """chunk_layers needs vpp > 1, pp * vpp entries and the stage_layers it sums to; given alone it sets them.
    Only Megatron runs chunks sized so: the other frameworks refuse (search and export alike)."""
    from helpers import cluster, gpt  # noqa: PLC0415

    model, clus, train = gpt(256, 4, layers=8), cluster(8), TrainSpec(global_batch_size=16)
    lay = resolve_layout(model, clus, train, Layout(pp=2, vpp=2, chunk_layers=[1, 3, 2, 2]))
    assert lay.stage_layers == [3, 5]
    for bad, words in (([1, 3, 2], "entries"), ([1, 3, 2, 3], "sums to"), ([-1, 3, 4, 2], "negative")):
        with pytest.raises(LayoutError, match=words):
            resolve_layout(model, clus, train, Layout(pp=2, vpp=2, chunk_layers=bad))
    with pytest.raises(LayoutError, match="gives"):
        resolve_layout(model, clus, train, Layout(pp=2, vpp=2, stage_layers=[4, 4], chunk_layers=[1, 3, 2, 2]))
    with pytest.raises(LayoutError, match="virtual stages"):
        resolve_layout(model, clus, train, Layout(pp=2, chunk_layers=[3, 5]))
    assert not framework_refusals("megatron", lay, train, moe=False)
    assert all(any("chunk_layers" in w for w in framework_refusals(fw, lay, train, moe=False))
               for fw in ("torchtitan", "deepspeed", "fsdp"))
    assert parse_layout("pp=2,vpp=2,chunk_layers=1:3:2:2").chunk_layers == [1, 3, 2, 2]
    from planner.search.stage_split import needs_split  # noqa: PLC0415

    odd = gpt(256, 4, layers=9)  # pp 2 does not divide 9 layers: without chunk_layers the search picks a split
    assert needs_split(odd, Layout(pp=2, vpp=2))
    assert not needs_split(odd, Layout(pp=2, vpp=2, chunk_layers=[1, 3, 2, 3]))
    with pytest.raises(UserError, match="chunk_layers"):
        parse_layout("pp=2,vpp=2,chunk_layers=1:x")
