"""What parplan assumes when a torchtitan job file leaves a key out, held against torchtitan's own code
(planner/frameworks/torchtitan/config_values.py tt_zero).

Sources: torchtitan 0.1.0-0.2.2 distributed/parallel_dims.py (fsdp_enabled = dp_shard > 1 or cp > 1),
models/llama3/infra/parallelize.py (FSDP2 over dp_shard * cp, else DDP over dp_replicate; apply_fsdp
reshard_after_forward = not pp_enabled under "default"); torchtitan 0.3.0 models/llama3/parallelize.py (fully_shard
over the dp_shard * cp "fsdp" mesh).
"""

from __future__ import annotations

import pytest

from costmodels.estimate import estimate
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


# ---- torchtitan 0.3's chunked loss ---------------------------------------------------------------------------------

LAUNCH = "torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_8b {extra}\n"


def _launch(tmp_path, extra: str = ""):
    path = tmp_path / "run.sh"
    path.write_text(LAUNCH.format(extra=extra))
    return load_native(path, "llama3-8b", "dgx-h100", 1, notes=ReadNotes())


def test_0_3_presets_chunk_their_loss_in_eight(tmp_path):
    """Every 0.3.0 LLM preset builds ChunkedLossWrapper.Config (num_chunks 8): run through torchtitan's own
    ConfigManager on CPU for the presets parplan carries (2026-11-27). Before, the launch was priced with the whole
    micro-batch's logits at once: 11 GiB more on the last stage of llama3_8b (8,192 tokens x 128,256 logits)."""
    chunked, whole = _launch(tmp_path), _launch(tmp_path, "--loss.num_chunks 1")
    assert chunked.train.loss_chunks == 8 and whole.train.loss_chunks == 1
    peak = {n: estimate(p.model, p.cluster, p.train, p.layout).memory.peak_bytes for n, p in
            (("chunked", chunked), ("whole", whole))}
    assert peak["whole"] - peak["chunked"] > 8 * 2**30


def test_a_chunk_count_that_is_no_whole_number_names_the_flag(tmp_path):
    with pytest.raises(UserError, match="loss.num_chunks=0"):
        _launch(tmp_path, "--loss.num_chunks 0")


def test_the_chunked_transient_is_one_chunk_of_logits_and_the_fp32_hidden_gradient():
    """Hand-worked: the transient of N chunks is the whole-logit transient / N plus 4 bytes per token and hidden
    unit (the GradAccumulator), for the same layout (tp 1, one micro-batch of 8,192 tokens)."""
    import hardware_profiles as hp
    from costmodels.layout import Layout
    from costmodels.memory import loss_transient_bytes
    from costmodels.train_spec import TrainSpec

    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", 1)
    whole_t = hp.resolve_train(TrainSpec(global_batch_size=8, seq_length=8192), "torchtitan-eager")
    chunked_t = whole_t.model_copy(update={"loss_chunks": 8})
    lay = resolve_layout(model, cluster, whole_t, Layout(dp=8, zero=3, mbs=1, recompute="full"))
    whole, chunked = (loss_transient_bytes(model, t, lay, 0) for t in (whole_t, chunked_t))
    working = whole_t.stack_spec.memory.logit_bytes(False, 1) * 8192 * model.vocab_size - whole  # what it exceeds
    assert chunked == pytest.approx(whole / 8 + 4 * 8192 * 4096 - working * 7 / 8, rel=1e-9)


def test_the_0_3_exporter_writes_the_chunks_the_plan_priced():
    """A plan priced with 8 chunks launches with 8, one priced whole with 1 (torchtitan's presets would chunk it)."""
    from planner.exporters.common import plan_from_doc
    from planner.frameworks.torchtitan.export import launcher
    from tests.test_exporters import make_doc

    for chunks in (1, 8):
        doc = make_doc(zero=3, mbs=1, gbs=64, train={"loss_chunks": chunks})
        assert f"--loss.num_chunks {chunks} " in launcher(plan_from_doc(doc)).replace("\\\n", "")


def test_the_0_2_job_file_of_a_ddp_plan_with_tensor_parallelism_says_0_2_cannot_run_it():
    """torchtitan 0.2.2 parallelize_llama: DDP only over the whole world; the 0.2 file of such a plan says so and
    points at the 0.3 launch; an FSDP plan's file does not."""
    from planner.exporters.common import plan_from_doc
    from planner.frameworks.torchtitan.export import ddp_02_note
    from tests.test_exporters import make_doc

    assert "cannot run this plan" in ddp_02_note(plan_from_doc(make_doc(zero=0, tp=2, sp=True, mbs=1, gbs=64)))[0]
    assert ddp_02_note(plan_from_doc(make_doc(zero=3, tp=2, sp=True, mbs=1, gbs=64))) == []


def test_0_3_launch_without_sequence_parallelism_keeps_the_activations_whole(tmp_path):
    """torchtitan 0.3.0's parallelism.enable_sequence_parallel (default true) can be turned off from the launch
    line; before, the reader always priced tp > 1 with sequence parallelism."""
    on = _launch(tmp_path, "--parallelism.tensor_parallel_degree 2")
    off = _launch(tmp_path, "--parallelism.tensor_parallel_degree 2 --parallelism.no-enable_sequence_parallel")
    assert on.layout.sp and not off.layout.sp


def test_the_0_3_launch_of_a_plan_without_sequence_parallelism_turns_it_off():
    """The plan priced tp 2 with sp=0 (activations whole): the 0.3.0 launch says
    --parallelism.no-enable_sequence_parallel rather than torchtitan's default true."""
    from planner.exporters.common import plan_from_doc
    from planner.frameworks.torchtitan.export import launcher
    from tests.test_exporters import make_doc

    text = launcher(plan_from_doc(make_doc(zero=3, tp=2, sp=False, mbs=1, gbs=64)))
    assert "--parallelism.no-enable_sequence_parallel" in text
    assert "--parallelism.enable_sequence_parallel" in launcher(plan_from_doc(make_doc(zero=3, tp=2, sp=True,
                                                                                        mbs=1, gbs=64)))


@pytest.mark.parametrize("extra, named", [
    ("--loss.num_chunks 7", "loss.num_chunks=7 does not divide the 8192 tokens"),
    ("--parallelism.enable_sequence_parallel maybe", "enable_sequence_parallel='maybe'"),
    ("--training.disable_cuda_graphs=maybe", "disable_cuda_graphs='maybe'"),
])
def test_0_3_values_torchtitan_refuses_exit_2_naming_the_key(tmp_path, extra, named):
    """ChunkedLossWrapper needs chunks that divide a rank's sequence (components/loss.py); tyro takes only booleans
    for the two switches, and a one-GPU-wide tensor-parallel degree does not skip the check."""
    with pytest.raises(UserError, match=named):
        _launch(tmp_path, extra)
