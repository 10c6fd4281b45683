"""torchtitan job files in the layouts of the releases before 0.1.0, read as those releases read them and
rewritten into the 0.1.0/0.2.x keys that config_values and config_toml read; one note names each key moved.

Sources, read and not run: the argparse JobConfig (torchtitan/config_manager.py) of two upstream snapshots as
republished on PyPI (torchtitan's own 0.0.2 wheel and sdist ship no config code); tags as in known_keys.py.
- "2024", forked-torchtitan 0.202.2 (upstream mid-2024): [training] batch_size (default 8, per GPU:
  datasets/hf_datasets.py gives each data-parallel rank a DataLoader of batch_size), data_parallel_degree (-1 =
  the GPUs left after TP and PP: parallelisms/__init__.py ParallelDims; FSDP over them, bf16 parameters:
  parallelisms/parallelize_llama.py), tensor_parallel_degree, pipeline_parallel_degree (parallelize_llama raises
  NotImplementedError("PP not implemented yet.") above 1), fp8_linear ("" or "dynamic": float8_linear.py swaps
  nn.Linear for Float8DynamicLinear, dynamic tensorwise scaling), enable_loss_parallel (default true), compile
  ("Whether to compile the model"; nothing in the package compiles the loss).
- "2025", custom-torchtitan 0.0.2.1 (upstream early 2025): [training] batch_size, data_parallel_replicate_degree,
  data_parallel_shard_degree, tensor_parallel_degree, disable_loss_parallel, fsdp_reshard_after_forward, compile
  (models/llama/parallelize_llama.py compiles each TransformerBlock; components/loss.py keeps the loss eager:
  "compiling loss function causes CUDA errors"); [experimental] pipeline_parallel_degree, _schedule,
  _schedule_csv, _split_points, _microbatches (config_old_pp), context_parallel_degree,
  context_parallel_rotate_method, enable_async_tensor_parallel, enable_compiled_autograd.
Later releases read such a file otherwise: 0.1.0 (config_manager.py _dict_to_dataclass) drops the old keys
without a word and 0.2.x refuses them. So a file that gives an old key and its new one different values
(a default counts where one is not given) is refused, naming both: no torchtitan release runs it as written.
"""

from __future__ import annotations

import copy
from pathlib import Path

from planner.errors import UserError
from planner.files.config_values import short
from planner.frameworks.torchtitan import config_old_pp
from planner.frameworks.torchtitan.config_keys import LEGACY_TAGS, MISSING, get, key_warnings, leaves, pop, put, tags

# old key -> (its 0.1.0/0.2.x key, the default both releases give it)
MOVED = {
    "training.batch_size": ("training.local_batch_size", 8),
    "training.data_parallel_degree": ("parallelism.data_parallel_shard_degree", -1),
    "training.data_parallel_shard_degree": ("parallelism.data_parallel_shard_degree", -1),
    "training.data_parallel_replicate_degree": ("parallelism.data_parallel_replicate_degree", 1),
    "training.tensor_parallel_degree": ("parallelism.tensor_parallel_degree", 1),
    "training.pipeline_parallel_degree": ("parallelism.pipeline_parallel_degree", 1),
    "training.disable_loss_parallel": ("parallelism.disable_loss_parallel", False),
    "training.fsdp_reshard_after_forward": ("parallelism.fsdp_reshard_after_forward", "default"),
    "experimental.pipeline_parallel_degree": ("parallelism.pipeline_parallel_degree", 1),
    "experimental.pipeline_parallel_schedule": ("parallelism.pipeline_parallel_schedule", "1F1B"),
    "experimental.pipeline_parallel_schedule_csv": ("parallelism.pipeline_parallel_schedule_csv", ""),
    "experimental.pipeline_parallel_split_points": ("parallelism.pipeline_parallel_split_points", []),
    "experimental.context_parallel_degree": ("parallelism.context_parallel_degree", 1),
    "experimental.context_parallel_rotate_method": ("parallelism.context_parallel_rotate_method", "allgather"),
    "experimental.enable_async_tensor_parallel": ("parallelism.enable_async_tensor_parallel", False),
    "experimental.enable_compiled_autograd": ("parallelism.enable_compiled_autograd", False),
}
# the keys that make a file one of the old layouts (others, such as training.warmup_steps, change nothing read)
LAYOUT = {*MOVED, "training.fp8_linear", "training.enable_loss_parallel", *config_old_pp.OWN}


def versions(key: str) -> str:
    """`key` with the torchtitan releases that define it, for messages."""
    names = list(dict.fromkeys("before 0.1.0" if t in LEGACY_TAGS else t for t in tags(key)))
    return f"{key} (torchtitan {', '.join(names)})" if names else key


def disagree(path: Path, old: str, old_value, new: str, new_value, given: bool = True) -> UserError:
    said = f"= {short(old_value)}" if given else f"not given, so {short(old_value)} in this old layout,"
    return UserError(f"{path}: {versions(old)} {said} and {versions(new)} = {short(new_value)} disagree; each "
                     "torchtitan release reads only one of them: keep one")


def _move(cfg: dict, path: Path, raw: dict) -> list[str]:
    """Every MOVED key in its new place; an old and a new value for one setting must agree."""
    done: dict[str, tuple[str, object]] = {}
    for old, (new, default) in MOVED.items():
        value = pop(cfg, old)
        if value is MISSING:
            continue
        if new in done and done[new][1] != value:
            raise disagree(path, done[new][0], done[new][1], old, value)
        done[new] = (old, value)
    for new, (old, value) in done.items():
        put(cfg, new, value)
    _new_keys_agree(path, raw, done)
    return [f"{old} as {new}" for new, (old, _) in done.items()]


