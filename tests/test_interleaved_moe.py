"""Dense and MoE layers interleaved (ModelSpec.moe_layer_period / moe_layer_offset; issue 35 part 3):
the model counts, the per-stage mix the memory and time models read, the CP-SAT split against brute force,
and the readers and writers (Megatron-Core --moe-layer-freq, Megatron-DeepSpeed's DeepSpeed-MoE flags).

Published shapes: DeepSpeed-MoE's 1.3B+MoE-128 (DeepSpeed blog 2021-12-09, Table 2: 24 layers, hidden 2048,
128 experts top-1 on every other FFN layer, "52B" parameters); Megatron-Core's --moe-layer-freq N puts
experts on layers 0, N, 2N, ... (gpt_layer_specs.py: i % N == 0)."""

from __future__ import annotations

import pytest
from helpers import cluster
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.model_spec import ModelSpec, moe_layer_fields
from costmodels.params import active_params, rank_layer_ranges, stage_layer_mix, total_params
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files.native import load_native_text
from planner.frameworks.megatron import layer_freq
from planner.search import cpsat
from planner.search.cpsat_stages import StageGroup
from planner.search.brute import brute_force
from planner.search.costing import Coster
from planner.search.space import SpaceOptions, enumerate_layouts
from planner.search.tables import stage_counts

TINY = dict(num_layers=2, hidden_size=8, num_attention_heads=4, num_kv_heads=2, vocab_size=10, ffn_hidden_size=12,
            activation="swiglu", norm="rmsnorm", linear_bias=False, position_embedding="rope",
            tied_embeddings=False, num_experts=4, top_k=2, moe_ffn_hidden_size=6)


def _tiny(**kw) -> ModelSpec:
    return ModelSpec(**{**TINY, **kw})


def test_every_other_layer_by_hand():
    """tests/test_params_golden.py's two-layer model, whose layer 1 is MoE behind one dense layer (1480
    parameters), is the same model when layer 1 is MoE by period 2, offset 1; with offset 0 layer 0 is MoE:
    the same count again (one dense, one MoE layer), and layer 1 is dense."""
    prefix = _tiny(first_k_dense_layers=1)
    odd, even = _tiny(moe_layer_period=2, moe_layer_offset=1), _tiny(moe_layer_period=2)
    assert total_params(odd) == total_params(even) == total_params(prefix) == 1480
    assert active_params(odd) == 1192
    assert [odd.is_moe_layer(i) for i in (0, 1)] == [False, True]
    assert [even.is_moe_layer(i) for i in (0, 1)] == [True, False]


@pytest.mark.parametrize("layers, k, period, offset", [(24, 0, 2, 1), (24, 0, 2, 0), (13, 2, 3, 1), (9, 4, 4, 3),
                                                       (61, 3, 1, 0)])
def test_counts_agree_with_the_layer_rule(layers, k, period, offset):
    m = _tiny(num_layers=layers, first_k_dense_layers=k, moe_layer_period=period, moe_layer_offset=offset)
    rule = [i >= k and i % period == offset for i in range(layers)]
    assert m.num_moe_layers == sum(rule)
    for start in range(layers + 1):
        for stop in range(start, layers + 1):
            assert m.moe_layers_in(start, stop) == sum(rule[start:stop])
    stages = [layers // 3, layers // 3, layers - 2 * (layers // 3)]
    mix = [stage_layer_mix(m, stages, s) for s in range(3)]
    assert [(d, e) for e, d in mix] == stage_counts(m, stages)
    assert sum(e for e, _ in mix) == m.num_moe_layers


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(2, 40), k=st.integers(0, 6), period=st.integers(1, 6), data=st.data())
def test_moe_layer_fields_inverts_the_layer_rule(layers, k, period, data):
    """costmodels.model_spec.moe_layer_fields, the one inverse the readers use: the fields it finds for a model's
    per-layer list give that same list back."""
    offset = data.draw(st.integers(0, period - 1))
    pattern = [i >= k and i % period == offset for i in range(layers)]
    found = moe_layer_fields(pattern)
    if not any(pattern):
        assert found is None
        return
    m = _tiny(num_layers=layers, **found)
    assert [m.is_moe_layer(i) for i in range(layers)] == pattern and found["moe_layer_period"] <= period
    assert moe_layer_fields([True, True, False, True]) is None


