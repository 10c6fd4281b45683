"""Moved: the DeepSpeed JSON readers to planner.frameworks.deepspeed.config_json, the torchtitan TOML
readers to planner.frameworks.torchtitan.config_values, the shared value checks to
planner.files.config_values. Import them from there.

This path is kept for one release only: it re-exports the names it held (no code of its own).
"""

from planner.files.config_values import MAX_COUNT  # noqa: F401
from planner.frameworks.deepspeed.config_json import (  # noqa: F401
    DS_UNPRICED, OFFLOAD_DEVICES, ds_batch, ds_offload, ds_optimizer, ds_overlap, ds_pipeline, ds_precision,
    ds_recompute, ds_sequence_parallel, ds_unpriced, ds_world, ds_zero)
from planner.frameworks.torchtitan.config_values import (  # noqa: F401
    TT_RESHARD, TT_SCHEDULES_LOOPED, TT_SCHEDULES_SINGLE, section, stage_options, titan_split, tt_bool, tt_int,
    tt_layout, tt_shard, tt_world)
