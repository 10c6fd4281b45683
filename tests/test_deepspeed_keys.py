"""What DeepSpeed 0.19.8 itself does with a config's keys before it trains, mirrored by parplan's DeepSpeed reader:
unknown keys in its pydantic sections refused (ds_keys), deprecated offload switches and Apex AMP read as their
replacements (legacy), shard groups parplan cannot express refused (sharding: MiCS, ZeRO++ hpZ, AutoTP), and
ZeRO-3's persistence threshold priced (persistence). Unit-level: each test runs `resolve` or a pure function."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodels.params import mtp_params, total_params
from planner.errors import UserError
from planner.files import loading
from planner.frameworks.deepspeed import config_json as dsc
from planner.frameworks.deepspeed import ds_keys, persistence
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags, resolve

PATH = Path("ds.json")
BATCH = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True}}


def _resolve(zero: dict, flags: TrainerFlags = TrainerFlags(recompute="none"), **top) -> tuple[dict, ReadNotes]:
    read = ReadNotes()
    return resolve({**BATCH, "zero_optimization": zero, **top}, flags, PATH, read), read


# ---- unknown keys (ds_keys) ----------------------------------------------------------------------------------------

def test_misspelt_key_in_a_pydantic_section_is_refused_with_the_closest_valid_key():
    with pytest.raises(UserError, match=r"zero_optimization\.offload_optimiser is not a DeepSpeed 0\.19\.8 key"
                                        r".*did you mean zero_optimization\.offload_optimizer\?"):
        _resolve({"stage": 2, "offload_optimiser": {"device": "cpu"}})
    with pytest.raises(UserError, match=r"offload_optimizer\.devices .*did you mean "
                                        r"zero_optimization\.offload_optimizer\.device\?"):
        _resolve({"stage": 2, "offload_optimizer": {"devices": "cpu"}})
    with pytest.raises(UserError, match=r"bf16\.enable .*did you mean bf16\.enabled\?"):
        resolve({**BATCH, "bf16": {"enable": True}}, TrainerFlags(), PATH, ReadNotes())


def test_aliases_deprecated_names_and_auto_values_pass_a_misspelling_beside_them_does_not():
    """populate_by_name: field names and aliases both; deprecated fields are fields; "auto" is dropped by
    DeepSpeedConfigModel.__init__ before validation, unknown key or not (checked against DeepSpeed 0.19.8)."""
    zero = {"stage": 3, "stage3_max_live_parameters": 1e9, "max_reuse_distance": 1e9, "stage3_gather_fp16_weights_on_"
            "model_save": True, "made_up_key": "auto", "offload_param": {"device": "none", "buffer_size": 1e8}}
    _resolve(zero)
    with pytest.raises(UserError, match=r"did you mean zero_optimization\.offload_param\.buffer_size\?"):
        _resolve({**zero, "offload_param": {"device": "none", "buffer_sizes": 1e8}})
    assert {"cpu_offload", "stage3_param_persistence_threshold", "param_persistence_threshold"} <= ds_keys.ZERO
    assert {"tp", "tensor_parallel", "autotp_size"} <= ds_keys.TENSOR_PARALLEL


def test_top_level_keys_are_never_refused_a_near_miss_is_named_and_removed_keys_noted():
    out, read = _resolve({"stage": 1}, zero_optimisation={"stage": 3}, my_own_key=1, nebula={"enabled": False})
    joined = "\n".join(read.notes)
    assert "zero_optimisation is no DeepSpeed key (did you mean zero_optimization?)" in joined
    assert "my_own_key" not in joined and "nebula: removed in DeepSpeed 0.19.8" in joined


# ---- legacy offload switches and Apex AMP (legacy) -----------------------------------------------------------------

def test_legacy_cpu_offload_is_priced_as_offload_optimizer_and_said():
    out, read = _resolve({"stage": 2, "cpu_offload": True})
    assert dsc.ds_offload(out, PATH, 2)["offload_optimizer"] == "cpu"
    assert any('cpu_offload=true read as offload_optimizer.device="cpu"' in n for n in read.notes)
    out, read = _resolve({"stage": 3, "cpu_offload": True, "cpu_offload_param": True,
                          "cpu_offload_use_pin_memory": True})
    assert dsc.ds_offload(out, PATH, 3) == {"offload_optimizer": "cpu", "offload_params": "cpu"}
    assert len(read.notes) == 3 and "cpu_offload" not in out["zero_optimization"]


@pytest.mark.parametrize("zero,message", [
    ({"stage": 2, "cpu_offload": False, "offload_optimizer": {"device": "cpu"}},
     "deprecated key beside its replacement"),
    ({"stage": 2, "cpu_offload_param": True}, r"cpu_offload_param=true .* needs zero_optimization.stage 3 \(got 2\)"),
    ({"stage": 2, "cpu_offload": "yes"}, "zero_optimization.cpu_offload='yes' must be true or false"),
])
def test_legacy_offload_refusals_name_the_old_key(zero, message):
    with pytest.raises(UserError, match=message):
        _resolve(zero)


def test_apex_amp_is_fp16_mixed_precision_and_refused_where_deepspeed_refused_it():
    cfg = {"train_micro_batch_size_per_gpu": 1, "amp": {"enabled": True, "opt_level": "O1"}}
    read = ReadNotes()
    out = resolve(cfg, TrainerFlags(recompute="none"), PATH, read)
    assert dsc.ds_precision(out, PATH) == "fp16" and any("Apex AMP" in n for n in read.notes)
    with pytest.raises(UserError, match="amp.enabled=true with zero_optimization.stage=3"):
        resolve({**cfg, "zero_optimization": {"stage": 3}}, TrainerFlags(), PATH, ReadNotes())
    with pytest.raises(UserError, match="amp.enabled=true with bf16.enabled=true"):
        resolve({**BATCH, "amp": {"enabled": True}}, TrainerFlags(), PATH, ReadNotes())


# ---- shard groups parplan cannot express (sharding) ----------------------------------------------------------------

@pytest.mark.parametrize("zero,top,message,off", [
    ({"stage": 3, "mics_shard_size": 8}, {}, "mics_shard_size=8: MiCS shards", {"mics_shard_size": -1}),
    ({"stage": 3, "zero_hpz_partition_size": 8}, {}, "zero_hpz_partition_size=8: ZeRO\\+\\+ hpZ",
     {"zero_hpz_partition_size": 1}),
    ({"stage": 3}, {"tensor_parallel": {"autotp_size": 4}}, "tensor_parallel.autotp_size=4: DeepSpeed AutoTP", {}),
])
def test_shard_groups_parplan_cannot_price_are_refused_their_off_values_pass(zero, top, message, off):
    with pytest.raises(UserError, match=message):
        _resolve(zero, **top)
    _resolve({**zero, **off}, tensor_parallel={"autotp_size": 0})
    _resolve({**zero, "stage": 2})  # hpZ and MiCS act under ZeRO-3 only (MiCS: refused there, noted here)


# ---- ZeRO-3 persistence threshold (persistence) --------------------------------------------------------------------

def _persisted(zero: dict) -> tuple[dict, list[str]]:
    """The JSON as native._deepspeed reads it: "auto" filled (resolve), then the threshold against llama3-8b."""
    out, read = _resolve(zero)
    return out, read.notes + persistence.apply(out, PATH, loading.load_model("llama3-8b"))


def test_threshold_above_every_tensor_prices_weights_whole_as_zero2():
    out, notes = _persisted({"stage": 3, "stage3_param_persistence_threshold": 1e12, "offload_param": {"device": "cpu"}})
    assert out["zero_optimization"]["stage"] == 2 and "offload_param" not in out["zero_optimization"]
    assert any("priced as ZeRO-2 (weights whole" in n for n in notes)


def test_small_or_default_threshold_keeps_zero3():
    out, notes = _persisted({"stage": 3, "stage3_param_persistence_threshold": 1e6})
    assert out["zero_optimization"]["stage"] == 3 and any("0.0% of the weights" in n for n in notes)
    for zero in ({"stage": 3, "stage3_param_persistence_threshold": 1e4}, {"stage": 3}):
        out, notes = _persisted(zero)
        assert out["zero_optimization"]["stage"] == 3 and not any("persistence" in n for n in notes)


def test_threshold_refuses_a_value_that_is_no_element_count():
    with pytest.raises(UserError, match="stage3_param_persistence_threshold=-1 must be a whole number"):
        _persisted({"stage": 3, "stage3_param_persistence_threshold": -1})


def test_model_tensors_add_up_to_the_parameter_count():
    for name in ("llama3-8b", "mixtral-8x7b", "deepseek-v3"):
        m = loading.load_model(name)
        got = sum(size * count for size, count in persistence.tensors(m))
        assert got == pytest.approx(total_params(m) - mtp_params(m).total, rel=1e-5), name


def test_kept_share_follows_deepspeeds_greedy_walk_and_cap():
    groups = [(10, 1), (3, 2), (20, 1), (2, 3)]
    assert persistence.kept_whole(groups, 10, None) == 10 + 6 + 6
    assert persistence.kept_whole(groups, 10, 15) == 10 + 3 + 2  # the cap skips a tensor, smaller ones still fit
    assert persistence.kept_whole(groups, 100, None) == 42


def test_with_the_model_the_share_decides():
    """llama3-8b: 1e7 keeps the k/v projections (4.2M each) whole, 3% of the weights: priced whole (upper bound);
    1e6 keeps norms only: ZeRO-3, said."""
    m = loading.load_model("llama3-8b")
    cfg = {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 10**7}}
    notes = persistence.apply(cfg, PATH, m)
    assert cfg["zero_optimization"]["stage"] == 2 and "3.3% of the weights" in notes[0] and "upper bound" in notes[0]
    cfg = {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 10**6}}
    notes = persistence.apply(cfg, PATH, m)
    assert cfg["zero_optimization"]["stage"] == 3 and "0.0% of the weights" in notes[0]


def test_the_reader_prices_the_threshold_against_the_named_model():
    """Through the DeepSpeed reader (native._deepspeed), a threshold above every llama3-8b tensor is ZeRO-2's
    weights; the same JSON with DeepSpeed's default stays ZeRO-3."""
    import json  # noqa: PLC0415

    from planner.files.native import load_native_text  # noqa: PLC0415

    def zero(threshold) -> int:
        cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
               "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": threshold}}
        return load_native_text(json.dumps(cfg), "deepspeed", "llama3-8b", "dgx-h100", 1, PATH).layout.zero

    assert (zero(1e12), zero(1e5)) == (2, 3)
