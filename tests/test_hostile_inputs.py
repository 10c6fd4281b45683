"""The input side of the attacker's battery: every class of hostile file or value exits 0, 1 or 2 (never
3, the internal-error code), with the field or the file named and no traceback. No test asserts on a
clock (issue 36): a SIGALRM of HANG_S only stops a run that would never end.

One case per distinct failure the issue reported (and a few found beside them): nesting, number
sizes and ranges, FIFOs and symlinks, duplicate keys, the preset+gpu cluster override, strict types
in Hugging Face config.json, DeepSpeed JSON, torchtitan TOML and Megatron scripts, bounded shell
expansion, plan-file extras, and text the console cannot encode. The fuzz test of the same readers
lives in tests/test_hostile_fuzz.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

EXAMPLE_PLAN = Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3-8b-plan.json"
# a small GPT's model and batch flags for Megatron launch lines (the tests add --num-layers and the launcher)
GPT_FLAGS = ("--hidden-size 4096 --num-attention-heads 32 --seq-length 2048 --max-position-embeddings 2048 "
             "--micro-batch-size 1 --global-batch-size 16 --bf16 --vocab-size 32000")

runner = CliRunner()
HANG_S = 120  # a guard against a run that never ends, not a speed bound
REPO = Path(__file__).resolve().parents[1]

MODEL = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "vocab_size": 1000}
CLUSTER = {"name": "c", "gpu": "h100-sxm", "gpus_per_node": 8, "num_nodes": 1, "scale_up_gb_per_s": 450,
           "scale_out_gb_per_s": 50}
HF = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 8,
      "intermediate_size": 512, "vocab_size": 1000}
DS = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": True}}
TT = "[parallelism]\ntensor_parallel_degree = 8\ndata_parallel_shard_degree = 1\n[training]\nlocal_batch_size = 1\n"
TT_PP = "[parallelism]\npipeline_parallel_degree = 2\ndata_parallel_shard_degree = 4\n"
MEG = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
       "--vocab-size 1000 --seq-length 2048 --micro-batch-size 1 --tensor-model-parallel-size 8 --bf16\n")
PLAN = {"model": "llama3-8b", "cluster": {"preset": "dgx-h100"}, "train": {"global_batch_size": 8},
        "layout": {"tp": 8}}
SECRET = "s3cr3t-hash-do-not-print"


def js(data: dict, **over) -> str:
    return json.dumps({**data, **over})


def est(model: str = "llama3-8b", cluster: str = "dgx-h100", *extra: str) -> list[str]:
    return ["estimate", model, "--cluster", cluster, "--layout", "tp=8", "--global-batch", "8", *extra]


def check(name: str) -> list[str]:
    return ["check", name, "--model", "llama3-8b", "--cluster", "dgx-h100"]


# id: (argv, {file name: content}, allowed exit codes, substrings the message must hold)
CASES = {
    # one guarded way in: nesting, numbers, duplicates
    "deep-json": (est("m.json"), {"m.json": "[" * 100_000 + "]" * 100_000}, {2}, ["m.json", "nested deeper"]),
    "deep-json-objects": (est("m.json"), {"m.json": '{"a":' * 50_000 + "1" + "}" * 50_000}, {2}, ["nested deeper"]),
    "deep-yaml-flow": (est("m.yaml"), {"m.yaml": "a: " + "[" * 100_000 + "]" * 100_000}, {2},
                       ["m.yaml", "nested deeper"]),
    "deep-yaml-block": (est("m.yaml"), {"m.yaml": "- " * 50_000 + "1\n"}, {2}, ["nested deeper"]),
    "deep-toml": (check("t.toml"), {"t.toml": "a = " + "[" * 100_000 + "]" * 100_000}, {2},
                  ["t.toml", "nested deeper"]),
    "deep-toml-tables": (check("t.toml"), {"t.toml": "[" + ".".join(["a"] * 5000) + "]\nx = 1\n"}, {2},
                         ["nested deeper"]),
    "deep-stack-file": (est("llama3-8b", "dgx-h100", "--stack-file", "s.yaml"), {"s.yaml": "a: " + "{b: " * 5000},
                        {2}, ["s.yaml", "nested deeper"]),
    "int-5000-digits-json": (est("m.json"), {"m.json": '{"num_layers": ' + "9" * 5000 + "}"}, {2},
                             ["m.json", "num_layers", "5000 digits"]),
    "int-5000-digits-yaml": (est("llama3-8b", "c.yaml"), {"c.yaml": "num_nodes: " + "9" * 5000 + "\n"}, {2},
                             ["c.yaml", "num_nodes"]),
    "int-5000-digits-toml": (check("t.toml"), {"t.toml": TT.replace("= 8", "= " + "9" * 5000)}, {2},
                             ["t.toml", "number"]),
    "int-20-digits": (est("m.json"), {"m.json": js(MODEL, vocab_size=10**20)}, {2}, ["vocab_size", "less than"]),
    "float-1e400": (est("m.json"), {"m.json": js(MODEL, num_experts=4, top_k=2).replace("}", ', "capacity_factor": '
                                                                                         "1e400}")},
                    {2}, ["capacity_factor", "finite"]),
    "json-nan-constant": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER).replace("450", "NaN")}, {2},
                          ["scale_up_gb_per_s", "finite"]),
    "bandwidth-5e-324": (est("llama3-8b", "c.json", "--json"), {"c.json": js(CLUSTER, scale_out_gb_per_s=5e-324)},
                         {2}, ["scale_out_gb_per_s"]),
    "gpu-tflops-1e-300": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER, gpu={
        "name": "g", "hbm_gib": 80, "hbm_gb_per_s": 2000, "bf16_tflops": 1e-300, "fp16_tflops": 1})}, {2},
                          ["bf16_tflops"]),
    "efficiency-1e-300": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER, gpu={
        "name": "g", "hbm_gib": 80, "hbm_gb_per_s": 2000, "bf16_tflops": 900, "fp16_tflops": 900,
        "efficiency": {"gemm_max": 1e-300}})}, {2}, ["gemm_max"]),
    "reserve-above-hbm": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER, memory_reserve_gib=1000)}, {2},
                          ["memory_reserve_gib", "hbm_gib"]),
    "reserve-above-hbm-preset": (est("llama3-8b", "c.json"), {"c.json": js({"preset": "dgx-a100",
                                                                             "memory_reserve_gib": 100})},
                                 {2}, ["memory_reserve_gib", "a100"]),
    "json-million-items": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER, sources=[1] * 1_300_000)}, {2},
                           ["sources", "items"]),
    "yaml-too-many-values": (est("llama3-8b", "c.yaml"), {"c.yaml": "sources: [" + ", ".join(["[1, 2, 3]"] * 40_000)
                                                          + "]\n"}, {2}, ["c.yaml", "values"]),
    "yaml-duplicate-key": (est("m.yaml"), {"m.yaml": "num_layers: 4\nnum_layers: 5\n"}, {2}, ["num_layers", "twice"]),
    "yaml-int-sexagesimal": (est("m.yaml"), {"m.yaml": "num_layers: " + ":".join(["59"] * 3000) + "\n"}, {2},
                             ["num_layers"]),
    "yaml-bad-date": (est("m.yaml"), {"m.yaml": "name: 2024-02-31\nnum_layers: 4\n"}, {2}, ["m.yaml"]),
    "stack-file-infinite": (est("llama3-8b", "dgx-h100", "--stack-file", "s.yaml"),
                            {"s.yaml": "name: s\nframework: megatron\nfit_error: .inf\n"}, {2}, ["fit_error"]),
    "stack-file-nan-bias": (est("llama3-8b", "dgx-h100", "--stack-file", "s.yaml"), {
        "s.yaml": "name: s\nframework: megatron\nheld_out: {'*': {rows: 1, mean: 0.1, p50: 0.1, p90: 0.2, "
                  "bias: .nan}}\n"}, {2}, ["bias"]),
    "stack-file-huge-bias": (est("llama3-8b", "dgx-h100", "--stack-file", "s.yaml"), {
        "s.yaml": "name: s\nframework: megatron\nheld_out: {'*': {rows: 1, mean: 0.1, p50: 0.1, p90: 0.2, "
                  "bias: 1.0e+300}}\n"}, {2}, ["bias"]),
    # files that are no spec: nothing of their content is echoed
    "not-a-spec-mapping": (est("shadow.yaml"), {"shadow.yaml": f"root:{SECRET}:19000:0:99999:7::\nbin:*:1::\n"},
                           {2}, ["shadow.yaml", "does not look like a parplan spec file"]),
    "not-a-plan-file": (["check", "shadow.yaml"], {"shadow.yaml": f"root:{SECRET}:19000:0:99999:7::\n"}, {2},
                        ["does not look like a parplan plan file"]),
    "unknown-keys-named-once": (est("m.json"), {"m.json": js(MODEL, **{f"k{i}": SECRET for i in range(9)})}, {2},
                                ["k0", "and 8 more"]),
    "unknown-key-with-colon": (est("m.yaml"), {"m.yaml": f"num_layers: 4\n'root:{SECRET}:1': 2\n"}, {2},
                               ["a key with spaces or ':'"]),
    # the preset + gpu override (a DGX chassis with another GPU)
    "preset-with-other-gpu": (est("llama3-8b", "c.json"), {"c.json": js({"preset": "dgx-h100", "gpu": "a100-80gb"})},
                              {0, 1}, ["a100-80gb"]),
    "preset-with-same-gpu": (est("llama3-8b", "c.json"), {"c.json": js({"preset": "dgx-h100", "gpu": "h100-sxm"})},
                             {0, 1}, ["h100-sxm"]),
    "plan-preset-with-gpu": (["check", "p.json"], {"p.json": js(PLAN, cluster={"preset": "dgx-h100",
                                                                                "gpu": "a100-80gb"})},
                             {0, 1}, ["p.json"]),
    "preset-with-unknown-gpu": (est("llama3-8b", "c.json"), {"c.json": js({"preset": "dgx-h100", "gpu": "a100"})},
                                {2}, ["c.json.gpu", "a100-80gb"]),
    "preset-not-a-name": (est("llama3-8b", "c.json"), {"c.json": js({"preset": ["dgx-h100"]})}, {2}, ["preset"]),
    # Hugging Face config.json: its own key names, strict types, one line
    "hf-string-boolean": (est("config.json"), {"config.json": js(HF, tie_word_embeddings="false")}, {2},
                          ["tie_word_embeddings", "true or false"]),
    "hf-string-bias": (est("config.json"), {"config.json": js(HF, attention_bias="true")}, {2}, ["attention_bias"]),
    "hf-list-for-int": (est("config.json"), {"config.json": js(HF, hidden_size=[256])}, {2}, ["hidden_size"]),
    "hf-list-dropout": (est("config.json"), {"config.json": js(HF, attention_dropout=[0.1])}, {2},
                        ["attention_dropout"]),
    "hf-spec-error-in-hf-names": (est("config.json"), {"config.json": js(HF, num_hidden_layers=0)}, {2},
                                  ["num_hidden_layers"]),
    "hf-mixtral-no-experts": (est("config.json"), {"config.json": js(HF, model_type="mixtral", num_local_experts=0,
                                                                     num_experts_per_tok=2)}, {2},
                              ["num_local_experts"]),
    # Megatron scripts: quotes, bounded expansion, ASCII numbers
    "sbatch-unclosed-quote": (["check", "run.sh", "--cluster", "dgx-h100"],
                              {"run.sh": '#!/bin/bash\n#SBATCH --job-name="abc\n' + MEG}, {2}, ["run.sh", "line 2"]),
    "shell-doubling": (["check", "run.sh", "--cluster", "dgx-h100"], {"run.sh": "A=x\n" + "A=$A$A\n" * 40 + MEG}, {2},
                       ["run.sh", "line", "bounded"]),
    "shell-array-doubling": (["check", "run.sh", "--cluster", "dgx-h100"],
                             {"run.sh": "A=(x)\n" + 'A=( "${A[@]}" "${A[@]}" )\n' * 40 + MEG}, {2},
                             ["run.sh", "bounded"]),
    "shell-many-refs": (["check", "run.sh", "--cluster", "dgx-h100"],
                        {"run.sh": "A=" + "x" * 60_000 + "\nB=" + "$A" * 2000 + "\n" + MEG}, {2}, ["line 2"]),
    "shell-two-million-words": (["check", "run.sh", "--cluster", "dgx-h100"], {"run.sh": MEG.strip() + " w" * 1_900_000},
                                {2}, ["run.sh", "words"]),
    "megatron-5000-digit-flag": (["check", "run.sh", "--cluster", "dgx-h100"],
                                 {"run.sh": MEG.replace("--num-layers 4", "--num-layers " + "9" * 5000)}, {2},
                                 ["run.sh", "--num-layers"]),
    "megatron-arabic-digit": (["check", "run.sh", "--cluster", "dgx-h100"],
                              {"run.sh": MEG.replace("--num-layers 4", "--num-layers \u0664")}, {2}, ["--num-layers"]),
    "sbatch-nodes-5000-digits": (["check", "run.sh", "--cluster", "dgx-h100"], {
        "run.sh": "#SBATCH --nodes=" + "9" * 5000 + "\n" + MEG.replace("torchrun --nproc-per-node 8", "srun python")},
                                 {2}, ["#SBATCH --nodes"]),
    "megatron-layout-expansion": (["check", "run.sh", "--cluster", "dgx-h100"], {
        "run.sh": MEG.replace("--bf16", "--bf16 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout "
                              "'Et*99999999999|tL'")}, {2}, ["--pipeline-model-parallel-layout", "expands past"]),
    "megatron-moe-freq-5000-digits": (["check", "run.sh", "--cluster", "dgx-h100"], {
        "run.sh": MEG.replace("--bf16", "--bf16 --num-experts 4 --moe-layer-freq '([0]*" + "9" * 5000 + "+[1]*2)'")},
                                      {2}, ["--moe-layer-freq"]),
    "torchrun-nnodes-5000-digits": (["check", "run.sh", "--cluster", "dgx-h100"], {
        "run.sh": MEG.replace("--nproc-per-node 8", "--nnodes " + "9" * 5000 + " --nproc-per-node 8")}, {2},
                                    ["run.sh", "--nnodes"]),
    # torchtitan TOML: its own key names, strict types, bounded stage arithmetic
    "tt-huge-less-layers": (check("t.toml"), {"t.toml": TT_PP + "pipeline_parallel_layers_per_stage = 1\n"
                                              "pipeline_parallel_first_stage_less_layers = 1000000000001\n"},
                            {2}, ["pipeline_parallel_first_stage_less_layers"]),
    "tt-shard-degree-zero": (check("t.toml"), {"t.toml": "[parallelism]\ndata_parallel_shard_degree = 0\n"}, {2},
                             ["parallelism.data_parallel_shard_degree"]),
    "tt-list-for-degree": (check("t.toml"), {"t.toml": "[parallelism]\ntensor_parallel_degree = [8]\n"}, {2},
                           ["tensor_parallel_degree"]),
    "tt-string-boolean": (check("t.toml"), {"t.toml": TT.replace("[training]", "enable_async_tensor_parallel = "
                                                                 "'yes'\n[training]")}, {2},
                          ["enable_async_tensor_parallel"]),
    "tt-list-schedule": (check("t.toml"), {"t.toml": TT_PP + "pipeline_parallel_schedule = ['1F1B']\n"}, {2},
                         ["pipeline_parallel_schedule"]),
    "tt-list-reshard": (check("t.toml"), {"t.toml": TT.replace("[training]", "fsdp_reshard_after_forward = "
                                                                 "['x']\n[training]")}, {2},
                        ["fsdp_reshard_after_forward"]),
    "tt-table-twice": (check("t.toml"), {"t.toml": TT + "[parallelism]\ntensor_parallel_degree = 4\n"}, {2},
                       ["t.toml", "twice"]),
    # DeepSpeed JSON: its own key names, strict types
    "ds-gas-zero": (check("ds.json"), {"ds.json": js(DS, gradient_accumulation_steps=0)}, {2},
                    ["gradient_accumulation_steps"]),
    "ds-string-boolean": (check("ds.json"), {"ds.json": js(DS, bf16={"enabled": "true"})}, {2}, ["bf16.enabled"]),
    "ds-list-for-int": (check("ds.json"), {"ds.json": js(DS, train_batch_size=[8])}, {2}, ["train_batch_size"]),
    "ds-string-overlap": (check("ds.json"), {"ds.json": js(DS, zero_optimization={"stage": 1, "overlap_comm": "true"})},
                          {2}, ["zero_optimization.overlap_comm"]),
    "ds-list-optimizer": (check("ds.json"), {"ds.json": js(DS, optimizer={"type": ["adam"]})}, {2},
                          ["optimizer.type"]),
    "ds-string-checkpointing": (check("ds.json"), {"ds.json": js(DS, activation_checkpointing="yes")}, {2},
                                ["activation_checkpointing"]),
    "ds-duplicate-key-by-content": (check("ds.conf"), {"ds.conf": '{"train_batch_size": 8, "train_batch_size": 16}'},
                                    {2}, ["ds.conf", "twice"]),
    # plan files: the extras beside the specs
    "plan-reasons-string": (["report", "p.json"], {"p.json": js(PLAN, reasons="abc")}, {2}, ["reasons"]),
    "plan-reasons-numbers": (est("p.json"), {"p.json": js(PLAN, reasons=[1, 2])}, {2}, ["reasons"]),
    "plan-estimate-shape": (["export", "p.json", "--format", "megatron", "--out", "out"],
                            {"p.json": js(PLAN, estimate={"memory": 1})}, {2}, ["estimate.memory"]),
    "plan-alternatives-shape": (["report", "p.json"], {"p.json": js(PLAN, alternatives=[{"x": 1}])}, {2},
                                ["alternatives[0]"]),
    "plan-alternatives-string": (["check", "p.json"], {"p.json": js(PLAN, alternatives="x")}, {2}, ["alternatives"]),
    "plan-layout-5000-digits": (["check", "p.json"], {"p.json": js(PLAN, layout="tp=" + "9" * 5000)}, {2},
                                ["tp=", "18"]),
    "plan-search-shape": (["check", "p.json"], {"p.json": js(PLAN, search=5)}, {2}, ["search"]),
}


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow(f"still running after {HANG_S} s: a hang")


def _write(tmp_path: Path, files: dict) -> None:
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def invoke(argv: list[str]):
    """Run the CLI in-process under a SIGALRM hang guard; (result, None): the second item is kept for the
    callers' unpacking and is no timing."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        result = runner.invoke(app, argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return result, None


