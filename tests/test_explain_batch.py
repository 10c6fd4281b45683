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


def test_fewer_sequences_than_gpus_say_nothing():
    assert _batch_note(Layout(tp=8, pp=16, dp=64, mbs=1, num_microbatches=16)) == []  # 1024 sequences, 8192 GPUs


def test_the_nearest_batch_may_be_the_smaller():
    lay = Layout(pp=9, dp=8, mbs=1, num_microbatches=65)  # 520 sequences on 72 GPUs: 504 is nearer than 576
    assert _batch_note(lay)[0].endswith("a batch of 504 would allow it")

