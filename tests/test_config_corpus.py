"""`parplan check` on real public launch configs, unedited (tests/data/configs, SOURCES.tsv gives each
file's repository, path and commit; LICENSES.md their licences).

Each row is the command line a user would give for the file: the cluster it ran on (the configs
README), --nodes where the script leaves the count to the environment, --model where the file has no
model shape. Every file must be read as published: exit 0 (fits) or 1 (does not fit), never 2, never
a traceback. Where the run is known to have fitted (configs README: BLOOM-176B on 48 x 8 A100-80GB;
NVIDIA's Llama 3 8B FP8 examples on one DGX-H100; the torchtitan presets on their stated hardware;
Megatron's SC'21 Table 1, 1.7B on 32 A100-80GB, Narayanan et al. 2021), the verdict must be "fits".
A row may be marked xfail(strict=True) with the reason it is still misjudged; none is today.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

DATA = Path(__file__).parent / "data" / "configs"
MODELS = Path(__file__).parent / "data" / "config_models"
runner = CliRunner()


@dataclass
class Row:
    file: str
    args: list[str]
    fits: bool = False  # known to have run (configs README)
    xfail: str = ""
    codes: set = field(default_factory=lambda: {0, 1})


ROWS = [
    Row("bs_tr11_176B.slurm", ["--cluster", "dgx-a100", "--nodes", "48"], fits=True),
    Row("bs_tr11f_6B3.slurm", ["--cluster", "dgx-a100"]),  # ran on 32 x 4 V100-32GB; no V100 preset
    Row("bs_tr1_13B.slurm", ["--cluster", "dgx-a100"]),  # ran on 128 x 4 V100-32GB
    Row("bs_tr11_176B_ds_config.json", ["--model", "bloom-176b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("ds_alpaca_offload_z3.json", ["--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("ds_fastchat_s3.json", ["--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("ds_hf_zero2_bf16.json", ["--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("ds_hf_zero3.json", ["--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("dsx_training_autotuning_hf_dsconfigs_ds_config_z3.json",
        ["--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("dsx_training_pipeline_parallelism_ds_config.json",
        ["--model", "llama2-7b", "--cluster", "dgx-a100", "--nodes", "1"]),
    Row("mlm_gpt3_175b.sh", ["--cluster", "dgx-h100", "--nodes", "16"]),  # tp8 x pp16 = 128 GPUs
    Row("mlm_llama3_8b_fp8.sh", ["--cluster", "dgx-h100"], fits=True),
    Row("mlm_llama3_8b_mfsdp_fp8.sh", ["--cluster", "dgx-h100"], fits=True),
    Row("mlm_mfsdp_deepseek_v3.sbatch.sh", ["--cluster", "dgx-h100", "--nodes", "32"]),  # its #SBATCH are placeholders
    Row("mlm_mixtral_8x7b.sh", ["--cluster", "dgx-h100", "--nodes", "4"]),  # ep8 x pp4 = 32 GPUs
    # published with tp8 x pp16 and 24 layers: Megatron itself refuses (num_layers % pp); one line, exit 2
    Row("mlm_bert_340m.sh", ["--cluster", "dgx-h100", "--nodes", "16", "--model", str(MODELS / "bert-340m.yaml")],
        codes={2}),
    Row("tt_llama3_8b.toml", ["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1"], fits=True),
    Row("tt_llama3_70b.toml", ["--model", "llama3-70b", "--cluster", "dgx-a100", "--nodes", "8"], fits=True),
    Row("tt_llama3_405b.toml", ["--model", "llama3.1-405b", "--cluster", "dgx-h100", "--nodes", "16"], fits=True),
    Row("tt_qwen3_32b.toml", ["--model", "qwen3-32b", "--cluster", str(MODELS / "h100-96gb-node.yaml")], fits=True),
    # torchtitan issue #1789: 8 x H100 80 GB
    Row("tt_deepseek_v3_16b.toml", ["--model", "deepseek-v3-16b", "--cluster", "dgx-h100", "--nodes", "1"], fits=True),
]


def _check(path: Path, args: list[str]):
    result = runner.invoke(app, ["check", str(path), *args])
    message = result.stderr + result.stdout
    assert "Traceback" not in message and "internal error" not in message, message[-2000:]
    return result.exit_code, message


def _marks(row: Row):
    return [pytest.mark.xfail(strict=True, reason=row.xfail)] if row.xfail else []


@pytest.mark.parametrize("row", [pytest.param(r, id=r.file, marks=_marks(r)) for r in ROWS])
def test_read_as_published(row: Row):
    code, message = _check(DATA / row.file, row.args)
    assert code in row.codes, (code, message[-1500:])
    if row.fits:
        assert code == 0, message[-1500:]
    if code == 2:
        assert len([line for line in message.splitlines() if "error" in line]) == 1, message


def test_every_config_has_a_row():
    listed = {row.file for row in ROWS} | {"mlm_sc21_table1.sh", "mlm_sc21_CONFIG.sh", "mlm_sc21_SBATCH.sh",
                                           "README.md", "SOURCES.tsv", "LICENSES.md"}
    assert {p.name for p in DATA.iterdir()} == listed
    sources = {line.split("\t")[0] for line in (DATA / "SOURCES.tsv").read_text().splitlines() if line.strip()}
    assert sources == {p.name for p in DATA.iterdir()} - {"README.md", "SOURCES.tsv", "LICENSES.md"}


def _sc21_layout(tmp_path: Path) -> Path:
    """Megatron's sc21 folder as published: run_table_1.sh sources CONFIG.sh and SBATCH.sh beside it."""
    for ours, theirs in (("mlm_sc21_table1.sh", "run_table_1.sh"), ("mlm_sc21_CONFIG.sh", "CONFIG.sh"),
                         ("mlm_sc21_SBATCH.sh", "SBATCH.sh")):
        shutil.copy(DATA / ours, tmp_path / theirs)
    return tmp_path / "run_table_1.sh"


