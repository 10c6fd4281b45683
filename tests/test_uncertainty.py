"""The error band every estimate carries (costmodels.uncertainty): regimes, fallbacks, validation."""

from __future__ import annotations

from helpers import cluster, gpt
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.stack import RegimeError
from costmodels.train_spec import TrainSpec
from costmodels.uncertainty import regime_key, scale_class, sharding_class, uncertainty

CONTRACT_KEYS = {"rel_error_p50", "rel_error_p90", "bias", "rows", "regime", "validated"}


def _err(rows: int, mean: float) -> RegimeError:
    return RegimeError(rows=rows, mean=mean, p50=mean * 0.8, p90=mean * 2, bias=-mean / 2)


def test_regime_classes():
    """Sharding classes from the layout, scale classes at 64 and 512 GPUs."""
    assert [scale_class(n) for n in (8, 64, 65, 512, 513)] == ["<=64", "<=64", "<=512", "<=512", ">512"]
    lay = Layout(zero=3, dp=16, shard_group=8)
    assert sharding_class(Layout(zero=0)) == "ddp" and sharding_class(Layout(zero=2)) == "zero1-2"
    assert sharding_class(Layout(zero=3, dp=16)) == "zero3" and sharding_class(lay) == "hsdp"
    assert regime_key("megatron-core", lay, 128) == "megatron-core/hsdp/<=512"


def test_validated_needs_five_rows_and_a_small_error():
    """>= 5 held-out rows and mean <= 15% in the regime itself; fallbacks are never validated."""
    base = hp.load_stack("megatron-core")
    lay = Layout(zero=1, dp=8)
    cases = [({"zero1-2/<=64": _err(5, 0.10)}, True), ({"zero1-2/<=64": _err(4, 0.05)}, False),
             ({"zero1-2/<=64": _err(9, 0.16)}, False), ({"zero1-2/*": _err(50, 0.05)}, False)]
    for held, expected in cases:
        band = uncertainty(base.model_copy(update={"held_out": held}), lay, 8)
        assert band.validated is expected, held


def test_fallback_chain_and_no_rows():
    """No rows in the regime: the stack's same-sharding rows, then all of its rows, then every stack's."""
    base = hp.load_stack("megatron-core")
    lay = Layout(zero=1, dp=8)
    chain = {"zero1-2/*": _err(7, 0.2), "*/*": _err(30, 0.1), "all-stacks": _err(300, 0.09)}
    assert uncertainty(base.model_copy(update={"held_out": chain}), lay, 8).rows == 7
    del chain["zero1-2/*"]
    assert uncertainty(base.model_copy(update={"held_out": chain}), lay, 8).basis == "stack, any regime"
    empty = uncertainty(base.model_copy(update={"held_out": {}}), lay, 8)
    assert empty.rows == 0 and empty.rel_error_p50 is None and not empty.validated


def test_every_estimate_carries_a_band():
    """Estimates on the shipped stacks carry the contract keys and a band backed by held-out rows."""
    model, clus = gpt(2048, 16, 4, seq=1024), cluster(8)
    for stack in hp.list_stacks():
        train = hp.resolve_train(TrainSpec(global_batch_size=8), stack)
        band = estimate(model, clus, train, Layout(dp=8)).uncertainty
        assert CONTRACT_KEYS <= set(band.model_dump()), stack
        assert band.rows > 0 and band.rel_error_p50 is not None, stack


def test_regime_key_carries_the_gpu_generation():
    """An A100 layout is an ampere regime and an H100 one a hopper regime (issue 35: the key had no GPU, so
    A100 estimates borrowed H100 Megatron-Core bands)."""
    from costmodels.uncertainty import gpu_generation

    lay = Layout(zero=1, dp=8)
    assert [gpu_generation(g) for g in ("a100-80gb", "h100-sxm-500w", "h200", "h800", "b200", "v100-sxm3-32gb")] == \
        ["ampere", "hopper", "hopper", "hopper", "blackwell", "volta"]
    assert regime_key("megatron-core", lay, 8, "a100-80gb") == "megatron-core/zero1-2/<=64/ampere"


