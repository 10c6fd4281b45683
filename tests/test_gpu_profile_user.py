"""A GPU profile a user writes (planner.files.gpu_profile): without an efficiency block it takes its generation's
fitted fractions, not Efficiency's generic defaults (an inline copy of h100-sxm priced Llama 3 8B at 68.6% MFU
where the preset gives 65.3%); `gpu:` may name a spec file; the band names the tensor-core generation."""

from __future__ import annotations

import yaml

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.files.loading import load_cluster

H100 = {k: v for k, v in hp.load_gpu("h100-sxm").model_dump().items() if k not in ("efficiency", "sources")}
CHASSIS = {k: v for k, v in hp.load_cluster("dgx-h100").model_dump().items() if k != "gpu"}


def _step(cluster) -> tuple[float, str]:
    model, train = hp.load_model("llama3-8b"), hp.resolve_train(TrainSpec(global_batch_size=128))
    out = estimate(model, cluster, train, Layout(dp=8, zero=1))
    return out.time.step_s, out.uncertainty.regime


def test_an_inline_gpu_without_efficiency_is_priced_as_its_generation(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**CHASSIS, "gpu": {**H100, "name": "my-h100"}}))
    mine, preset = _step(load_cluster(str(path))), _step(hp.load_cluster("dgx-h100"))
    assert mine[0] == preset[0] and mine[1] == preset[1] == "megatron-core/zero1-2/<=64/hopper"
    assert "no efficiency block: the hopper generation's fitted fractions (h100-sxm's)" in capsys.readouterr().err


def test_gpu_may_name_a_spec_file_and_a_profile_without_a_generation_is_warned_of(tmp_path, capsys):
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump({**H100, "name": "my-h100"}))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**CHASSIS, "gpu": str(tmp_path / "gpu.yaml")}))
    assert load_cluster(str(tmp_path / "c.yaml")).gpu_profile.efficiency.curve_gen == "hopper"
    bare = {**H100, "name": "x1", "tensor_core_gen": None, "sm_count": None}
    (tmp_path / "d.yaml").write_text(yaml.safe_dump({**CHASSIS, "gpu": bare}))
    load_cluster(str(tmp_path / "d.yaml"))
    assert "no efficiency block and no tensor_core_gen" in capsys.readouterr().err


def test_a_gb_per_s_field_given_in_gb_per_s_is_warned_of_and_no_preset_is(tmp_path, capsys):
    """scale_out_gb_per_s 400 for a node's '2 x 200 Gb/s' (6.25 GB/s per GPU) priced an FSDP 70B step 7x too fast
    without a word; no cluster preset trips the check."""
    from planner.files.gpu_profile import link_warnings  # noqa: PLC0415

    assert all(not link_warnings(hp.load_cluster(name)) for name in hp.list_clusters())
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**CHASSIS, "gpu": "h100-sxm", "scale_out_gb_per_s": 400.0}))
    load_cluster(str(tmp_path / "c.yaml"))
    assert "scale_out_gb_per_s 400 is GB/s per GPU and per direction" in capsys.readouterr().err
    slow_nvlink = hp.load_cluster("dgx-h100").model_copy(update={"scale_up_gb_per_s": 40.0})
    assert "is above scale_up_gb_per_s 40" in link_warnings(slow_nvlink)[0]


def test_the_search_bands_a_renamed_gpu_and_a_slow_network_as_the_estimate_does(tmp_path):
    """--validated-only asks the same band as estimate: a copy of h100-sxm named my-h100 validates where the
    preset does (the search asked by name and found none), and a layout whose estimate is extrapolated (a slow
    network's exposed communication) is not kept as validated."""
    from planner.api import plan  # noqa: PLC0415

    args = dict(nodes=8, global_batch=128, seq_len=8192, framework="torchtitan", validated_only=True, top=1)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**CHASSIS, "gpu": {**H100, "name": "my-h100"}}))
    mine, preset = plan("llama3-70b", str(tmp_path / "c.yaml"), **args), plan("llama3-70b", "dgx-h100", **args)
    assert mine.plans and preset.plans
    assert mine.plans[0].time.step_s == preset.plans[0].time.step_s
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump({"preset": "dgx-h100", "scale_out_gb_per_s": 1.0}))
    slow = plan("llama3-70b", str(tmp_path / "slow.yaml"), **args)
    assert all(p.uncertainty.validated for p in slow.plans)