def test_interleave_is_validated_naming_the_fields():
    with pytest.raises(ValueError, match="moe_layer_offset=2 must be below moe_layer_period=2"):
        _tiny(moe_layer_period=2, moe_layer_offset=2)
    with pytest.raises(ValueError, match="leave no MoE layer"):
        _tiny(num_layers=3, first_k_dense_layers=1, moe_layer_period=3, moe_layer_offset=0)
    with pytest.raises(ValueError, match="moe_layer_period=2 need num_experts > 0"):
        ModelSpec(**{**TINY, "num_experts": 0, "top_k": 0, "moe_ffn_hidden_size": None, "moe_layer_period": 2})


def test_deepspeed_moe_1p3b_128_is_52b():
    """The blog's 1.3B+MoE-128: 12 MoE layers of 128 experts 8192 wide, "52B" in all; with every layer MoE it
    came to 103.6 B."""
    base = {**hp.load_model("gpt3-175b").model_dump(), "num_layers": 24, "hidden_size": 2048,
            "num_attention_heads": 16, "num_kv_heads": 16, "head_dim": 128, "vocab_size": 50304,
            "ffn_hidden_size": 8192, "seq_length": 2048}
    m = ModelSpec(**{**base, "num_experts": 128, "top_k": 1, "moe_ffn_hidden_size": 8192,
                     "moe_layer_period": 2, "moe_layer_offset": 1})
    assert m.num_moe_layers == 12
    assert total_params(m) == pytest.approx(52.5e9, rel=0.01)


@pytest.mark.parametrize("period, offset, k, hbm_gib", [(2, 1, 0, 8.0), (3, 0, 2, 0.35)])
def test_cpsat_split_equals_brute_force_on_interleaved_layers(period, offset, k, hbm_gib):
    """The CP-SAT model counts a stage's MoE layers by a table lookup; its optimum equals the
    brute-force enumeration over every split (planner.search.brute), with memory ample and binding."""
    m = _tiny(num_layers=9, hidden_size=256, num_attention_heads=4, num_kv_heads=4, vocab_size=4096,
              ffn_hidden_size=256, moe_ffn_hidden_size=1024, seq_length=512, first_k_dense_layers=k,
              moe_layer_period=period, moe_layer_offset=offset)
    clus = cluster(8, per_node=8, gpu=hp.load_gpu("h100-sxm").model_copy(update={"hbm_gib": hbm_gib}), memory_reserve_gib=0.0)
    train = TrainSpec(global_batch_size=16)
    opts = SpaceOptions(zero_stages=(0, 1), recompute=("none",), max_mbs=2, max_vpp=2, max_cp=1)
    coster = Coster(m, clus, train)
    tables = [coster.table(lay) for lay in enumerate_layouts(m, clus, train, opts)]
    pipelined = [t for t in tables if t.layout.pp > 1]  # the split is the search's: where the count matters
    for among in (tables, pipelined, [t for t in pipelined if t.layout.vpp > 1]):
        oracle = brute_force(m, among)
        sol = cpsat.solve(m, among, time_limit_s=30)
        assert (sol is None) == (oracle is None)
        if sol is not None:
            assert sol.optimal and sol.objective == oracle[0]
            assert sol.table.objective(stage_counts(m, sol.stage_layers, sol.table.layout.vpp)) == sol.objective