def assert_clean(result, _unused, codes: set, needles: list[str]) -> str:
    message = result.stderr + result.stdout
    assert result.exit_code in codes, (result.exit_code, message[:2000])
    assert "Traceback" not in message and "internal error" not in message
    for needle in needles:
        assert needle in message, (needle, message[:2000])
    return message


@pytest.mark.parametrize("case", CASES)
def test_hostile_input_is_refused_or_read(case: str, tmp_path: Path, monkeypatch):
    argv, files, codes, needles = CASES[case]
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, files)
    message = assert_clean(*invoke(argv), codes, needles)
    assert SECRET not in message


def test_preset_with_other_gpu_is_the_chassis_with_that_profile(tmp_path: Path, monkeypatch):
    """{preset: dgx-h100, gpu: a100-80gb} estimates exactly as dgx-h100 written out with the A100 profile inline."""
    import hardware_profiles as hp

    monkeypatch.chdir(tmp_path)
    inline = {**hp.load_cluster("dgx-h100").model_dump(mode="json"), "gpu": hp.load_gpu("a100-80gb").model_dump()}
    _write(tmp_path, {"c.json": js({"preset": "dgx-h100", "gpu": "a100-80gb"}), "inline.json": json.dumps(inline)})
    over, _ = invoke(est("llama3-8b", "c.json", "--json"))
    written, _ = invoke(est("llama3-8b", "inline.json", "--json"))
    h100, _ = invoke(est("llama3-8b", "dgx-h100", "--json"))
    a, b = json.loads(over.stdout), json.loads(written.stdout)
    said = [w.split(": ", 1)[1] for w in a.pop("warnings")], [w.split(": ", 1)[1] for w in b.pop("warnings")]
    assert a == b != json.loads(h100.stdout)
    assert said[0] == said[1] and "above the ampere generation's fastest" in said[0][0]  # an A100 behind NVLink 4