def test_a_generation_without_rows_takes_the_leave_one_generation_out_band():
    """Hopper rows never band an A100 layout: with no ampere rows in the stack the band is the one that
    leaving a whole GPU generation out earned, and says so; with ampere rows, they band it."""
    base = hp.load_stack("megatron-core")
    lay = Layout(zero=1, dp=8)
    held = {"hopper/zero1-2/<=64": _err(9, 0.03), "hopper/*/*": _err(9, 0.03), "zero1-2/<=64": _err(9, 0.03),
            "loro:gpu-generation": _err(40, 0.2)}
    a100 = uncertainty(base.model_copy(update={"held_out": held}), lay, 8, "a100-80gb")
    assert a100.rows == 40 and "GPU generation left out" in a100.basis and not a100.validated
    assert a100.regime == "megatron-core/zero1-2/<=64/ampere"
    h100 = uncertainty(base.model_copy(update={"held_out": held}), lay, 8, "h100-sxm")
    assert h100.rows == 9 and h100.basis == "regime" and h100.validated
    held["ampere/zero1-2/*"] = _err(6, 0.05)
    a100 = uncertainty(base.model_copy(update={"held_out": held}), lay, 8, "a100-80gb")
    assert a100.rows == 6 and a100.basis.startswith("same GPU generation")


def test_validated_only_asks_the_band_of_the_plans_own_gpu_generation():
    """plan --validated-only keeps a layout when its regime is validated on the cluster's GPU generation
    (the regime key ends in it): the filter's answer is the band of that generation, which for Megatron-Core
    ZeRO-1 on more than 512 GPUs differs between generations (validated on Hopper only: its 5 runs are H100
    runs), so a filter that dropped the GPU would fail here."""
    import hardware_profiles as hp
    from costmodels.layout import Layout
    from costmodels.uncertainty import uncertainty
    from planner.search.engine import validated_filter

    stack, lay = hp.load_stack("megatron-core"), Layout(tp=8, pp=1, dp=128, zero=1, mbs=1)
    answers = {gpu: uncertainty(stack, lay, 1024, gpu).validated for gpu in ("h100-sxm", "a100-80gb", "b200")}
    for gpu, want in answers.items():
        assert validated_filter(stack, 1024, gpu)(lay) is want, gpu
    assert len(set(answers.values())) == 2  # the generations disagree: the GPU decides


def test_an_moe_model_is_banded_by_moe_rows_and_a_dense_one_by_dense_rows():
    """Issue 35: a DeepSeek-V3 estimate on 256 H100 printed the 5% band of the dense GPT rows beside it, and the
    dense Llama estimates on 8-64 H100 carried the 36% band that two MoE recipes' -30% and -34% gave their regime.
    MoE regimes end in '/moe' and read the 'moe:' entries only (then every stack's MoE rows), dense ones never do."""
    base = hp.load_stack("megatron-core")
    lay = Layout(zero=1, dp=8)
    held = {"hopper/zero1-2/<=64": _err(9, 0.03), "hopper/*/*": _err(9, 0.03), "*/*": _err(9, 0.03),
            "all-stacks": _err(90, 0.05), "moe:hopper/zero1-2/*": _err(6, 0.3), "all-stacks:moe": _err(14, 0.2)}
    stack = base.model_copy(update={"held_out": held})
    dense, moe = uncertainty(stack, lay, 256, "h100-sxm"), uncertainty(stack, lay, 256, "h100-sxm", moe=True)
    assert dense.rows == 9 and dense.regime == "megatron-core/zero1-2/<=512/hopper"
    assert moe.rows == 6 and moe.regime == "megatron-core/zero1-2/<=512/hopper/moe" and not moe.validated
    assert moe.basis.startswith("MoE rows of the same GPU generation")
    blackwell = uncertainty(stack, lay, 8, "b200", moe=True)  # no MoE rows of its own generation or stack
    assert blackwell.rows == 14 and blackwell.basis == "every stack's MoE held-out rows"
    held["moe:hopper/zero1-2/<=64"] = _err(5, 0.1)
    assert uncertainty(stack.model_copy(update={"held_out": held}), lay, 8, "h100-sxm", moe=True).validated


def test_a_table_without_moe_rows_bands_an_moe_model_from_dense_rows_and_says_so():
    """A user's stack file written before MoE regimes: the dense band, with the basis naming the borrowing."""
    base = hp.load_stack("megatron-core")
    stack = base.model_copy(update={"held_out": {"hopper/zero1-2/<=64": _err(9, 0.03)}})
    band = uncertainty(stack, Layout(zero=1, dp=8), 8, "h100-sxm", moe=True)
    assert band.rows == 9 and "no MoE held-out rows" in band.basis and not band.validated


