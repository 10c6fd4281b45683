"""torchtitan exporter fixes (planner/frameworks/torchtitan/export.py):
1. no torchtitan_0.2.toml for a DDP plan beside tp/pp/cp/ep, which torchtitan 0.2.x cannot run as priced (it refuses
   it with replicas, or trains it in fp32); the 0.3 script's header says why;
2. flash_attention false is refused: torchtitan runs fused attention only;
3. MoE (and other) presets torchtitan ships get its module/config and [model] name/flavor, so that `parplan check`
   of the files finds the model without --model."""

from __future__ import annotations

import pytest

import hardware_profiles as hp
from costmodels.estimate import estimate
from planner.exporters import ExportRefused, run_export
from planner.exporters.common import plan_from_doc
from planner.files.native import load_native
from planner.frameworks.torchtitan.export import omitted
from tests.test_exporters import make_doc


def _names(result) -> set[str]:
    return {p.name for p in result.written}


def test_ddp_beside_tp_writes_no_0_2_toml_and_says_why(tmp_path):
    doc = make_doc(nodes=2, zero=0, tp=2, sp=True, pp=2, mbs=1, gbs=64)
    result = run_export(doc, "torchtitan", tmp_path, force=True)
    assert _names(result) == {"launch_torchtitan.sh"}
    text = (tmp_path / "launch_torchtitan.sh").read_text()
    assert "# torchtitan_0.2.toml not written: torchtitan 0.2.x cannot run this plan as priced" in text
    assert "for 0.2.x use torchtitan_0.2.toml" not in text
    assert list(omitted(plan_from_doc(doc))) == ["torchtitan_0.2.toml"]
    assert result.refused["torchtitan_0.2.toml"].startswith("torchtitan 0.2.x cannot run this plan")  # printed as a note


def test_fsdp_beside_tp_and_plain_ddp_still_write_the_0_2_toml(tmp_path):
    fsdp = run_export(make_doc(zero=3, tp=2, sp=True, mbs=1, gbs=64), "torchtitan", tmp_path / "a", force=True)
    ddp = run_export(make_doc(zero=0, mbs=1, gbs=64), "torchtitan", tmp_path / "b", force=True)
    for result, folder in ((fsdp, tmp_path / "a"), (ddp, tmp_path / "b")):
        assert "torchtitan_0.2.toml" in _names(result)
        assert "not written" not in (folder / "launch_torchtitan.sh").read_text()


def test_unfused_attention_is_refused(tmp_path):
    doc = make_doc(zero=3, mbs=1, gbs=64, train={"flash_attention": False})
    with pytest.raises(ExportRefused, match="flash_attention=false: torchtitan runs fused attention only"):
        run_export(doc, "torchtitan", tmp_path, force=True)
    assert "torchtitan" in run_export(doc, "all", tmp_path / "all", force=True).refused


# preset, layout, (module, 0.3.0 config, 0.2.x flavor)
SHIPPED = [
    ("deepseek-v3-16b", dict(ep=8, zero=3, mbs=1, recompute="full"), ("deepseek_v3", "deepseek_v3_16b", "16B")),
    ("qwen3-30b-a3b", dict(ep=8, zero=3, mbs=1, recompute="full"), ("qwen3", "qwen3_30b_a3b", "30B-A3B")),
    ("gpt-oss-120b", dict(ep=8, zero=3, mbs=1, recompute="full"), ("gpt_oss", "gpt_oss_120b", "120b")),
    ("llama3-8b", dict(zero=3, mbs=1), ("llama3", "llama3_8b", "8B")),
]


@pytest.mark.parametrize("preset,layout,names", SHIPPED, ids=[p for p, _, _ in SHIPPED])
def test_shipped_model_is_named_and_read_back_without_model(tmp_path, preset, layout, names):
    module, config, flavor = names
    doc = make_doc(preset, nodes=1, gbs=64, train={"seq_length": 4096}, **layout)
    run_export(doc, "torchtitan", tmp_path, force=True)
    script = (tmp_path / "launch_torchtitan.sh").read_text()
    assert f'TT_MODULE="${{TT_MODULE:-{module}}}"' in script and f'TT_CONFIG="${{TT_CONFIG:-{config}}}"' in script
    toml = (tmp_path / "torchtitan_0.2.toml").read_text()
    assert f'name = "{module}"\nflavor = "{flavor}"' in toml and "EDIT-ME" not in toml
    for name in ("launch_torchtitan.sh", "torchtitan_0.2.toml"):
        prob = load_native(tmp_path / name, None, "dgx-h100", None)  # no --model
        assert prob.model.name == preset
        lay = estimate(prob.model, prob.cluster, prob.train, prob.layout).layout
        assert (lay.ep, lay.dp, lay.zero, lay.recompute) == tuple(doc["layout"][k] for k in ("ep", "dp", "zero",
                                                                                            "recompute"))


def test_model_only_0_2_ships_gets_its_flavor_and_a_note_in_the_0_3_script(tmp_path):
    doc = make_doc("llama4-scout", nodes=1, gbs=64, train={"seq_length": 4096}, ep=8, zero=3, mbs=1,
                   recompute="full")
    run_export(doc, "torchtitan", tmp_path, force=True)
    assert 'name = "llama4"\nflavor = "17bx16e"' in (tmp_path / "torchtitan_0.2.toml").read_text()
    script = (tmp_path / "launch_torchtitan.sh").read_text()
    assert 'TT_MODULE="${TT_MODULE:-}"' in script and "torchtitan 0.3.0 ships no config of this model" in script
    assert load_native(tmp_path / "torchtitan_0.2.toml", None, "dgx-h100", None).model.name == "llama4-scout"


def test_a_model_of_other_shapes_is_not_named(tmp_path):
    """Exact shapes only: one layer fewer than deepseek-v3-16b is no torchtitan flavor."""
    model = hp.load_model("deepseek-v3-16b").model_copy(update={"num_layers": 26, "name": "dsv3-26"})
    doc = make_doc(model, nodes=1, gbs=64, train={"seq_length": 4096}, ep=8, zero=3, mbs=1, recompute="full")
    run_export(doc, "torchtitan", tmp_path, force=True)
    assert 'TT_MODULE="${TT_MODULE:-}"' in (tmp_path / "launch_torchtitan.sh").read_text()
    assert 'flavor = "EDIT-ME"' in (tmp_path / "torchtitan_0.2.toml").read_text()



def test_recompute_of_some_layers_is_refused(tmp_path):
    """A plan recomputing 16 of 32 layers was written as torchtitan's full recompute (checked 77.6 s against the
    plan's 68.8 s)."""
    doc = make_doc(zero=3, mbs=1, recompute="full", recompute_num_layers=16, recompute_method="block")
    with pytest.raises(ExportRefused, match="recompute_num_layers=16"):
        run_export(doc, "torchtitan", tmp_path, force=True)