def test_fifo_model_and_device_are_refused(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("m.yaml")
    os.symlink("/dev/zero", "z.json")
    for argv in (est("m.yaml"), est("llama3-8b", "z.json"), ["check", "z.json"]):
        assert_clean(*invoke(argv), {2}, ["not a regular file"])


def test_dangling_symlink_names_the_link_not_its_target(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink(tmp_path / "hidden-target-name" / "x.yaml", "link.yaml")
    message = assert_clean(*invoke(est("link.yaml")), {2}, ["link.yaml"])
    assert "hidden-target-name" not in message


def test_symlink_to_a_secret_file_echoes_nothing(tmp_path: Path, monkeypatch):
    """`estimate shadow.yaml` with shadow.yaml -> a root-only file of `name:hash:...:` lines."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret").write_text(f"root:{SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    os.symlink(tmp_path / "secret", "shadow.yaml")
    for argv in (est("shadow.yaml"), est("llama3-8b", "shadow.yaml"), ["check", "shadow.yaml"], ["report", "shadow.yaml"],
                 est("llama3-8b", "dgx-h100", "--stack-file", "shadow.yaml")):
        message = assert_clean(*invoke(argv), {2}, ["does not look like a parplan"])
        assert SECRET not in message and "daemon" not in message


def _subprocess(argv: list[str], cwd: Path, env: dict) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "planner.cli", *argv], cwd=cwd, capture_output=True,
                          timeout=HANG_S, env={**os.environ, "PYTHONPATH": str(REPO), **env})
    return proc.returncode, proc.stdout.decode("ascii", "replace"), proc.stderr.decode("ascii", "replace")


@pytest.mark.parametrize("name", ["\u00e9\u6a21\u578b", "a\ud800b"])
def test_names_the_console_cannot_encode_are_escaped(name: str, tmp_path: Path):
    """A model name printed under an ASCII locale (or a lone surrogate anywhere) is escaped, not exit 3."""
    (tmp_path / "m.json").write_text(json.dumps({**MODEL, "name": name}))
    rc, out, err = _subprocess(["estimate", "m.json", "--cluster", "dgx-h100", "--layout", "tp=8",
                                "--global-batch", "8"], tmp_path, {"LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    assert rc == 0, err
    assert "\\u" in out or "\\x" in out


# ---- issue 36: nonsense on the command line, refused in ONE line naming the option and the value ----------

EST8 = ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "8"]
SWEEP8 = ["sweep", "llama3-8b", "--cluster", "dgx-h100", "--tokens", "1e9", "-j", "1"]
# id: (argv, exit code, substrings the one line must hold)
ONE_LINE = {
    "layout-empty": (EST8 + ["--layout", ""], 2, ["--layout '' names no key=value"]),
    "layout-empty-item": (EST8 + ["--layout", "tp=8,,pp=1"], 2, ["--layout 'tp=8,,pp=1'"]),
    "layout-newline": (EST8 + ["--layout", "tp=8\npp=1"], 2, ["--layout", "\\n"]),
    "layout-trailing-newline": (EST8 + ["--layout", "tp=8\n"], 2, ["--layout", "\\n"]),
    "global-batch-float": (EST8[:-2] + ["--layout", "tp=8", "--global-batch", "64.0"], 2, ["--global-batch '64.0'"]),
    "global-batch-arabic": (EST8[:-2] + ["--layout", "tp=8", "--global-batch=\u0668"], 2, ["--global-batch"]),
    "tokens-fullwidth": (EST8 + ["--layout", "tp=8", "--tokens", "\uff12"], 2, ["--tokens"]),
    "fp8-recipe-typo": (EST8 + ["--layout", "tp=8", "--fp8-recipe", "rowwis"], 2,
                        ["--fp8-recipe 'rowwis'", "did you mean rowwise"]),
    "precision-typo": (EST8 + ["--layout", "tp=8", "--precision", "bf61"], 2, ["--precision 'bf61'", "bf16"]),
    "sweep-arabic-nodes": (SWEEP8 + ["--nodes", "\u0668..16"], 2, ["--nodes"]),
    "sweep-step-past-end": (SWEEP8 + ["--nodes", "1..8:x999999999"], 2, ["--nodes '1..8:x999999999'", "jumps past"]),
    "sweep-fullwidth-price": (SWEEP8 + ["--nodes", "1", "--price-per-gpu-hour", "\uff12"], 2,
                              ["--price-per-gpu-hour"]),
    "sweep-fullwidth-budget": (SWEEP8 + ["--nodes", "1", "--price-per-gpu-hour", "2", "--budget", "\uff12M"], 2,
                               ["--budget"]),
    # Typer's own checks: one line, the option and the value, never the framed usage box
    "nodes-zero": (EST8 + ["--layout", "tp=8", "--nodes", "0"], 2, ["--nodes '0'", "greater than or equal to 1"]),
    "nodes-word": (EST8 + ["--layout", "tp=8", "--nodes=abc"], 2, ["--nodes 'abc'"]),
    "time-limit-nan": (["plan", "llama3-8b", "--cluster", "dgx-h100", "--time-limit", "nan"], 2,
                       ["--time-limit 'nan'", "finite"]),
    "time-limit-inf": (["plan", "llama3-8b", "--cluster", "dgx-h100", "--time-limit", "inf"], 2, ["finite"]),
    "unknown-option": (EST8 + ["--bogus"], 2, ["--bogus"]),
    "missing-argument": (["estimate"], 2, ["MODEL"]),
    "missing-option-value": (EST8 + ["--layout"], 2, ["--layout"]),
    "unknown-command": (["frob"], 2, ["frob"]),
    "extra-argument": (EST8 + ["x"], 2, ["x"]),
    "jobs-zero": (SWEEP8[:-2] + ["--nodes", "1", "-j", "0"], 2, ["--jobs '0'"]),
    # --debug anywhere on the line: the message stays, the traceback comes
    "debug-after-subcommand": (EST8 + ["--layout", "tp=8", "--debug", "--cluster", "nosuch"], 2, ["nosuch"]),
}


@pytest.mark.parametrize("case", ONE_LINE)
def test_command_line_mistake_is_one_line(case: str, monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")  # Typer's box grew to 10 lines here
    argv, code, needles = ONE_LINE[case]
    result, _ = invoke(argv)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if "--debug" in argv:
        assert result.exit_code == code and "Traceback" in result.stderr and needles[0] in lines[-1]
        return
    assert result.exit_code == code and len(lines) == 1, (result.exit_code, result.stderr)
    assert lines[0].startswith("parplan: error: ") and "╭" not in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_fp8_recipe_without_fp8_is_a_warning_not_silence():
    """--fp8-recipe with bf16 changes no number: warned (a thing read but not priced), not refused."""
    result, _ = invoke(EST8 + ["--layout", "tp=8", "--fp8-recipe", "rowwise", "--json"])
    assert result.exit_code == 0 and "--fp8-recipe rowwise is ignored: precision is bf16" in result.stderr
    quiet, _ = invoke(EST8 + ["--layout", "tp=8", "--fp8-recipe", "rowwise", "--precision", "fp8", "--json"])
    assert quiet.exit_code == 0 and "ignored" not in quiet.stderr


# ---- issue 36: calibrate refuses logs and parameters it cannot fit on, in one line ----------------------

GPT24 = {"name": "gpt-h2048-l24", "num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
         "vocab_size": 50304, "seq_length": 1024, "tied_embeddings": True}
A100_NODE = {"name": "a100-node", "gpu": "a100-80gb", "gpus_per_node": 8, "num_nodes": 1,
             "scale_up_gb_per_s": 300.0, "scale_out_gb_per_s": 12.5}


def _meg_log(step_ms: float, tp: int = 1) -> str:
    from log_render import megatron_log
    return megatron_log(tp=tp, pp=1, dp=8 // tp, mbs=4, gbs=32, layers=24, hidden=2048, heads=16, seq=1024,
                        step_ms=step_ms)


def _calibrate(tmp_path: Path, monkeypatch, files: dict, *argv: str):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"m.json": json.dumps(GPT24), "c.json": json.dumps(A100_NODE), **files})
    result, _ = invoke(["calibrate", *argv, "--model", "m.json", "--cluster", "c.json"])
    return result, [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("step_ms, shown", [(0.0, "took 0 s"), (-400.0, "took -"), (4e12, "took 1.2"),
                                            (1e-9, "took 0 s")])
def test_calibrate_refuses_zero_negative_and_absurd_step_times(step_ms, shown, tmp_path, monkeypatch):
    """Zero step times divided the fit's error by zero (exit 3); negative and absurd ones were fitted with
    a warning. Each is refused naming the file and the line."""
    result, lines = _calibrate(tmp_path, monkeypatch, {"bad.log": _meg_log(step_ms)}, "bad.log")
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("parplan: error: bad.log:") and shown in lines[0] and "between" in lines[0]


def test_calibrate_counts_the_same_log_once(tmp_path, monkeypatch):
    log = _meg_log(400.0)
    result, lines = _calibrate(tmp_path, monkeypatch, {"a.log": log}, "a.log", "./a.log", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["runs"]) == 1 and any("same file" in n and "counted once" in n for n in data["notes"])


def test_calibrate_refuses_logs_of_two_frameworks(tmp_path, monkeypatch):
    from log_render import torchtitan_log
    files = {"m.log": _meg_log(400.0), "t.log": torchtitan_log(local_batch=2, global_batch=16, seq=1024, tps=5000)}
    result, lines = _calibrate(tmp_path, monkeypatch, files, "m.log", "t.log")
    assert result.exit_code == 2 and len(lines) == 1 and "different frameworks" in lines[0], result.output
    assert "m.log: megatron" in lines[0] and "t.log: torchtitan" in lines[0]


@pytest.mark.parametrize("params, needle", [("", "unknown parameter ''"), ("gemm_scale,,attn_scale", "''"),
                                            ("gemm_scal", "'gemm_scal'"),
                                            ("gemm_scale,step_overhead_s", "2 parameters from 1 run")])
def test_calibrate_refuses_params_it_cannot_fit(params, needle, tmp_path, monkeypatch):
    result, lines = _calibrate(tmp_path, monkeypatch, {"a.log": _meg_log(400.0)}, "a.log", "--params", params)
    assert result.exit_code == 2 and len(lines) == 1 and "--params" in lines[0] and needle in lines[0], result.output


# ---- issue 36: files whose errors printed 2-4 lines, a name 10,000 characters long ----------------------

GPU0 = {"name": "g", "hbm_gib": 80, "hbm_gb_per_s": 2000, "bf16_tflops": 0, "fp16_tflops": 0}
MLA0 = {"q_lora_rank": 0, "kv_lora_rank": 0, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0, "v_head_dim": 0}
# id: (argv, files, substrings of the one line)
FILE_ONE_LINE = {
    "yaml-nul": (est("m.yaml"), {"m.yaml": "num_layers: 4\0\nhidden_size: 256\n"}, ["m.yaml", "#x0000"]),
    "ffn-zero": (est("m.json"), {"m.json": js(MODEL, ffn_hidden_size=0)}, ["m.json.ffn_hidden_size", "(got 0)"]),
    "tflops-zero": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER, gpu=GPU0)}, ["bf16_tflops", "and 1 more"]),
    "mla-zeros": (est("m.json"), {"m.json": js(MODEL, mla=MLA0)}, ["m.json.mla.", "(got 0)", "more"]),
    "spec-missing-fields": (est("m.json"), {"m.json": js({"name": "m"})}, ["missing", "num_layers", "vocab_size"]),
    "hf-empty": (est("config.json"), {"config.json": "{}"}, ["num_hidden_layers", "model_type", "intermediate_size"]),
    "hf-no-model-type": (est("config.json"), {"config.json": js({k: v for k, v in HF.items() if k != "model_type"})},
                         ["needs model_type", "llama"]),
    "name-10000": (est("m.json"), {"m.json": js(MODEL, name="x" * 10_000)}, ["m.json.name", "at most 200"]),
    "cluster-name-10000": (est("llama3-8b", "c.json"), {"c.json": js(CLUSTER, name="c" * 10_000)},
                           ["c.json.name", "at most 200"]),
}


@pytest.mark.parametrize("case", FILE_ONE_LINE)
def test_file_error_is_one_line(case: str, tmp_path: Path, monkeypatch):
    argv, files, needles = FILE_ONE_LINE[case]
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, files)
    result, _ = invoke(argv)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, (result.exit_code, result.stderr)
    assert "num_layers" not in lines[0] or not case.startswith("hf-")  # Hugging Face keys, not parplan's
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert len(lines[0]) < 400


def test_export_refuses_a_symlinked_out_folder(tmp_path: Path, monkeypatch):
    """`export --out link` wrote through the link into the folder it points to."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"p.json": js(PLAN)})
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", "link")
    result, _ = invoke(["export", "p.json", "--format", "megatron", "--out", "link"])
    assert result.exit_code == 2 and "--out: folder 'link' is a symbolic link" in result.stderr, result.output
    assert list((tmp_path / "real").iterdir()) == []


def test_slurm_script_keeps_a_name_with_a_line_break_on_one_line(tmp_path: Path, monkeypatch):
    """A model name 'm\\n#SBATCH --x=1' put an '#SBATCH' line inside the quoted --wandb-exp-name, which
    sbatch reads as a directive. It is written as one $'...' word, which bash reads back unchanged."""
    name = "m\n#SBATCH --x=1 'q' \\"
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, {"p.json": js(PLAN, model={**MODEL, "name": name}, layout={"tp": 1})})
    result, _ = invoke(["export", "p.json", "--format", "slurm", "--out", "out"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "launch_slurm.sbatch").read_text()
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert all(not line.startswith("#SBATCH --x") for line in directives) and len(directives) == 5
    word = next(line.strip().split(" ", 1)[1] for line in text.splitlines() if "--wandb-exp-name" in line)
    echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True)
    assert echoed.stdout == name


def test_a_misspelt_required_field_is_named_with_the_field_it_meant(tmp_path: Path, monkeypatch):
    """`scale_out_gbps` for scale_out_gb_per_s said only "missing required field(s) scale_out_gb_per_s (and 1 more:
    ...scale_out_gbps)"; a union branch's class name showed in the path (gpu.GPUProfile.hbm_gib). A new-user pass."""
    import hardware_profiles as hp

    monkeypatch.chdir(tmp_path)
    data = hp.load_cluster("dgx-h100").model_dump(mode="json")
    typo = {k: v for k, v in data.items() if k != "scale_out_gb_per_s"} | {"scale_out_gbps": 50}
    negative = {**data, "gpu": {**data["gpu"], "hbm_gib": -80}}
    _write(tmp_path, {"typo.json": json.dumps(typo), "neg.json": json.dumps(negative)})
    res, _ = invoke(est("llama3-8b", "typo.json"))
    assert "scale_out_gbps: unknown key; did you mean scale_out_gb_per_s? (required, and missing)" in res.stderr
    assert "and 1 more" not in res.stderr
    res, _ = invoke(est("llama3-8b", "neg.json"))
    assert "neg.json.gpu.hbm_gib:" in res.stderr and "GPUProfile" not in res.stderr


def test_a_hub_model_id_is_told_what_model_may_be():
    """`--model Qwen/Qwen3-4B-Instruct-2507` listed the presets only: a new user learned nothing of spec files or
    config.json (a new-user pass)."""
    res = CliRunner().invoke(app, ["estimate", "Qwen/Qwen3-4B-Instruct-2507", "--cluster", "dgx-h100"])
    assert res.exit_code == 2 and "unknown model preset" in res.stderr
    assert "Hugging Face config.json" in res.stderr and "download the config" in res.stderr


def test_a_tp_or_ep_that_does_not_divide_the_model_lists_those_that_do(tmp_path):
    """Phi-3-medium (40 heads, 10 KV heads, ffn 17920) at tp=8 and a 60-expert model at ep=8 were refused without the
    values that work (a new-user pass)."""
    spec = {"name": "phi3-like", "num_layers": 4, "hidden_size": 5120, "num_attention_heads": 40, "num_kv_heads": 10,
            "ffn_hidden_size": 17920, "vocab_size": 32064, "seq_length": 4096}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(spec))
    res = CliRunner().invoke(app, ["estimate", str(path), "--cluster", "dgx-h100", "--layout", "tp=8"])
    assert res.exit_code == 2 and "tp that fit this model's heads and widths on 8 GPUs: 1, 2" in res.stderr
    path.write_text(json.dumps({**spec, "num_kv_heads": 40, "num_experts": 60, "top_k": 4}))
    res = CliRunner().invoke(app, ["estimate", str(path), "--cluster", "dgx-h100", "--layout", "ep=8"])
    assert res.exit_code == 2 and "ep that divide it on 8 GPUs with etp*pp=1: 1, 2, 4" in res.stderr