@pytest.mark.parametrize("period, offset, k", [(2, 1, 0), (3, 1, 2)])
@pytest.mark.parametrize("relax", [False, True])
def test_every_chunked_candidate_is_solved_exactly(period, offset, k, relax, monkeypatch):
    """Interleaved layers over virtual chunks: each candidate's optimum equals the brute-force best split, whose
    stages hold their round-robin chunks (10 layers on 8 GPUs; one candidate per pp and vpp: 2x2, 2x3, 4x2).
    They are settled through a relaxation and cuts (cpsat._relax_and_cut; `relax`), where some period-2
    candidates need a cut: the relaxation's first split was not the exact optimum, or its bound not the split's
    exact objective; or (no relaxed round) by the exact model alone."""
    from planner.search.brute import best_split  # noqa: PLC0415

    monkeypatch.setattr(cpsat, "RELAX_S", 30.0)  # the toy's relaxed solves take 64-173 ms
    if not relax:
        monkeypatch.setattr(cpsat, "RELAX_ROUNDS", 0)

    m = _tiny(num_layers=10, hidden_size=256, num_attention_heads=4, num_kv_heads=4, vocab_size=4096,
              ffn_hidden_size=256, moe_ffn_hidden_size=1024, seq_length=512, first_k_dense_layers=k,
              moe_layer_period=period, moe_layer_offset=offset)
    clus = cluster(8, per_node=8, gpu=hp.load_gpu("h100-sxm"), memory_reserve_gib=0.0)
    train = TrainSpec(global_batch_size=24)
    opts = SpaceOptions(zero_stages=(1,), recompute=("none",), max_mbs=1, max_vpp=3, max_cp=1)
    coster = Coster(m, clus, train)
    chunked = {(lay.pp, lay.vpp): coster.table(lay) for lay in enumerate_layouts(m, clus, train, opts)
               if lay.pp > 1 and lay.vpp > 1}
    assert set(chunked) == {(2, 2), (2, 3), (4, 2)}
    solves = []
    for table in chunked.values():
        oracle, sol = best_split(m, table), cpsat.solve(m, [table], time_limit_s=30, workers=1)  # deterministic
        assert sol.optimal and sol.objective == oracle[0], table.layout
        solves.append(sol.models)
    assert max(solves) == 1 or relax
    assert max(solves) >= 2 or not relax or period == 3  # period 3: every first relaxed split is exact


# ---- readers and writers ---------------------------------------------------------------------------

@pytest.mark.parametrize("freq, layers, fields", [
    ("1", 8, (0, 1, 0)), ("2", 8, (0, 2, 0)), ("([0]*3+[1]*5)", 8, (3, 1, 0)), ("[0,1,0,1,0,1]", 6, (0, 2, 1)),
    ("([1]+[0]*3)*3", 12, (0, 4, 0)), ("[0]*2+([0]*1+[1]*1)*3", 8, (3, 2, 1)), ("[0]*3+([1]+[0])*3", 9, (3, 2, 1))])
def test_moe_layer_freq_is_read_as_megatron_evaluates_it(freq, layers, fields):
    got = layer_freq.read(freq, layers)
    assert (got["first_k_dense_layers"], got["moe_layer_period"], got["moe_layer_offset"]) == fields
    m = _tiny(num_layers=layers, **got)
    assert [int(m.is_moe_layer(i)) for i in range(layers)] == layer_freq.pattern(freq, layers)


@pytest.mark.parametrize("freq, match", [("__import__('os')", "Call is not allowed"), ("[2]*8", "0 or 1"),
                                         ("[1]*7", "7 entries"), ("[1,1,0]*2+[0,1]", "not one"),
                                         ("[1]*10**9", "not allowed"), ("9", "1 to --num-layers"),
                                         ("[0]*8", "no MoE layer"), ("[1]*99999999", "whole number")])
def test_moe_layer_freq_refusals_name_the_flag(freq, match):
    with pytest.raises(UserError, match=match) as err:
        layer_freq.read(freq, 8)
    assert "--moe-layer-freq" in str(err.value)


@pytest.mark.parametrize("k, period, offset", [(0, 1, 0), (3, 1, 0), (0, 2, 0), (0, 2, 1), (1, 3, 2), (2, 2, 0)])
def test_written_moe_layer_freq_reads_back_to_the_same_layers(k, period, offset):
    m = _tiny(num_layers=12, first_k_dense_layers=k, moe_layer_period=period, moe_layer_offset=offset)
    text = layer_freq.write(m)
    back = _tiny(num_layers=12, **layer_freq.read(text or "1", 12))
    assert [back.is_moe_layer(i) for i in range(12)] == [m.is_moe_layer(i) for i in range(12)]
    if (k, period, offset) == (0, 2, 0):
        assert text == "2"  # Megatron's own integer form