def _new_keys_agree(path: Path, raw: dict, done: dict) -> None:
    """A new key the old layout would not read must hold what the old one (or its default) says."""
    for old, (new, default) in MOVED.items():
        given = get(raw, new)
        if given is MISSING:
            continue
        name, value = done.get(new, (old, default))
        if given != value:
            raise disagree(path, name, value, new, given, new in done)


def _converters(cfg: dict) -> list[str]:
    """2025 model.converters may be one comma-separated string (config_manager.py string_list)."""
    value = get(cfg, "model.converters")
    if not isinstance(value, str):
        return []
    put(cfg, "model.converters", [name.strip() for name in value.split(",") if name.strip()])
    return [f"model.converters {value!r} as a list"]


def _fp8(cfg: dict, path: Path) -> list[str]:
    """2024 training.fp8_linear: "dynamic" is model.converters ["float8"] (tensorwise), "" is none."""
    kind = pop(cfg, "training.fp8_linear")
    if kind is MISSING:
        return []
    if not isinstance(kind, str) or kind.lower() not in ("", "dynamic"):
        raise UserError(f"{path}: training.fp8_linear={short(kind)}: torchtitan's fp8 linear types are \"\" and "
                        "\"dynamic\" (2024 float8_linear.py)")
    converters = get(cfg, "model.converters")
    if converters is not MISSING and (kind.lower() == "dynamic") != (isinstance(converters, list)
                                                                 and "float8" in converters):
        raise disagree(path, "training.fp8_linear", kind, "model.converters", converters)
    if kind.lower() == "dynamic" and converters is MISSING:
        put(cfg, "model.converters", ["float8"])
    return ["training.fp8_linear as model.converters"]


def _loss_parallel(cfg: dict, path: Path) -> list[str]:
    """2024 training.enable_loss_parallel (true by default) is 2025's training.disable_loss_parallel, inverted."""
    on = pop(cfg, "training.enable_loss_parallel")
    if on is MISSING:
        return []
    given = get(cfg, "training.disable_loss_parallel")
    if given is not MISSING and given == bool(on):
        raise disagree(path, "training.enable_loss_parallel", on, "training.disable_loss_parallel", given)
    put(cfg, "training.disable_loss_parallel", not on)
    return ["training.enable_loss_parallel as not training.disable_loss_parallel"]


def _compile(cfg: dict, path: Path) -> list[str]:
    """training.compile of the old layouts compiles each TransformerBlock and not the loss: [compile] enable
    with components ["model"] (torchtitan 0.1.0 compiles the loss too: its training.compile is left as it is)."""
    on, given = pop(cfg, "training.compile"), get(cfg, "compile.enable")
    if on is MISSING and given is MISSING:
        return []
    on, given = (False if on is MISSING else on), (on if given is MISSING else given)
    if given != on:
        raise disagree(path, "training.compile", on, "compile.enable", given)
    put(cfg, "compile.enable", on)
    if get(cfg, "compile.components") is MISSING:
        put(cfg, "compile.components", ["model"])
    return ["training.compile as compile.enable (components [\"model\"]: the loss stays eager)"]


def _refused(cfg: dict, era: set[str]) -> list[str]:
    """What the 2024 code refuses at start-up (parallelize_llama.py), priced as asked."""
    if "2024" not in era:
        return []
    out = []
    if get(cfg, "parallelism.pipeline_parallel_degree", 1) != 1:
        out.append("training.pipeline_parallel_degree > 1: torchtitan's 2024 layout raises NotImplementedError "
                   "(\"PP not implemented yet.\"); priced as asked")
    if get(cfg, "model.norm_type") == "fused_rmsnorm" and get(cfg, "parallelism.tensor_parallel_degree", 1) != 1:
        out.append("model.norm_type fused_rmsnorm with TP: torchtitan's 2024 layout raises NotImplementedError; "
                   "priced as asked")
    return out


def upgrade(cfg: dict, path: Path, layers: int, notes: list[str]) -> dict:
    """`cfg` in the keys of 0.1.0/0.2.x: itself when it holds no key of the layouts before 0.1.0, else a copy
    with those keys moved (one note names them). `layers`: the model's, for the 2025 default stage split."""
    old = [key for key, _ in leaves(cfg) if key in LAYOUT]
    if not old:
        return cfg
    era = {t for key in old if len(tags(key)) == 1 for t in tags(key)} or set(LEGACY_TAGS)
    new = copy.deepcopy(cfg)
    pp_old = {k: pop(new, k) for k in config_old_pp.OWN}
    moved = _converters(new) + _fp8(new, path) + _loss_parallel(new, path) + _compile(new, path)
    moved += _move(new, path, cfg)
    moved += config_old_pp.stages(new, path, layers, pp_old, cfg)
    notes.append(f"torchtitan's {' or '.join(sorted(era))} layout (before 0.1.0): read {'; '.join(moved)}; "
                 "torchtitan 0.1.0 ignores these keys, 0.2 refuses them")
    notes.extend(_refused(new, era))
    return new


def read(cfg: dict, path: Path, layers: int, notes: list[str]) -> tuple[dict, list[str]]:
    """(cfg in the keys of 0.1.0/0.2.x, one warning per key torchtitan does not define or parplan does not price):
    what planner.files.native reads from a torchtitan TOML job file."""
    new = upgrade(cfg, path, layers, notes)
    return new, key_warnings(cfg, new)