def test_yaml_reads_scientific_notation_as_json_does(tmp_path):
    """A cluster file's scale_up_gb_per_s: 4.5e2 was refused as text ('Input should be a valid number') although the
    same number in JSON was read: PyYAML follows YAML 1.1, which wants 4.5e+2 (a new-user pass)."""
    from planner.files.safe_read import parse_mapping  # noqa: PLC0415

    assert parse_mapping("a: 4.5e2\nb: 5E-3\nc: 1.5e+3\nd: 12\ne: '4e2'\nf: 1e\ng: 3e45678\n", tmp_path / "x.yaml") == {
        "a": 450.0, "b": 0.005, "c": 1500.0, "d": 12, "e": "4e2", "f": "1e", "g": "3e45678"}  # g: a commit hash
    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: sci\ngpu: h100-sxm\ngpus_per_node: 8\nnum_nodes: 1\nscale_up_gb_per_s: 4.5e2\n"
                       "scale_out_gb_per_s: 5e1\n")
    res = CliRunner().invoke(app, ["estimate", "llama3-8b", "--cluster", str(cluster), "--layout", "tp=1,zero=3",
                                   "--global-batch", "64", "--json"])
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("text,said", [
    ("torchrun pretrain_gpt.py --num-layers 32 \\\r\n  --hidden-size 4096 --num-attention-heads 32\r\n",
     "Windows line endings (CRLF)"),
    ("torchrun pretrain_gpt.py --num-layers 32 \\ \n  --hidden-size 4096 --num-attention-heads 32\n",
     "line 1 has a blank after its line-continuation backslash"),
])
def test_a_broken_continuation_is_named_when_flags_go_missing(tmp_path, text, said):
    """CRLF endings or a blank after the backslash end the command on its first line (in bash too): the error said
    only '--num-attention-heads is missing' (a new-user pass)."""
    path = tmp_path / "train.sh"
    path.write_bytes(text.encode())
    res = CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100"])
    assert res.exit_code == 2 and "is missing (Megatron needs it)" in res.stderr and said in res.stderr