MDS_MOE = """deepspeed pretrain_gpt.py --tensor-model-parallel-size 1 --moe-expert-parallel-size 128 \\
  --num-experts 128 --moe-loss-coeff 0.01 --moe-train-capacity-factor 1.0 --moe-min-capacity 4 \\
  --micro-batch-size 4 --global-batch-size 512 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\
  --seq-length 2048 --max-position-embeddings 2048 --fp16 --vocab-file gpt2-vocab.json \\
  --merge-file gpt2-merges.txt --create-moe-param-group {extra} --deepspeed --deepspeed_config ds.json \\
  --pipeline-model-parallel-size 1 --no-pipeline-parallel
"""


def _mds(extra: str = ""):
    return load_native_text(MDS_MOE.format(extra=extra), "megatron", None, "dgx-a100", 16)


def test_megatron_deepspeed_moe_script_is_read_as_deepspeed_moe_runs_it():
    """Microsoft Megatron-DeepSpeed's ds_pretrain_gpt_1.3B_MoE128.sh, as published: the run the DeepSpeed-MoE
    blog reports on 128 A100. It was read with Megatron-LM's names only: ep 1 (no --expert-model-parallel-size),
    top-2, every layer MoE, so 103.6 B parameters, 193 GB of weights per GPU and "does not fit", plus a warning
    that the router was unbalanced (--moe-aux-loss-coeff absent) although --moe-loss-coeff 0.01 balances it."""
    p = _mds()
    m = p.model
    assert (m.num_experts, m.top_k, m.moe_layer_period, m.moe_layer_offset, m.num_moe_layers) == (128, 1, 2, 1, 12)
    assert m.moe_ffn_hidden_size == 8192 and m.capacity_factor == 1.0 and m.num_shared_experts == 0
    assert p.layout.ep == 128 and p.train.moe_load_balancing == "aux_loss"
    assert total_params(m) == pytest.approx(52.5e9, rel=0.01)
    assert not any("aux-loss" in w for w in p.warnings)
    from costmodels.estimate import estimate  # noqa: PLC0415

    assert estimate(p.model, p.cluster, p.train, p.layout).fits


def test_megatron_deepspeed_moe_options():
    m = _mds("--topk 2 --expert-interval 1 --mlp-type residual --disable-moe-token-dropping").model
    assert (m.top_k, m.num_moe_layers, m.num_shared_experts, m.capacity_factor) == (2, 24, 1, None)
    assert _mds("--moe-loss-coeff 0").train.moe_load_balancing == "none"
    with pytest.raises(UserError, match="--mlp-type 'dense'"):
        _mds("--mlp-type dense")
    dense = load_native_text(MDS_MOE.replace("--num-experts 128", "--num-experts 1").format(extra=""),
                             "megatron", None, "dgx-a100", 16)
    assert not dense.model.is_moe and dense.layout.ep == 1  # DeepSpeed ignores the EP size of a dense model
    with pytest.raises(UserError, match="--num-experts '1e3'"):
        load_native_text(MDS_MOE.replace("--num-experts 128", "--num-experts 1e3").format(extra=""),
                         "megatron", None, "dgx-a100", 16)
    with pytest.raises(UserError, match="one expert count"):
        load_native_text(MDS_MOE.replace("--num-experts 128", "--num-experts 64 128").format(extra=""),
                         "megatron", None, "dgx-a100", 16)


@pytest.mark.parametrize("period, offset, k", [(2, 1, 0), (2, 0, 0), (3, 2, 1), (3, 0, 2), (4, 1, 5), (1, 0, 3)])
@pytest.mark.parametrize("pp, vpp", [(1, 1), (2, 1), (3, 1), (2, 2), (2, 3), (3, 2)])
def test_cpsat_stage_mix_equals_the_layer_rule_for_every_split(period, offset, k, pp, vpp):
    """Fix the CP-SAT model's stage sizes to each split in turn: the (dense, MoE) counts its constraints
    give for vpp virtual chunks are those of ModelSpec.moe_layers_in over each rank's round-robin chunks
    (tables.stage_counts). A contiguous count fails here for vpp > 1."""
    from ortools.sat.python import cp_model  # noqa: PLC0415

    from planner.search.brute import splits  # noqa: PLC0415

    m = _tiny(num_layers=10, first_k_dense_layers=k, moe_layer_period=period, moe_layer_offset=offset)
    for split in splits(10, pp, vpp):
        model = cp_model.CpModel()
        group = StageGroup(model, m, pp, {"T": 1, "D": 1, "O": 1, "E": 1})
        for n, size in zip(group.n, split):
            model.Add(n == size)
        dense, moe = group.mix(model, vpp)
        solver = cp_model.CpSolver()
        assert solver.Solve(model) == cp_model.OPTIMAL
        value = lambda e: e if isinstance(e, int) else solver.Value(e)  # noqa: E731
        assert [(value(d), value(e)) for d, e in zip(dense, moe)] == stage_counts(m, split, vpp), split