def test_sc21_table1_in_its_folder_picks_the_1_7b_model(tmp_path):
    """MODEL_SIZE=1.7B selects TP=1 PP=1 MBS=16 GBS=512 NLS=24 HS=2304 NAH=24 NNODES=4 by `if [ ... == ]`;
    CONFIG.sh turns them into MEGATRON_PARAMS, SBATCH.sh submits `sbatch --nodes=4`. Narayanan et al. 2021
    Table 1 ran it on 32 A100-80GB: it fits."""
    from planner.files.native import load_native
    prob = load_native(_sc21_layout(tmp_path), None, "dgx-a100", None)
    assert (prob.model.num_layers, prob.model.hidden_size, prob.model.num_attention_heads) == (24, 2304, 24)
    assert (prob.layout.tp, prob.layout.pp, prob.layout.mbs, prob.train.global_batch_size) == (1, 1, 16, 512)
    assert prob.cluster.num_nodes == 4 and prob.model.vocab_size == 50304  # GPT-2 BPE (--merge-file) padded
    code, message = _check(tmp_path / "run_table_1.sh", ["--cluster", "dgx-a100"])
    assert code == 0, message[-1500:]


def test_sc21_table1_as_vendored_reads_its_renamed_siblings():
    """Vendored flat (mlm_sc21_table1.sh beside mlm_sc21_CONFIG.sh and mlm_sc21_SBATCH.sh, as in the
    reference folder), `. CONFIG.sh` finds the file under the script's prefix and says so: read, and it fits."""
    code, message = _check(DATA / "mlm_sc21_table1.sh", ["--cluster", "dgx-a100"])
    assert code == 0, message[-1500:]
    assert "sources 'CONFIG.sh': read 'mlm_sc21_CONFIG.sh' beside the script" in message


def test_sc21_table1_alone_names_the_missing_file(tmp_path):
    """Without CONFIG.sh under either name: one warning naming it, then one error line."""
    shutil.copy(DATA / "mlm_sc21_table1.sh", tmp_path / "mlm_sc21_table1.sh")
    code, message = _check(tmp_path / "mlm_sc21_table1.sh", ["--cluster", "dgx-a100"])
    assert code == 2
    assert "CONFIG.sh', not found beside the script" in message and "no Megatron launch found" in message
    assert len([line for line in message.splitlines() if "error" in line]) == 1


@pytest.mark.parametrize("fragment", ["mlm_sc21_CONFIG.sh", "mlm_sc21_SBATCH.sh"])
def test_sourced_fragments_alone_are_one_error_line(fragment):
    """The files run_table_1.sh sources are no launch on their own: exit 2 with one line, no traceback."""
    code, message = _check(DATA / fragment, ["--cluster", "dgx-a100"])
    assert code == 2 and len([line for line in message.splitlines() if "error" in line]) == 1


def test_bloom_reads_as_bigscience_trained_it(capsys):
    """tr11-176B-ml: tp4 pp12 dp8 mbs2 gbs2048 on 48 x 8 A100-80GB, bf16 through DeepSpeed's BF16_Optimizer
    (ZeRO stage 0 in the config = its own stage-1 equivalent), --checkpoint-activations, 70 layers split by
    'type:transformer|embedding' as 5, 6 x 10, 5, vocabulary padded to 250880 (BigScience tr11 README)."""
    from planner.files.native import load_native
    prob = load_native(DATA / "bs_tr11_176B.slurm", None, "dgx-a100", 48)
    lay, model, train = prob.layout, prob.model, prob.train
    assert (lay.tp, lay.pp, lay.mbs, lay.zero, lay.recompute) == (4, 12, 2, 1, "full")
    assert lay.stage_layers == [5] + [6] * 10 + [5]
    assert (model.num_layers, model.hidden_size, model.num_attention_heads, model.vocab_size) == (70, 14336, 112,
                                                                                                 250880)
    assert (train.global_batch_size, train.precision, train.grad_dtype) == (2048, "bf16", "fp32")
    assert prob.cluster.num_gpus == 384
    assert "--nodes 48 overrides the script's 24" in capsys.readouterr().err
