"""What parplan assumes when a torchtitan job file leaves a key out, held against torchtitan's own code
(planner/frameworks/torchtitan/config_values.py tt_zero).

Sources: torchtitan 0.1.0-0.2.2 distributed/parallel_dims.py (fsdp_enabled = dp_shard > 1 or cp > 1),
models/llama3/infra/parallelize.py (FSDP2 over dp_shard * cp, else DDP over dp_replicate; apply_fsdp
reshard_after_forward = not pp_enabled under "default"); torchtitan 0.3.0 models/llama3/parallelize.py (fully_shard
over the dp_shard * cp "fsdp" mesh).
"""

from __future__ import annotations

import pytest

from costmodels.layout import resolve_layout
from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes
from planner.frameworks.torchtitan import config_values

TRAIN = "[training]\nlocal_batch_size = 1\nseq_len = 4096\n"


def _load(tmp_path, text: str, model: str = "llama3-8b"):
    path = tmp_path / "job.toml"
    path.write_text(text)
    notes = ReadNotes()
    prob = load_native(path, model, "dgx-h100", 1, notes=notes)
    return resolve_layout(prob.model, prob.cluster, prob.train, prob.layout), notes.notes


def test_context_parallel_alone_shards_the_model_states(tmp_path):
    """cp 8 on 8 GPUs leaves data_parallel_shard_degree -1 at 1, but torchtitan's FSDP runs over dp_shard * cp:
    the states are sharded 8 ways (parplan read zero 0: every rank priced with the whole model's states)."""
    lay, _ = _load(tmp_path, "[parallelism]\ncontext_parallel_degree = 8\n" + TRAIN)
    assert (lay.cp, lay.dp, lay.zero) == (8, 1, 3)
    assert lay.dense_shards == 8


def test_replicas_with_context_parallel_are_hsdp_over_cp(tmp_path):
    """dp_replicate 2 x cp 4, no dp_shard (-1 -> 1): HSDP, each shard group the 4 cp ranks."""
    lay, _ = _load(tmp_path, "[parallelism]\ndata_parallel_replicate_degree = 2\ncontext_parallel_degree = 4\n"
                    + TRAIN)
    assert (lay.zero, lay.shard_group, lay.replicas) == (3, 4, 2)


@pytest.mark.parametrize("policy", ["always", "never"])
def test_ddp_shards_nothing_whatever_the_reshard_policy(tmp_path, policy):
    """dp_replicate 8 alone is DDP (apply_ddp): fsdp_reshard_after_forward is never read (parplan priced ZeRO 2/3)."""
    lay, _ = _load(tmp_path, "[parallelism]\ndata_parallel_replicate_degree = 8\n"
                    f'fsdp_reshard_after_forward = "{policy}"\n' + TRAIN)
    assert (lay.dp, lay.zero, lay.shard_group) == (8, 0, None)


def test_fsdp_defaults_left_as_they_were(tmp_path):
    """What was right stays: dp_shard -1 = the rest, sharded and resharded after forward (zero 3); with PP the
    "default" policy keeps the weights gathered, which zero 3 with pp > 1 prices (costmodels.memory.memory_zero)."""
    lay, _ = _load(tmp_path, "[parallelism]\n" + TRAIN)
    assert (lay.dp, lay.zero, lay.shard_group) == (8, 3, None)
    lay, _ = _load(tmp_path, "[parallelism]\npipeline_parallel_degree = 2\n" + TRAIN.replace("= 1", "= 8"))
    assert (lay.dp, lay.zero, lay.mbs) == (4, 3, 1)
    assert config_values.tt_zero("default", 1, 1) == 0 and config_values.tt_zero("never", 2, 1) == 2


def test_an_unknown_reshard_policy_names_the_key(tmp_path):
    with pytest.raises(UserError, match="fsdp_reshard_after_forward='sometimes'"):
        _load(tmp_path, '[parallelism]\nfsdp_reshard_after_forward = "sometimes"\n' + TRAIN)
