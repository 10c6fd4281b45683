"""The reasons name a global batch that rules out data parallelism over every GPU (planner.search.explain):
Llama 3 8B on one GB200 NVL72 rack with a batch of 512 won pp=9 at 51% MFU and said only "binding constraint:
time", though a batch of 504 or 576 runs dp=72."""

from __future__ import annotations

from costmodels.layout import Layout
from planner.search.explain import _batch_note


def test_a_batch_that_does_not_divide_over_the_gpus_is_named_with_the_nearest_that_does():
    lay = Layout(pp=9, dp=8, mbs=1, num_microbatches=64)  # 512 sequences on 72 GPUs
    assert _batch_note(lay) == ["global batch 512 is not a multiple of the 72 GPUs, so no layout runs data "
                                "parallelism over all of them (dp=72); a batch of 504 would allow it"]
    assert _batch_note(Layout(pp=8, dp=9, mbs=1, num_microbatches=64)) == []  # 576 divides over 72
    assert _batch_note(Layout(dp=64, mbs=8, num_microbatches=1)) == []  # data parallel already


def test_fewer_sequences_than_gpus_say_how_many_share_each():
    """512 sequences on 64 GB200 NVL72 racks (4,608 GPUs) won at 26.8% MFU with no word on the batch (a new-user
    pass): 9 GPUs at least share each sequence."""
    assert _batch_note(Layout(tp=9, dp=512, mbs=1, num_microbatches=1)) == [  # 512 sequences, 4608 GPUs
        "global batch 512 is smaller than the 4,608 GPUs, so at least 9 of them share each sequence (tp x pp x cp); "
        "a batch of 4,608 or more would allow data parallelism over all of them"]
    # Llama 3.1 405B on 8,192 GPUs with 1,024 sequences: memory, not the batch, splits it 128 ways (dp 64)
    assert _batch_note(Layout(tp=8, pp=16, dp=64, mbs=1, num_microbatches=16)) == []
    assert _batch_note(Layout(tp=1, pp=1, dp=8, mbs=1, num_microbatches=1)) == []  # 8 on 8: nothing to say


def test_the_nearest_batch_may_be_the_smaller():
    lay = Layout(pp=9, dp=8, mbs=1, num_microbatches=65)  # 520 sequences on 72 GPUs: 504 is nearer than 576
    assert _batch_note(lay)[0].endswith("a batch of 504 would allow it")