def test_virtual_chunks_are_dealt_round_robin():
    """Llama 4 Maverick's rule (MoE on odd layers) on pp 4 with 4 chunks of 3 layers per rank: chunk j of rank r
    is the model's (4j + r)-th, starting at layer 3(4j + r). Rank 0's chunks start on even layers and hold one
    MoE layer each (4 in all), rank 1's start on odd layers and hold two (8): 4, 8, 4, 8, where one contiguous
    range per rank would give 6 each. Without chunks the count is the contiguous one."""
    m = _tiny(num_layers=48, moe_layer_period=2, moe_layer_offset=1)
    stages = [12] * 4
    assert [r.start for r in rank_layer_ranges(stages, 1, 4)] == [3, 15, 27, 39]
    assert [stage_layer_mix(m, stages, r, 4)[0] for r in range(4)] == [4, 8, 4, 8]
    assert [stage_layer_mix(m, stages, r, 1)[0] for r in range(4)] == [6, 6, 6, 6]
    assert [stage_layer_mix(m, stages, r, 2)[0] for r in range(4)] == [6, 6, 6, 6]  # chunks of 6: even


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(4, 40), k=st.integers(0, 6), period=st.integers(1, 4), pp=st.integers(1, 4),
       vpp=st.integers(1, 4), seed=st.integers(0, 10**6))
def test_all_ranks_at_once_equal_each_rank(layers, k, period, pp, vpp, seed):
    """rank_moe_layers (every rank in one walk, what the search calls per split) equals stage_layer_mix rank by
    rank, for any dense prefix, period and offset, and any split of at least vpp layers per rank."""
    import random  # noqa: PLC0415

    from costmodels.params import rank_moe_layers  # noqa: PLC0415

    rng = random.Random(seed)
    offsets = sorted({i % period for i in range(min(k, layers - 1), layers)})
    if layers < pp * vpp or k >= layers:
        return
    m = _tiny(num_layers=layers, first_k_dense_layers=k, moe_layer_period=period, moe_layer_offset=rng.choice(offsets))
    cuts = sorted(rng.sample(range(1, layers - pp * (vpp - 1)), pp - 1))
    stages = [b - a + vpp - 1 for a, b in zip([0, *cuts], [*cuts, layers - pp * (vpp - 1)])]
    assert sum(stages) == layers and min(stages) >= vpp
    assert rank_moe_layers(m, stages, vpp) == [stage_layer_mix(m, stages, r, vpp)[0] for r in range(pp)]


@pytest.mark.parametrize("stages, vpp", [([12] * 4, 4), ([7, 8, 8, 6], 2), ([5, 4, 4], 3), ([3, 9], 2)])
def test_round_robin_ranges_are_the_megatron_layout_the_exporter_writes(stages, vpp):
    """The --pipeline-model-parallel-layout the Megatron exporter writes (entry j * pp + r is chunk j of rank r,
    megatron-core pipeline_parallel_layer_layout.py) puts exactly rank_layer_ranges' layers on each rank."""
    from planner.frameworks.megatron.export import layout_string  # noqa: PLC0415

    entries = layout_string(stages, vpp).replace("E", "").replace("L", "").replace("m", "").split("|")
    pp, owner, layer = len(stages), [], 0
    for index, entry in enumerate(entries):
        count = sum(int(part.split("*")[1]) if "*" in part else 1 for part in entry.split(",") if part)
        owner += [index % pp] * count
        layer += count
    assert layer == sum(stages)
    for r in range(pp):
        assert [i for i in range(layer) if owner[i] == r] == [i for rg in rank_layer_ranges(stages, r, vpp) for i in rg]