def test_two_training_launches_in_one_script_are_said(tmp_path):
    path = tmp_path / "two.sh"
    path.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 {GPT_FLAGS}\n"
                    f"torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 80 {GPT_FLAGS}\n")
    res = CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--json"])
    assert any("2 training launches" in w and "the first is priced" in w for w in json.loads(res.stdout)["warnings"])


def test_sbatch_nodes_and_the_launch_disagreeing_is_said(tmp_path):
    """#SBATCH --nodes=4 above `torchrun --nnodes 2` was priced as 2 nodes without a word (a new-user pass)."""
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --gpus-per-node=8\n"
                    f"torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --num-layers 32 {GPT_FLAGS}\n")
    res = CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--json"])
    doc = json.loads(res.stdout)
    assert doc["read"]["cluster"]["num_nodes"] == 2
    assert any("#SBATCH allocates 4 node(s) but the launch starts 2" in w for w in doc["warnings"])


def test_grad_accum_over_a_plan_says_the_batch_it_makes():
    """`check plan.json --grad-accum 3` priced a global batch of 24 where the plan has 512, without a word."""
    doc = json.loads(EXAMPLE_PLAN.read_text())
    res = CliRunner().invoke(app, ["check", str(EXAMPLE_PLAN), "--grad-accum", "3", "--json"])
    said = [w for w in json.loads(res.stdout)["warnings"] if w.startswith("--grad-accum: global batch")]
    assert said and f"not the config's {doc['train']['global_batch_size']}" in said[0]


