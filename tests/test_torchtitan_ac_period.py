"""torchtitan 0.1-0.2's layer-period activation checkpointing (selective_ac_option "k") priced as full
recompute of the blocks it wraps (planner/frameworks/torchtitan/config_toml.py recompute_fields).

torchtitan 0.2.2 distributed/activation_checkpoint.py _apply_layer_sac: a process-wide counter, incremented
before the test, wraps a block when `count % k == 0` (k = 0: every block), so a rank holding n blocks
recomputes n // k of them, counting on across its pipeline chunks. Defaults (config/job_config.py
ActivationCheckpoint): mode "selective", selective_ac_option "2"."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodels.estimate import estimate_memory
from costmodels.layout import Layout, resolve_layout
from planner.files import loading
from planner.files.native import load_native
from planner.frameworks.torchtitan import config_toml as tr

PATH = Path("job.toml")


def _ac(option=None, mode="selective") -> dict:
    sec = {"mode": mode}
    if option is not None:
        sec["selective_ac_option"] = option
    return {"activation_checkpoint": sec}


def test_every_second_block_of_a_32_layer_model_is_16_recomputed():
    notes: list[str] = []
    got = tr.recompute_fields(_ac("2"), PATH, {"pp": 1}, 32, notes)
    assert got == {"recompute": "full", "recompute_method": "block", "recompute_num_layers": 16}
    assert any("16 of 32 layers" in n and "_apply_layer_sac" in n for n in notes)


def test_a_period_counts_each_ranks_blocks():
    # torchtitan's default split of 32 layers over 4 stages: [8, 9, 8, 7]; k = 3 runs 2, 3, 2, 2 recomputed
    notes: list[str] = []
    lay = {"pp": 4, "vpp": 1, "stage_layers": [8, 9, 8, 7]}
    assert tr.recompute_fields(_ac("3"), PATH, lay, 32, notes)["recompute_num_layers"] == 2  # the first rank's 8 // 3
    assert any("2 of 8, 3 of 9, 2 of 8, 2 of 7" in n and "rank 1 priced 2" in n for n in notes)
    # two chunks per rank: the counter runs on across them, 8 // 2 = 4 on rank 0 -> 2 per chunk
    notes = []
    got = tr.recompute_fields(_ac("2"), PATH, {**lay, "vpp": 2}, 32, notes)
    assert got["recompute_num_layers"] == 2 and any("rank 3 priced 4" in n for n in notes)


@pytest.mark.parametrize("option,want", [("0", "full"), ("1", "full"), ("op", "selective"), ("40", "none")])
def test_other_options(option, want):
    assert tr.recompute_fields(_ac(option), PATH, {"pp": 1}, 32, [])["recompute"] == want


def test_no_section_is_torchtitans_default_every_second_block_and_says_so():
    notes: list[str] = []
    got = tr.recompute_fields({}, PATH, {"pp": 1}, 32, notes)
    assert got["recompute_num_layers"] == 16
    assert any("not given" in n and "'selective'" in n and "'2'" in n for n in notes)
    notes = []
    tr.recompute_fields(_ac(None), PATH, {"pp": 1}, 32, notes)  # mode given, the option left out
    assert any("selective_ac_option not given" in n for n in notes)
    notes = []
    assert tr.recompute_fields(_ac(mode="full"), PATH, {"pp": 1}, 32, notes) == {"recompute": "full"}
    assert notes == []


def test_memory_of_every_second_block_lies_between_full_and_none(tmp_path):
    # llama3 8B, FSDP over 8 H100s, local batch 2 at 8192 tokens
    path = tmp_path / "job.toml"
    path.write_text('[parallelism]\ndata_parallel_shard_degree = 8\n[training]\nlocal_batch_size = 2\n'
                    'seq_len = 8192\n[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n')
    prob = load_native(path, "llama3-8b", "dgx-h100", 1)
    base = prob.layout.model_dump()

    def act(**fields) -> float:
        lay = loading.validate(Layout, {**base, **fields}, "layout", from_file=False)
        mem = estimate_memory(prob.model, prob.cluster, prob.train, resolve_layout(prob.model, prob.cluster,
                                                                                   prob.train, lay))
        return mem.stages[0].activations_bytes

    every2 = act(**tr.recompute_fields(_ac("2"), PATH, {"pp": 1}, 32, []))
    full, none, op = act(recompute="full"), act(recompute="none"), act(recompute="selective")
    assert full < op < every2 < none
    assert abs(every2 - (full + none) / 2) < 0.05 * none  # half the layers kept whole, half as their input
