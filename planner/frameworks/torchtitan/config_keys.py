"""Which `section.key` of a torchtitan TOML job file are torchtitan's, and one warning for each that parplan
neither reads nor may ignore: a key no torchtitan release defines (with the nearest real key, when one is a
few letters away), or a real key that changes memory or step time and that parplan does not price.

The real keys are known_keys.KEYS, read from torchtitan's own config code (torchtitan 0.1.0 and 0.2.0-0.2.2,
and the argparse JobConfig of the releases before 0.1.0; see known_keys.py). A key of upstream commits that no
downloadable release carries (late 2024's [float8] enable_float8_linear) is not known, so it is named as
unknown too: parplan does not read it. torchtitan itself treats an unknown key by version: the releases
before 0.1.0 and 0.1.0 drop it without a word, 0.2.x refuses the file (config/manager.py _dict_to_dataclass:
"Invalid field names"). parplan reads on and says so.
"""

from __future__ import annotations

from typing import Iterator, Optional

from planner.files.config_values import short
from planner.frameworks.torchtitan.known_keys import KEYS

MAX_NAMED = 20  # unknown keys named one by one (a hostile file may hold 100,000)
MAX_SUGGESTED = 80  # longer keys are shown cut and get no suggestion
LEGACY_TAGS = ("2024", "2025")  # the argparse layouts before 0.1.0 (known_keys.py)
# read by config_toml from a TOML too, though only torchtitan 0.3.0 defines it (config/configs.py CompileConfig)
READ_ELSEWHERE = {"compile.enable_async_tensor_parallel": "0.3.0"}
# real keys that change memory or step time, parplan's reading of each and why it does not price the rest:
# key -> (values priced as parplan prices the run, what is not priced). Sources: torchtitan 0.2.2
# config/job_config.py (defaults and meanings) unless another version is named.
UNPRICED = {
    "training.dtype": (("float32",), "bfloat16 keeps weights, gradients and optimizer states in bf16"),
    "optimizer.name": (("AdamW", "Adam"), "parplan prices Adam's two fp32 states"),
    "optimizer.early_step_in_backward": ((False,), "each gradient is freed as soon as its step is taken"),
    "parallelism.disable_loss_parallel": ((False,), "the logits are gathered whole on every TP rank"),
    "parallelism.expert_parallel_comm_backend": (("standard",), "DeepEP dispatch"),
    "parallelism.context_parallel_rotate_method": (("allgather",), "all-to-all KV exchange"),
    "parallelism.module_fqns_per_model_part": ((None,), "a hand-made stage split; priced as torchtitan's default"),
    "parallelism.pipeline_parallel_schedule_csv": (("", None), "a schedule from a CSV file"),
    "parallelism.enable_compiled_autograd": ((False,), "compiled autograd (0.1.0, 0.2.0)"),
    "float8.force_recompute_fp8_weight_in_bwd": ((False,), "fp8 weights recomputed in backward (0.1.0)"),
    "fault_tolerance.enable": ((False,), "TorchFT replica groups"),
    "validation.enable": ((False,), "validation forward passes of validation.local_batch_size"),
}


MISSING = object()


def get(cfg: dict, key: str, default=MISSING):
    """The value at dotted `key` ("training.batch_size"), else `default`."""
    node = cfg
    for name in key.split("."):
        if not isinstance(node, dict) or name not in node:
            return default
        node = node[name]
    return node


def put(cfg: dict, key: str, value) -> None:
    """Sets dotted `key`, making its tables; a value in the way is left for the readers to refuse."""
    *tables, name = key.split(".")
    node = cfg
    for table in tables:
        node = node.setdefault(table, {})
        if not isinstance(node, dict):
            return
    node[name] = value


def pop(cfg: dict, key: str):
    """Removes dotted `key` and returns its value (MISSING when absent)."""
    *tables, name = key.split(".")
    node = get(cfg, ".".join(tables)) if tables else cfg
    return node.pop(name, MISSING) if isinstance(node, dict) else MISSING


def leaves(cfg: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted key, value) of every non-table value, depth first ([quantize.linear.float8] is nested)."""
    for name, value in cfg.items():
        if isinstance(value, dict):
            yield from leaves(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def tags(key: str) -> list[str]:
    """The torchtitan versions (known_keys tags) that define `key`; [] for none."""
    return KEYS.get(key, "").split()


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of one character."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _rank(key: str) -> int:
    """0 for a key of the current releases (0.2.x), 1 for one only older releases define."""
    return 0 if any(t.startswith("0.2") for t in tags(key)) else 1


def suggestion(key: str) -> Optional[str]:
    """The real key meant: the same name in another section, else the nearest within a few edits."""
    name = key.rsplit(".", 1)[-1]
    moved = sorted((k for k in KEYS if k.rsplit(".", 1)[-1] == name), key=lambda k: (_rank(k), k))
    if moved:
        return moved[0]
    limit = max(2, len(key) // 10)
    near = [k for k in KEYS if abs(len(k) - len(key)) <= limit] if len(key) <= MAX_SUGGESTED else []
    scored = sorted((edit_distance(key, k), _rank(k), k) for k in near)
    return scored[0][2] if scored and scored[0][0] <= limit else None


def unknown(key: str) -> str:
    near = suggestion(key)
    hint = f" (did you mean {near}?)" if near else ""
    shown = key if len(key) <= MAX_SUGGESTED else key[:MAX_SUGGESTED - 3] + "..."
    return (f"{shown} is not a key of the torchtitan releases parplan reads (mid-2024 and early-2025 snapshots, "
            f"0.1.0-0.2.2){hint}; ignored (torchtitan 0.2.x refuses unknown keys)")


def unpriced(key: str, value) -> Optional[str]:
    priced, what = UNPRICED[key]
    if value in priced and type(value) is type(priced[priced.index(value)]):
        return None
    return f"{key}={short(value)}: a torchtitan key parplan does not price ({what}); ignored"


def key_warnings(cfg: dict, read: dict) -> list[str]:
    """One line per key of the job file `cfg` that no torchtitan release defines, then one per real key of
    `read` (cfg in the current keys, config_old.upgrade) that changes memory or time in a way not priced."""
    strange = [key for key, _ in leaves(cfg) if key not in KEYS and key not in READ_ELSEWHERE]
    out = [unknown(key) for key in strange[:MAX_NAMED]]
    if len(strange) > MAX_NAMED:
        out.append(f"and {len(strange) - MAX_NAMED} more keys torchtitan does not define; ignored")
    for key, value in leaves(read):
        line = unpriced(key, value) if key in UNPRICED else None
        out += [line] if line else []
    return out