def test_small_slips_get_the_fix_in_the_message(tmp_path):
    """--precision FP8 offered no suggestion, stage_layers=30/2 did not show the list syntax, and report's errors
    named 'plan:' instead of the file (a new-user pass)."""
    res = CliRunner().invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--precision", "FP8"])
    assert res.exit_code == 2 and "did you mean fp8?" in res.stderr
    res = CliRunner().invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "-l", "pp=2,stage_layers=30/2"])
    assert res.exit_code == 2 and "e.g. stage_layers=19:20:20:21" in res.stderr
    plan = json.loads(EXAMPLE_PLAN.read_text())
    del plan["layout"]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(plan))
    res = CliRunner().invoke(app, ["report", str(path)])
    assert res.exit_code == 2 and f"{path}: a report needs a plan file with a 'layout'" in res.stderr


def test_an_option_of_thousands_of_digits_is_called_that():
    """--nodes with 5,000 digits was called 'must be a finite number' (float() made it inf): a new-user pass."""
    res = CliRunner().invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1" * 5000])
    assert res.exit_code == 2 and "a number of 5,000 digits" in res.stderr


def test_an_echoed_launch_is_not_a_second_training(tmp_path):
    """`echo $CMD` before `$CMD` was warned as '2 training launches' (a review); so were tools/ scripts."""
    path = tmp_path / "echo.sh"
    path.write_text(f'CMD="torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 {GPT_FLAGS}"\necho $CMD\n$CMD\n'
                    'python tools/checkpoint/convert.py --num-layers 32\n')
    res = CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--json"])
    assert not any("training launches" in w for w in json.loads(res.stdout)["warnings"])
    res = CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--recompute", "Full"])
    assert res.exit_code == 2 and "did you mean full?" in res.stderr
