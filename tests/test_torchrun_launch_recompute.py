"""parplan's torchrun launch (planner.frameworks.fsdp.export) read back by check (planner.files.parplan_launch)."""

from __future__ import annotations

from planner.exporters import run_export
from planner.files.native import load_native
from tests.test_exporters import make_doc


def test_the_torchrun_launch_carries_the_recompute_it_priced_and_names_its_model(tmp_path):
    """A plan with --recompute-num-layers 2 (block) or named selective modules: the torchrun launch wrote only
    --recompute full / selective, and check read every layer recomputed; check also needed --model though
    PARPLAN_MODEL names a preset."""
    for name, layout, want in (
            ("block", dict(pp=2, zero=1, mbs=1, recompute="full", recompute_num_layers=2, recompute_method="block"),
             ("full", 2, "block", None)),
            ("modules", dict(tp=2, sp=True, zero=1, mbs=1, recompute="selective",
                             recompute_modules=["core_attn", "mlp"]), ("selective", None, "uniform", ["core_attn", "mlp"]))):
        run_export(make_doc(**layout), "torchrun", tmp_path / name, force=True)
        lay = load_native(tmp_path / name / "launch_torchrun.sh", None, "dgx-h100", None).layout
        assert (lay.recompute, lay.recompute_num_layers, lay.recompute_method, lay.recompute_modules) == want