def test_a_gpu_file_is_found_beside_its_cluster_file_and_its_warnings_reach_json(tmp_path):
    """`gpu: mygpu.yaml` in sub/cluster.yaml is sub/mygpu.yaml, wherever parplan runs; a cluster file's warning is
    a reader's warning: on stderr and in check --json's "warnings"."""
    import json  # noqa: PLC0415

    from typer.testing import CliRunner  # noqa: PLC0415

    from planner.cli import app  # noqa: PLC0415

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "mygpu.yaml").write_text(yaml.safe_dump({**H100, "name": "my-h100"}))
    (sub / "cluster.yaml").write_text(yaml.safe_dump({**CHASSIS, "gpu": "mygpu.yaml", "scale_out_gb_per_s": 400.0}))
    assert load_cluster(str(sub / "cluster.yaml")).gpu_profile.name == "my-h100"
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
                      "--num-attention-heads 32 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
                      "--global-batch-size 64 --bf16 --vocab-size 32000 --tokenizer-type NullTokenizer\n")
    run = CliRunner().invoke(app, ["check", str(script), "--cluster", str(sub / "cluster.yaml"), "--json"])
    said = [w for w in json.loads(run.stdout)["warnings"] if "scale_out_gb_per_s 400 is GB/s per GPU" in w]
    assert len(said) == 1 and run.stderr.count("scale_out_gb_per_s 400 is GB/s per GPU") == 1


def test_scale_up_and_hbm_slips_are_warned_of(tmp_path, capsys):
    """A new-user pass: NVLink typed bidirectionally (900 on H100), a node total (7200 on H200) and HBM in MiB
    (24576) ran silently."""
    for update, said in (({"scale_up_gb_per_s": 900.0}, "above the hopper generation's fastest scale-up (450"),
                         ({"gpu": {**H100, "name": "m", "hbm_gib": 24576.0}}, "hbm_gib 24576 is above any GPU's")):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump({**CHASSIS, "gpu": {**H100, "name": "my-h100"}, **update}))
        load_cluster(str(path))
        assert said in capsys.readouterr().err
    for name in ("dgx-h100", "gb200-nvl72", "mi300x-node", "dgx-b300"):  # presets: nothing to say
        load_cluster(name)
        assert "above" not in capsys.readouterr().err


def test_a_pcie_node_takes_no_nvls_and_a_pcie_rate_on_a_switch_is_questioned(tmp_path, capsys):
    """NVLink SHARP needs an NVSwitch: an 8 x H100 PCIe box priced its all-reduce 27% faster with it (a new-user
    pass). scale_up_topology pcie drops it; a PCIe rate left as a switch is warned of."""
    from costmodels import comm

    base = {**CHASSIS, "gpu": "h100-sxm", "scale_up_gb_per_s": 64.0}
    path = tmp_path / "pcie.yaml"
    path.write_text(yaml.safe_dump(base))
    switch = load_cluster(str(path))
    assert "set scale_up_topology: pcie" in capsys.readouterr().err
    path.write_text(yaml.safe_dump({**base, "scale_up_topology": "pcie"}))
    pcie = load_cluster(str(path))
    assert "scale_up_topology" not in capsys.readouterr().err
    assert comm.cluster_links(pcie).nvls_speedup == 1.0 < comm.cluster_links(switch).nvls_speedup
    x = 2**30
    assert comm.all_reduce_s(comm.cluster_links(pcie), 8, 1, x) > comm.all_reduce_s(comm.cluster_links(switch), 8, 1, x)