@settings(max_examples=60, deadline=None)
@given(stack=st.sampled_from(["megatron-core", "torchtitan", "deepspeed"]), zero=st.integers(0, 3),
       gpus=st.sampled_from([8, 64, 256, 1024]), gpu=st.sampled_from([None, "a100-80gb", "h100-sxm", "b200"]),
       moe=st.booleans())
def test_parse_regime_inverts_regime_key(stack, zero, gpus, gpu, moe):
    """The band tables and leave-one-regime-out folds read a regime back into its parts."""
    from costmodels.uncertainty import gpu_generation, parse_regime

    lay = Layout(zero=zero, dp=gpus)
    parts = parse_regime(regime_key(stack, lay, gpus, gpu, moe))
    assert parts == (stack, sharding_class(lay), scale_class(gpus), gpu_generation(gpu) if gpu else None, moe)


def test_shipped_bands_keep_moe_and_dense_samples_apart():
    """The shipped Megatron-Core table: its MoE entries hold the MoE samples (the Megatron-Bridge MoE recipes,
    validation and leave-one-regime-out), and its dense entries none of them: the dense Hopper regime's p90 band
    is under half the MoE samples' median |error|."""
    held = hp.load_stack("megatron-core").held_out
    assert [k for k in held if k.startswith("moe:")] and "all-stacks:moe" in held
    assert held["hopper/zero1-2/<=64"].p90 < held["moe:*/*"].p50 / 2
    assert held["moe:hopper/zero1-2/<=64"].p90 >= 0.3  # the MoE recipes err by -30% and -34%


