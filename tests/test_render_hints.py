"""The allocator hint under memory pressure is not given to a run that already sets it (a new-user pass: a script
with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True was told that setting helps)."""

from __future__ import annotations

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.report.render import _pressure_text


def test_the_expandable_hint_goes_only_to_runs_without_it():
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100")
    lay = Layout(dp=8, zero=1, mbs=1)
    for expandable, said in ((False, True), (True, False)):
        train = hp.resolve_train(TrainSpec(global_batch_size=8, expandable_segments=expandable))
        mem = estimate(model, cluster, train, lay).memory
        assert mem.expandable_segments is expandable
        text = _pressure_text(mem, mem.hbm_bytes - mem.margin_bytes)
        assert ("expandable_segments:True helps" in text) is said


def test_a_whole_run_of_a_layout_that_does_not_fit_says_so():
    """estimate --tokens printed days and GPU-hours of a layout 38 GiB short with no word beside them."""
    from typer.testing import CliRunner

    from planner.cli import app

    res = CliRunner().invoke(app, ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--layout",
                                   "tp=1,dp=8,mbs=1,zero=0", "--global-batch", "64", "--tokens", "1e12"])
    assert "does not fit: it cannot start as it is" in res.stderr
