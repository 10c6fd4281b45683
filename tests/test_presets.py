"""Preset data: every file loads, carries sources, and matches the published numbers it cites."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

import hardware_profiles as hp

PRESETS = Path(__file__).resolve().parents[1] / "hardware_profiles"
REF = Path(__file__).resolve().parents[1] / "benchmarks" / "data"

GPUS = ["a100-40gb", "a100-80gb", "h100-sxm", "h800", "h200", "b200", "mi300x"]
CLUSTERS = ["dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200", "mi300x-node"]
MEGATRON = ["megatron-1.7b", "megatron-3.6b", "megatron-7.5b", "megatron-18.4b", "megatron-39.1b",
            "megatron-76.1b", "megatron-145.6b", "megatron-310.1b", "megatron-529.6b", "megatron-1t"]
MODELS = ["llama3-8b", "llama3-70b", "llama3.1-405b", "llama2-7b", "llama2-13b", "llama2-70b", "mixtral-8x7b",
          "mixtral-8x22b", "qwen3-30b-a3b", "gpt3-175b", *MEGATRON]

# benchmarks/data/published_numbers.md section 5 (dense, per GPU):
# name: (BF16 = FP16 TFLOP/s, FP8 TFLOP/s or None, HBM GB/s)
PUBLISHED = {
    "a100-40gb": (312, None, 1555), "a100-80gb": (312, None, 2039), "h100-sxm": (989, 1979, 3350),
    "h800": (989, 1979, 3350), "h200": (989, 1979, 4800), "b200": (2250, 4500, 8000),
    "mi300x": (1307, 2615, 5300),  # "about": the datasheet gives 1,307.4 / 2,614.9
}
# docs/design.md section 4, cluster presets: (gpu, scale-up GB/s, scale-out GB/s), per GPU per direction.
DESIGN_CLUSTERS = {
    "dgx-a100": ("a100-80gb", 300, 25), "dgx-h100": ("h100-sxm", 450, 50), "hgx-h200": ("h200", 450, 50),
    "dgx-b200": ("b200", 900, 50), "mi300x-node": ("mi300x", 448, 50),
}


def _files(kind: str) -> list[str]:
    return sorted(p.stem for p in (PRESETS / kind).glob("*.yaml"))


def test_list_functions_return_required_names():
    assert set(GPUS) <= set(hp.list_gpus())
    assert set(CLUSTERS) <= set(hp.list_clusters())
    assert set(MODELS) <= set(hp.list_models())


@pytest.mark.parametrize("kind, lister", [("gpus", hp.list_gpus), ("clusters", hp.list_clusters),
                                          ("models", hp.list_models)])
def test_names_match_files_in_source_tree(kind, lister):
    """Independent of how the package is installed: the listing equals the YAML files in the repo."""
    assert lister() == _files(kind)


@pytest.mark.parametrize("kind", ["gpus", "clusters", "models"])
def test_every_file_has_sources_and_its_own_name(kind):
    for stem in _files(kind):
        data = yaml.safe_load((PRESETS / kind / f"{stem}.yaml").read_text())
        assert data["name"] == stem
        assert isinstance(data["sources"], list) and data["sources"], stem
        assert all(isinstance(s, str) and s.strip() for s in data["sources"]), stem
        if kind == "gpus":  # written by benchmarks/calibrate.py, which says what it fitted on
            assert data["efficiency"]["fitted_on"].strip(), stem


@pytest.mark.parametrize("name", GPUS)
def test_gpu_peaks_match_published_numbers(name):
    gpu = hp.load_gpu(name)
    bf16, fp8, hbm = PUBLISHED[name]
    assert gpu.bf16_tflops == pytest.approx(bf16, abs=0.5)
    assert gpu.fp16_tflops == gpu.bf16_tflops
    assert gpu.fp8_tflops == (None if fp8 is None else pytest.approx(fp8, abs=0.5))
    assert gpu.hbm_gb_per_s == hbm


def test_gpu_capacities_as_driver_reports():
    caps = {g: hp.load_gpu(g).hbm_gib for g in GPUS}
    assert caps == {"a100-40gb": 40, "a100-80gb": 80, "h100-sxm": 79.6, "h800": 79.6, "h200": 140.4,
                    "b200": 179.1, "mi300x": 192}


@pytest.mark.parametrize("name", CLUSTERS)
def test_clusters_match_design_table(name):
    cluster = hp.load_cluster(name)
    gpu, up, out = DESIGN_CLUSTERS[name]
    assert (cluster.gpu_profile.name, cluster.scale_up_gb_per_s, cluster.scale_out_gb_per_s) == (gpu, up, out)
    assert (cluster.gpus_per_node, cluster.num_nodes) == (8, 1)
    assert 0 < cluster.usable_bytes < cluster.gpu_profile.hbm_bytes
    assert hp.load_cluster(name, num_nodes=4).num_gpus == 32


@pytest.mark.parametrize("name", MODELS)
def test_every_model_loads(name):
    model = hp.load_model(name)
    assert model.name == name
    assert hp.model_sources(name)


def test_megatron_presets_match_narayanan_table1():
    """Narayanan et al. SC'21 Table 1: shapes, and P = 12Lh^2(1 + 13/(12h) + (V+s)/(12Lh)) reproduces column 1."""
    rows = list(csv.DictReader((REF / "narayanan2021_table1.csv").open()))
    assert len(rows) == len(MEGATRON)
    for name, row in zip(MEGATRON, rows):
        m = hp.load_model(name)
        assert (m.num_attention_heads, m.hidden_size, m.num_layers) == (
            int(row["num_attention_heads"]), int(row["hidden_size"]), int(row["num_layers"]))
        assert (m.vocab_size, m.seq_length, m.ffn_hidden_size) == (51200, 2048, 4 * m.hidden_size)
        assert (m.activation, m.norm, m.position_embedding) == ("gelu", "layernorm", "learned")
        assert m.linear_bias and m.tied_embeddings and m.dropout
        L, h, V, s = m.num_layers, m.hidden_size, m.vocab_size, m.seq_length
        params = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
        assert round(params / 1e9, 1) == float(row["params_billion"])  # the table rounds to 0.1B


def test_moe_presets():
    mixtral = hp.load_model("mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.top_k, mixtral.moe_ffn_hidden_size) == (8, 2, 14336)
    qwen = hp.load_model("qwen3-30b-a3b")
    assert (qwen.num_experts, qwen.top_k, qwen.moe_ffn_hidden_size, qwen.num_shared_experts) == (128, 8, 768, 0)
    assert qwen.q_width == 4096 != qwen.hidden_size and qwen.qk_norm and not qwen.tied_embeddings
