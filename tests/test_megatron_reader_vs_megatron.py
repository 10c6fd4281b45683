"""check's Megatron reader against Megatron itself: the public launch scripts of tests/data/configs and small
scripts that leave flags out, parsed by megatron-core 0.19.2's own parse_args and validate_args on CPU
(benchmarks/megatron_crosscheck.py results_many) and by check's reader (planner.frameworks.megatron); the model
shape, layout and the training switches that are priced must agree. Skipped without torch or the wheel."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest

from costmodels.layout import resolve_layout
from planner.files.native import load_native

ROOT = Path(__file__).resolve().parents[1]
# mlm_gpt3_175b.sh is left out: it gives --global-batch-size beside --step-batch-size-schedule, which 0.19.2's
# validate_args refuses ("Cannot specify both"), so Megatron itself does not run it as published
PUBLIC = {"mlm_llama3_8b_fp8.sh": None, "mlm_llama3_8b_mfsdp_fp8.sh": None, "mlm_mixtral_8x7b.sh": 4,
          "mlm_mfsdp_deepseek_v3.sbatch.sh": 32}  # nodes, as tests/test_config_corpus.py
BASE = """export CUDA_DEVICE_MAX_CONNECTIONS={connections}
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 \\
  --vocab-size 32001 --micro-batch-size 1 --global-batch-size 64 --bf16 --tensor-model-parallel-size 2 \\
  --tokenizer-type NullTokenizer {extra}