def test_a_run_predicted_by_several_refits_counts_once():
    """A regime's `rows` are distinct published runs; `samples` the errors behind its quantiles. Three runs,
    each predicted by the shipped profiles and by two leave-one-regime-out refits, are 3 runs and 9 samples:
    not the 5 runs a validated regime needs (counted per prediction, 9 would have validated it)."""
    from benchmarks.uncertainty_table import held_out_by_stack

    def summary(errs):
        a = sorted(abs(e) for e in errs)
        return {"n": len(a), "mean": sum(a) / len(a), "median": a[len(a) // 2], "bias": 0.0}
    regime = "megatron-core/zero1-2/<=64/hopper"
    samples = [(regime, 0.01 * (run + 1), f"set:{run}") for run in range(3) for _ in range(3)]
    tables, _ = held_out_by_stack(samples, {}, summary)
    entry = RegimeError(**tables["megatron-core"]["hopper/zero1-2/<=64"])
    assert (entry.rows, entry.samples) == (3, 9)
    stack = hp.load_stack("megatron-core").model_copy(update={"held_out": {"hopper/zero1-2/<=64": entry}})
    band = uncertainty(stack, Layout(zero=1, dp=8), 8, "h100-sxm")
    assert band.rows == 3 and band.samples == 9 and not band.validated


def test_a_stack_with_moe_rows_only_bands_a_dense_model_from_every_stacks_dense_rows():
    """NeMo AutoModel's held-out rows are all MoE: a dense model under it takes every stack's dense rows and says
    so, rather than its MoE band or the band of a GPU generation left out (which its Hopper rows are not)."""
    held = {"moe:hopper/zero3/<=64": _err(4, 0.06), "moe:*/*": _err(4, 0.06), "all-stacks": _err(1400, 0.08),
            "all-stacks:moe": _err(6, 0.18), "loro:gpu-generation": _err(1400, 0.08 * 1.1)}
    stack = hp.load_stack("automodel").model_copy(update={"held_out": held})
    dense = uncertainty(stack, Layout(zero=3, dp=8), 8, "h100-sxm")
    assert dense.rows == 1400 and "no dense held-out rows" in dense.basis and not dense.validated
    assert uncertainty(stack, Layout(zero=3, dp=8), 8, "h100-sxm", moe=True).rows == 4


def test_an_estimate_beyond_its_regimes_runs_is_never_validated():
    """A held_out entry records the longest sequence among its runs (seq_max); an estimate at a longer one is
    extrapolated: the band is still the regime's, but it is not validated and says why. Before, a 1M-token
    Llama 3 70B plan on 8,192 H100 printed a validated +-3% from runs of 2k-4k tokens."""
    from costmodels.uncertainty import extrapolation

    base = hp.load_stack("megatron-core")
    lay = Layout(zero=1, dp=8)
    entry = RegimeError(rows=9, mean=0.03, p50=0.02, p90=0.06, bias=0.0, seq_max=4096)
    stack = base.model_copy(update={"held_out": {"hopper/zero1-2/<=64": entry}})
    inside = uncertainty(stack, lay, 8, "h100-sxm", seq_len=4096)
    beyond = uncertainty(stack, lay, 8, "h100-sxm", seq_len=1_048_576)
    assert inside.validated and inside.extrapolated is None
    assert not beyond.validated and beyond.rel_error_p90 == inside.rel_error_p90
    assert beyond.extrapolated == "sequence 1,048,576 tokens, beyond the longest of these runs (4,096)"
    assert extrapolation(entry.model_copy(update={"seq_max": None}), 10**6) is None  # an entry that did not record it


def test_shipped_bands_record_how_far_their_runs_reach():
    held = hp.load_stack("megatron-core").held_out
    assert held["hopper/zero1-2/>512"].seq_max == 4096  # the Megatron-LM README rows (MG-*), 4k tokens
    assert all(e.seq_max for e in held.values())


def test_a_stack_without_rows_of_its_own_still_names_the_gpu_generation():
    """fsdp has no held-out rows of its own (its band is every stack's): its regime still ends with the GPU
    generation, as every other stack's does; it printed 'fsdp/zero3/<=64' on MI300X and H100 alike."""
    out = uncertainty(hp.load_stack("fsdp"), Layout(dp=8, zero=3), 8, "mi300x")
    assert out.regime == "fsdp/zero3/<=64/cdna3" and not out.validated


def test_a_step_the_network_sets_beyond_the_runs_behind_its_band_is_extrapolated():
    """An FSDP 70B step on 2 x 200 Gb/s per node (86% exposed data-parallel traffic) printed the validated +-13% of
    runs whose exposed communication never passed 22% of a step; now it is extrapolated, and says why."""
    from costmodels.uncertainty import COMM_REACH, comm_share, extrapolation  # noqa: PLC0415

    err = RegimeError(rows=13, mean=0.1, p50=0.1, p90=0.16, bias=-0.1, comm_max=0.22)
    assert extrapolation(err, None, 0.22 + COMM_REACH - 0.01) is None
    assert "exposed communication 88% of the step, beyond the largest among these runs (22%)" in \
        extrapolation(err, None, 0.88)
    assert extrapolation(err.model_copy(update={"comm_max": None}), None, 0.88) is None  # not recorded: no claim
    model, train = hp.load_model("llama3-70b"), hp.resolve_train(TrainSpec(global_batch_size=64), "torchtitan")
    lay = Layout(tp=8, sp=True, dp=8, zero=3, recompute="full")
    fast, slow = (hp.load_cluster("dgx-h100", 8).model_copy(update={"scale_out_gb_per_s": g}) for g in (50.0, 3.125))
    a, b = estimate(model, fast, train, lay), estimate(model, slow, train, lay)
    assert comm_share(b.time) > 0.8 and "exposed communication" in b.uncertainty.extrapolated
    assert not b.uncertainty.validated and a.uncertainty.extrapolated is None


def test_a_borrowed_band_says_the_regime_has_no_rows_of_its_own():
    """`rows` of a borrowed band counts the pool it comes from (1,402 for an MI300X estimate, read as the regime's
    own: a contract pass); regime_rows says how many the regime itself has: 0 there, `rows` for its own band."""
    base = hp.load_stack("megatron-core")
    lay = Layout(zero=1, dp=8)
    chain = {"zero1-2/*": _err(7, 0.2), "zero1-2/<=64": _err(3, 0.05), "all-stacks": _err(300, 0.09)}
    own = uncertainty(base.model_copy(update={"held_out": chain}), lay, 8)
    assert (own.basis, own.rows, own.regime_rows) == ("regime", 3, 3)
    del chain["zero1-2/<=64"]
    borrowed = uncertainty(base.model_copy(update={"held_out": chain}), lay, 8)
    assert borrowed.basis != "regime" and (borrowed.rows, borrowed.regime_rows) == (7, 0)
