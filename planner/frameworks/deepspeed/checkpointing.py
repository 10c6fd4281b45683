"""What a DeepSpeed JSON says, and does not say, about activation recompute and pipeline stages: the
assumptions `check` makes when reading it (ReadNotes.assumed) and the approximations it names (ReadNotes.notes).
planner.frameworks.deepspeed.config_json.ds_recompute sets the layout; this module says why.

Sources (DeepSpeed 0.19.8):
- `activation_checkpointing` (runtime/activation_checkpointing/config.py) only configures
  deepspeed.checkpointing (partitioning, CPU copies, contiguous buffers); layers are recomputed only when the
  model code sends them through deepspeed.checkpointing.checkpoint: Megatron-DeepSpeed with
  --checkpoint-activations, or a PipelineModule (runtime/pipe/module.py, activation_checkpoint_func). The
  Hugging Face Trainer's --gradient_checkpointing uses torch.utils.checkpoint and ignores the section
  (transformers integrations/deepspeed.py reads no key of it). `check` reads the section as full recompute,
  the reading of the launchers that ship it, and says so; --recompute none|full overrides it.
- `pipeline.activation_checkpoint_interval` N > 0: runtime/pipe/engine.py sets the PipelineModule's interval,
  whose forward() checkpoints its stage's layer specs (forward_funcs: the transformer layers, and on the
  first and last stage the embedding, head and any lambda layers) in groups of N.
- `pipeline.stages`: runtime/config.py get_pipeline_config keeps it ("auto" by default) but the engine takes
  the stage count from the module's topology (pipe/engine.py num_stages = grid.pipe_parallel_size), which the
  model code sets with PipelineModule(num_stages=...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.frameworks.deepspeed import config_json

SECTION = ("activation_checkpointing section: full recompute assumed (the section only configures "
           "deepspeed.checkpointing, which recomputes the layers the model code sends through it: Megatron-DeepSpeed "
           "with --checkpoint-activations, a PipelineModule; the Hugging Face Trainer's --gradient_checkpointing "
           "uses torch's checkpoint instead); set --recompute none if the model code does not checkpoint, "
           "--recompute full if it does")
NO_SECTION = ("activation recompute none (the Trainer's --gradient_checkpointing, full recompute, is not in the JSON; "
              "set --recompute full if the run uses it)")


def assumptions(cfg: dict, path: Path, recompute_flag: Optional[str]) -> list[str]:
    """The `assumed:` lines of the recompute reading and of pipeline.stages; none for what --recompute says."""
    out = []
    if recompute_flag is None and config_json.ds_checkpoint_interval(cfg, path) == 0:
        out.append(SECTION if cfg.get("activation_checkpointing") is not None else NO_SECTION)
    stages = config_json.ds_pipeline(cfg, path)
    if stages > 1:
        out.append(f"pipeline.stages={stages}: {stages} pipeline stages assumed (DeepSpeed takes the count from the "
                   "model code's PipelineModule(num_stages=...), not from this key, which its engine does not read)")
    return out


def notes(cfg: dict, path: Path, recompute_flag: Optional[str]) -> list[str]:
    """The `note:` line of a checkpoint interval priced as groups of layers."""
    interval = config_json.ds_checkpoint_interval(cfg, path)
    if recompute_flag is not None or interval == 0:
        return []
    groups = "every layer" if interval == 1 else f"groups of {interval} layers (Megatron's uniform --recompute-num-layers)"
    return [f"pipeline.activation_checkpoint_interval={interval}: DeepSpeed's pipeline engine checkpoints its stage's "
            f"layer specs (the embedding and head among them) in groups of {interval}; priced as full recompute of "
            f"{groups}"]
