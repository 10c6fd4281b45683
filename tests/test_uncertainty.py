"""The error band every estimate carries (costmodels.uncertainty): regimes, fallbacks, validation."""

from __future__ import annotations

from helpers import cluster, gpt

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