# ---- Llama 4 -----------------------------------------------------------------------------------------

LLAMA4_TEXT = dict(model_type="llama4_text", num_hidden_layers=48, hidden_size=5120, num_attention_heads=40,
                   num_key_value_heads=8, head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384,
                   num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1, vocab_size=202048,
                   tie_word_embeddings=False, max_position_embeddings=10485760, attention_bias=False,
                   attention_chunk_size=8192, use_qk_norm=True)
MAVERICK = {**LLAMA4_TEXT, "num_local_experts": 128, "interleave_moe_layer_step": 2,
            "max_position_embeddings": 1048576, "use_qk_norm": False}


@pytest.mark.parametrize("preset, text, total_b", [("llama4-scout", LLAMA4_TEXT, 107.77),
                                                   ("llama4-maverick", MAVERICK, 400.71)])
def test_llama4_presets_are_their_published_configs(preset, text, total_b):
    """Meta's 'The Llama 4 herd' (2025-04-05): 17B active each; 109B total for Scout (its language model here:
    107.8 B; the vision encoder is not modelled) and 400B for Maverick, whose 128-expert layers alternate with
    dense ones (interleave_moe_layer_step 2: layers 1, 3, ..., 47). The Hugging Face config (nested under
    text_config) maps to the preset field for field."""
    from planner.files.hf_config import model_from_hf_config  # noqa: PLC0415

    spec = hp.load_model(preset)
    assert total_params(spec) / 1e9 == pytest.approx(total_b, abs=0.01)
    assert active_params(spec) / 1e9 == pytest.approx(17.2, abs=0.05)
    hf = model_from_hf_config({"model_type": "llama4", "text_config": text, "vision_config": {}}, name=preset,
                              seq_length=8192)
    chunked = {"sliding_window", "full_attention_interval"}  # attention_chunk_size 8192: a window of C/2 (hf_llama4)
    assert hf.model_dump(exclude=chunked) == spec.model_dump(exclude=chunked)
    assert (hf.sliding_window, hf.full_attention_interval) == (4096, 4)
    with pytest.raises(ValueError, match="moe_layers"):
        model_from_hf_config({**MAVERICK, "moe_layers": [0, 2]})
    with pytest.raises(ValueError, match="text_config"):
        model_from_hf_config({"model_type": "llama4"})


def test_deepseek_moe_layer_freq_interleaves():
    """DeepSeek-V2's modeling code: MoE where layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq
    == 0. Any frequency but 1 was refused."""
    from planner.files.hf_config import model_from_hf_config  # noqa: PLC0415

    v3 = hp.load_model("deepseek-v3")
    config = {"model_type": "deepseek_v3", "num_hidden_layers": 8, "hidden_size": 1024, "num_attention_heads": 8,
              "intermediate_size": 2048, "vocab_size": 1000, "n_routed_experts": 8, "num_experts_per_tok": 2,
              "moe_intermediate_size": 256, "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 2,
              "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
              "v_head_dim": 32}
    m = model_from_hf_config(config)
    assert [m.is_moe_layer(i) for i in range(8)] == [False, False, True, False, True, False, True, False]
    assert v3.moe_layer_period == 1


def test_a_huge_layer_count_is_refused_before_anything_is_built_per_layer():
    """--num-layers 10^12 with --moe-layer-freq 2, or a config.json with 10^12 layers and a window, hung while
    the layer patterns were built; both are refused by the layer count (ModelSpec's MAX_LAYERS) first."""
    from planner.files.hf_config import model_from_hf_config  # noqa: PLC0415

    script = ("torchrun pretrain_gpt.py --num-layers 1000000000000 --hidden-size 1024 --num-attention-heads 8 "
              "--seq-length 1024 --vocab-size 32000 --micro-batch-size 1 --global-batch-size 8 --bf16 "
              "--num-experts 8 --moe-layer-freq 2")
    with pytest.raises(UserError, match="--num-layers 1000000000000: expected 1 to 10000"):
        load_native_text(script, "megatron", None, "dgx-h100", None)
    with pytest.raises(ValueError, match="num_hidden_layers' must be 1 to 10000"):
        model_from_hf_config({**MAVERICK, "num_hidden_layers": 10**12})