"""
LEFT_OUT = {  # flags left out, each a default Megatron applies that changes the price
    "swiglu-width": "--swiglu --normalization RMSNorm --group-query-attention --num-query-groups 8",
    "moe-dispatcher": "--swiglu --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 "
                      "--moe-grouped-gemm --disable-bias-linear --sequence-parallel",
    "grad-reduce": "--use-distributed-optimizer --overlap-grad-reduce --grad-reduce-in-bf16 --sequence-parallel",
    "recompute": "--recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
    "vpp-cp": "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 --context-parallel-size 2 "
              "--sequence-parallel --use-distributed-optimizer",
    "torch-fsdp2": "--use-torch-fsdp2 --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights",
    "local-impl": "--transformer-impl local --sequence-parallel",
}
DISPATCHER = {"allgather": "allgather", "alltoall": "alltoall", "flex": "deepep"}


def _script(extra: str) -> str:
    """BASE with `extra`; CUDA_DEVICE_MAX_CONNECTIONS 1 as TP needs, 8 under FSDP, which Megatron asserts is not 1."""
    return BASE.format(extra=extra, connections=8 if "fsdp" in extra else 1)


def _crosscheck():
    spec = importlib.util.spec_from_file_location("megatron_crosscheck", ROOT / "benchmarks" / "megatron_crosscheck.py")
    mc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mc)
    return mc


def BACKGROUND():  # noqa: N802 - tests/conftest.py calls it at collection
    """Read every script with check now (parplan code, main thread); return the slow part: megatron-core's wheel
    fetched and Megatron run once on all of them, giving {"probs": {name: Problem}, "results": [Megatron's]} or
    {"skip": why}."""
    mc, folder = _crosscheck(), Path(tempfile.mkdtemp(prefix="megatron-reader-"))
    paths = {name: ROOT / "tests" / "data" / "configs" / name for name in PUBLIC}
    for name, extra in LEFT_OUT.items():
        paths[name] = folder / f"{name}.sh"
        paths[name].write_text(_script(extra))
    probs = {name: load_native(path, None, "dgx-h100", PUBLIC.get(name)) for name, path in paths.items()}
    jobs = [mc.job_for(paths[name], probs[name].cluster.num_gpus, "", []) for name in paths]
    return lambda: _run_megatron(mc, folder, probs, jobs)


def _run_megatron(mc, folder: Path, probs: dict, jobs: list) -> dict:
    if importlib.util.find_spec("torch") is None:
        return {"skip": "torch is not installed (Megatron's argument module imports it)"}
    try:
        wheel = mc.fetch_wheel(folder)
    except (RuntimeError, OSError) as err:
        return {"skip": f"megatron-core wheel not available: {err}"}
    stubs = mc.unpack(wheel, folder / "site")
    for job in jobs:
        job.update(site=str(folder / "site"), stubs=stubs)
    return {"probs": probs, "results": mc.results_many(jobs)}


@pytest.fixture(scope="module")
def read_both(request):
    """{name: (check's Problem, Megatron's result)} for every script (BACKGROUND, started at collection)."""
    from conftest import background

    done = background(request)
    if "skip" in done:
        pytest.skip(done["skip"])
    return {name: (prob, result) for (name, prob), result in zip(done["probs"].items(), done["results"])}


@pytest.mark.parametrize("name", list(PUBLIC) + list(LEFT_OUT))
def test_check_reads_the_script_as_megatron_does(name, read_both):
    prob, result = read_both[name]
    assert result["ok"], result["why"]
    a, m, t = result["args"], prob.model, prob.train
    lay = resolve_layout(m, prob.cluster, t, prob.layout)
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.num_attention_heads) == (
        a["num_layers"], a["hidden_size"], a["ffn_hidden_size"], a["num_attention_heads"]), name
    assert m.num_kv_heads == (a["num_query_groups"] if a["group_query_attention"] else a["num_attention_heads"])
    assert t.seq_length == a["seq_length"] and (m.mla is not None or m.head_dim == a["kv_channels"])
    assert (lay.tp, lay.pp, lay.cp, lay.dp, lay.mbs, t.global_batch_size) == (
        a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"], a["context_parallel_size"],
        a["data_parallel_size"], a["micro_batch_size"], a["global_batch_size"]), name
    assert lay.sp == a["sequence_parallel"] and lay.vpp == (a["virtual_pipeline_model_parallel_size"] or 1)
    assert lay.recompute == (a["recompute_granularity"] or "none"), name
    if a["num_experts"]:
        assert (m.num_experts, m.top_k, lay.ep, lay.etp) == (
            a["num_experts"], a["moe_router_topk"], a["expert_model_parallel_size"], a["expert_tensor_parallel_size"])
        assert t.ep_dispatcher == DISPATCHER[a["moe_token_dispatcher_type"]], name
        assert t.moe_permute_fusion == bool(a["moe_permute_fusion"]), name
    if not (a["use_megatron_fsdp"] or a["use_torch_fsdp2"]) and a["bf16"]:
        assert (t.grad_dtype == "fp32") == bool(a["accumulate_allreduce_grads_in_fp32"]), name
    assert t.param_gather_overlap == bool(a["overlap_param_gather"]) or lay.zero != 1, name
    if "padded_vocab_size" in a:  # NullTokenizer scripts: megatron-core's own vocab_size_with_padding
        assert m.vocab_size == a["padded_vocab_size"], name


def test_moe_biases_need_expert_tensor_parallel_size_1():
    """Megatron refuses MoE with biases at etp > 1 (TransformerConfig: "Bias in Moe is only supported when
    ETP==1"); etp defaults to tp, so a script with tp 2, experts and biases exits 2 naming both fixes."""
    from planner.errors import UserError
    from planner.files.native import load_native_text

    text = _script("--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 --sequence-parallel")
    with pytest.raises(UserError, match="default: --tensor-model-parallel-size.*--disable-bias-linear"):
        load_native_text(text, "megatron", None, "dgx-h100", None)
    load_native_text(text.replace("--num-experts", "--expert-tensor-parallel-size 1 --num-experts"), "megatron",
                     None, "dgx-h100", None)


def test_megatron_moe_with_tensor_parallelism_needs_sequence_parallelism():
    """megatron-core 0.19.2 MoELayer.forward raises in training when tp > 1 without sequence parallelism, at any
    ep (before, only ep > 1 was refused, by costmodels.layout)."""
    from planner.errors import UserError
    from planner.files.native import load_native_text

    text = _script("--num-experts 8 --moe-router-topk 2 --disable-bias-linear")
    with pytest.raises(UserError, match="add --sequence-parallel"):
        load_native_text(text, "megatron", None, "dgx-h100", None)
