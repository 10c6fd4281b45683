"""torchtitan 0.3 launch lines (`torchrun ... -m torchtitan.train --module llama3 --config llama3_8b
--parallelism.tensor_parallel_degree 8 ...`, or `MODULE=llama3 CONFIG=llama3_8b ./run_train.sh --...`)
turned into the TOML mapping that planner.files.native reads for 0.2 files.

Source: torchtitan 0.3.0 config/manager.py (ConfigManager: --module and --config select a
config_registry function; every other argument is a tyro flag `--<section>.<key> VALUE` or
`--<section>.<key>=VALUE`, booleans as `--<section>.<key>` / `--<section>.no-<key>`), config/configs.py
(defaults: TrainingConfig local_batch_size 8, seq_len 2048; ParallelismConfig as in 0.2; CompileConfig
enable False, components ["model", "loss"], enable_async_tensor_parallel now under [compile]),
trainer.py (activation_checkpoint default SelectiveAC: the per-op policy, 0.2's "op"; 0.2's default was
a layer period of 2; the `activation-checkpoint:MODE` subcommand picks its mode) and the config_registry
functions of the presets below (the corpus's five, and those flavors.py maps onto parplan's models).
Differences from 0.2 that change a reading: the default activation checkpointing (per-op, not every
2nd layer), async TP's section, and converters, which live in the preset (model_registry(converters=...))
rather than in a flag. A preset parplan does not carry takes 0.3's dataclass defaults, said in a note.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

from planner.errors import UserError
from planner.frameworks.torchtitan import flavors

DEFAULTS = {"training": {"local_batch_size": 8, "seq_len": 2048},
            "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
            "compile": {"enable": False, "components": ["model", "loss"]}}
# torchtitan 0.3.0 models/<module>/config_registry.py: what each function sets beyond the defaults
PRESETS = {
    ("llama3", "llama3_8b"): {"training": {"local_batch_size": 1, "seq_len": 8192}},
    ("llama3", "llama3_70b"): {"training": {"local_batch_size": 8, "seq_len": 8192},
                               "parallelism": {"tensor_parallel_degree": 8}, "activation_checkpoint": {"mode": "full"}},
    ("llama3", "llama3_405b"): {"training": {"local_batch_size": 2, "seq_len": 8192},
                                "parallelism": {"tensor_parallel_degree": 8}, "activation_checkpoint": {"mode": "full"},
                                "compile": {"enable": True, "enable_async_tensor_parallel": True},
                                "model": {"converters": ["float8"]}},
    ("qwen3", "qwen3_32b"): {"training": {"local_batch_size": 2, "seq_len": 4096},
                             "activation_checkpoint": {"mode": "full"}},
    ("deepseek_v3", "deepseek_v3_16b"): {"training": {"local_batch_size": 4, "seq_len": 4096,
                                                      "disable_cuda_graphs": True},
                                         "parallelism": {"pipeline_parallel_schedule": "Interleaved1F1B",
                                                         "expert_parallel_degree": 8},
                                         "compile": {"enable": True, "components": ["loss"]}},
    # the presets flavors.py maps onto parplan's models beyond the corpus's five
    ("deepseek_v3", "deepseek_v3_671b"): {"training": {"local_batch_size": 4, "seq_len": 4096,
                                                       "disable_cuda_graphs": True},
                                          "parallelism": {"pipeline_parallel_schedule": "Interleaved1F1B",
                                                          "expert_parallel_degree": 2},
                                          "compile": {"enable": True, "components": ["loss"]}},
    ("qwen3", "qwen3_30b_a3b"): {"training": {"local_batch_size": 2, "seq_len": 4096},
                                 "activation_checkpoint": {"mode": "full"}},
    ("gpt_oss", "gpt_oss_120b"): {"training": {"local_batch_size": 1, "seq_len": 8192},
                                  "activation_checkpoint": {"mode": "full"}},
}
# every preset above builds its loss as ChunkedLossWrapper.Config (num_chunks 8: components/loss.py; checked by
# running torchtitan 0.3.0's ConfigManager on each, 2026-11-27); `--loss.num_chunks N` changes it
CHUNKED_LOSS = {"loss": {"num_chunks": 8}}
READ = ("training", "parallelism", "compile", "activation_checkpoint", "model", "quantize", "float8", "loss")
# 0.3.0 lists: one comma-separated word (config/manager.py list_str_rule: nargs=1, split(",")); the words up to the
# next flag are taken too, as parplan's exports wrote them before, each split on commas
LIST_KEYS = {"components", "converters", "filter_fqns"}
ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"
AC_SUBCOMMAND = "activation-checkpoint:"  # 0.3.0: `activation-checkpoint:full`, `:selective`, `:none`


def is_titan_cli(text: str) -> bool:
    """A torchtitan 0.3 launch line: torchtitan.train or run_train.sh with --module/MODULE= and --config/CONFIG=."""
    return ("torchtitan.train" in text or "run_train.sh" in text) and ("--module" in text or "MODULE=" in text)


def _words(text: str, path: Path) -> list[str]:
    joined = text.replace("\\\n", " ")
    try:
        return [w for line in joined.splitlines() if not line.lstrip().startswith("#")
                for w in shlex.split(line, comments=True)]
    except ValueError as exc:
        raise UserError(f"{path}: cannot split the command line ({exc})") from None


def _is_value(word: str) -> bool:
    """Whether a word can be a flag's value: not a flag, not the activation-checkpoint subcommand."""
    return not word.startswith("-") and not word.startswith(AC_SUBCOMMAND)


def _flags(words: list[str], lists=LIST_KEYS) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(environment assignments MODULE=/CONFIG=/NGPU=, [(dotted key, value)]) of the launch words; the
    subcommand `activation-checkpoint:MODE` (tyro's choice of ActivationCheckpoint config) reads as
    `--activation_checkpoint.mode MODE`. `lists`: the keys that take every word up to the next flag (0.3's
    tyro lists; 0.1/0.2 read a list as one comma-separated word, config_launch)."""
    env, flags, i = {}, [], 0
    while i < len(words):
        word = words[i]
        if word.startswith(AC_SUBCOMMAND):
            flags.append(("activation_checkpoint.mode", word[len(AC_SUBCOMMAND):].replace("-", "_")))
        elif "=" in word and not word.startswith("-") and word.split("=", 1)[0].isupper():
            env.setdefault(*word.split("=", 1))
        elif word.startswith("--") and "." in word.split("=", 1)[0] or word in ("--module", "--config"):
            key, value = (word[2:].split("=", 1) + [None])[:2]
            taken = []
            while value is None and i + 1 < len(words) and _is_value(words[i + 1]):
                taken.append(words[i + 1])
                i += 1
                if key.split(".")[-1] not in lists:
                    break
            if taken:
                value = taken if key.split(".")[-1] in lists else taken[0]
            flags.append((key, value))
        elif word.startswith("--module=") or word.startswith("--config="):
            flags.append(tuple(word[2:].split("=", 1)))
        i += 1
    return env, flags


def _value(section: str, key: str, raw, path: Path):
    """A flag's value: a bare flag is true (`--a.no-b` false); numbers and lists as TOML would give them."""
    if raw is None:
        return True
    if isinstance(raw, list) or key in LIST_KEYS:  # 0.3.0 ConfigManager's list_str_rule: one word, split on commas
        return [part for word in (raw if isinstance(raw, list) else [raw]) for part in word.split(",") if part]
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        return float(raw) if key == "memory_budget" else raw
    except ValueError:
        raise UserError(f"{path}: --{section}.{key}={raw!r:.40} must be a number") from None


def cli_config(text: str, path: Path, notes: list[str]) -> tuple[dict, int | None]:
    """(the TOML-like mapping of a 0.3 launch line, its GPUs per node from --nproc_per_node/NGPU or None)."""
    words = _words(text, path)
    env, flags = _flags(words)
    module = next((v for k, v in flags if k == "module"), env.get("MODULE"))
    name = next((v for k, v in flags if k == "config"), env.get("CONFIG"))
    if not module or not name:
        raise UserError(f"{path}: a torchtitan 0.3 launch needs --module and --config (or MODULE= and CONFIG=)")
    cfg = copy.deepcopy(DEFAULTS)
    preset = PRESETS.get((module, name))
    if preset is None:
        notes.append(f"--module {module} --config {name}: preset not known to parplan; torchtitan 0.3's defaults "
                     "used where the flags say nothing")
    for section, values in ({**CHUNKED_LOSS, **preset} if preset else {}).items():
        cfg.setdefault(section, {}).update(values)
    cfg.setdefault("model", {}).update(flavors.launch_model(module, name))  # the preset of the model (flavors.py)
    apply_flags(cfg, flags, path, notes)
    overridden = any(k.startswith("override.") for k, _ in flags)
    graphs_on(cfg, path, name, overridden)  # a config-time refusal: before the pipeline's micro-batches are looked at, as in torchtitan
    return cfg, _per_node(words, env, path)


def apply_flags(cfg: dict, flags: list[tuple[str, object]], path: Path, notes: list[str], read=READ,
                value=None) -> None:
    """Write `--section.key value` flags into the TOML-like mapping `cfg` (`--a.no-b` is b false); a section
    outside `read` (None: every section) gets a note instead. `value(section, key, raw, path)` types a raw value
    (default `_value`; config_launch types 0.1/0.2 flags by the TOML's own value)."""
    for key, raw in flags:
        if key in ("module", "config"):
            continue
        *tables, leaf = key.split(".")
        if leaf.startswith("no-") or leaf.startswith("no_"):
            leaf, raw = leaf[3:], "false"
        if read is not None and tables[0] not in read:
            notes.append(f"--{key}: not priced by parplan")
            continue
        leaf = leaf.replace("-", "_")
        _table(cfg, tables, key, path)[leaf] = (value or _value)(".".join(tables), leaf, raw, path)


def cuda_graphs(cfg: dict, path: Path, notes: list[str]) -> None:
    """torchtitan 0.3.0 captures the whole forward-backward in a CUDA graph unless training.disable_cuda_graphs
    (default false; the deepseek_v3 presets set it): trainer.py wrap_with_cuda_graph. It refuses pipeline parallelism
    and expert parallelism with the graphs on (graphs_on, which cli_config ran); otherwise a note says what the
    graphs change that is not priced."""
    if cfg.get("training", {}).get("disable_cuda_graphs", False):
        return
    notes.append("training.disable_cuda_graphs is false (torchtitan 0.3.0's default): the step runs as one captured "
                 "CUDA graph, whose saved host launch time and static memory pool are not priced (the torchtitan "
                 "stacks were fitted on eager runs)")


# 0.3.0 presets whose MoE token dispatcher never syncs with the host (models/deepseek_v3/config_registry.py: HybridEP
# with non_blocking_capacity_factor, MinimalAsyncEP); every other preset dispatches with the all-to-all ("standard").
SYNC_FREE_DISPATCH = ("_hybridep", "_minimal_async_ep")


def graphs_on(cfg: dict, path: Path, config_name: str = "", overridden: bool = False) -> bool:
    """Whether the 0.3 step runs as a CUDA graph; a UserError where torchtitan refuses the config for it
    (Trainer.Config._validate_cuda_graphs, at config time): pipeline parallelism ("CUDA graphs do not support
    pipeline parallelism yet"), and expert parallelism with a token dispatcher that syncs with the host, which the
    presets' all-to-all does ("CUDA graphs support only expert parallel token dispatcher configurations without CPU
    synchronization"; the _hybridep and _minimal_async_ep presets, or an --override.imports module (`overridden`),
    may choose another)."""
    disabled = cfg.get("training", {}).get("disable_cuda_graphs", False)
    if not isinstance(disabled, bool):
        raise UserError(f"{path}: training.disable_cuda_graphs={str(disabled)[:40]!r} must be true or false "
                        "(--training.disable_cuda_graphs or --training.no-disable_cuda_graphs)")
    if disabled:
        return False
    par = cfg.get("parallelism", {})
    pp = par.get("pipeline_parallel_degree", 1) if isinstance(par, dict) else 1
    if isinstance(pp, int) and pp > 1:
        raise UserError(f"{path}: pipeline_parallel_degree > 1 with CUDA graphs on (torchtitan 0.3.0's default): "
                        "torchtitan refuses it (CUDA graphs do not support pipeline parallelism yet); add "
                        "--training.disable_cuda_graphs")
    ep = par.get("expert_parallel_degree", 1) if isinstance(par, dict) else 1
    if isinstance(ep, int) and ep > 1 and not config_name.endswith(SYNC_FREE_DISPATCH) and not overridden:
        raise UserError(f"{path}: expert_parallel_degree {ep} with CUDA graphs on (torchtitan 0.3.0's default): "
                        "torchtitan refuses it for the all-to-all token dispatcher (CUDA graphs support only "
                        "dispatchers without CPU synchronization); add --training.disable_cuda_graphs, or use a "
                        "_hybridep / _minimal_async_ep config")
    return True


def _table(cfg: dict, names: list[str], key: str, path: Path) -> dict:
    """The nested table a dotted flag writes into (created when missing)."""
    node = cfg
    for name in names:
        node = node.setdefault(name.replace("-", "_"), {})
        if not isinstance(node, dict):
            raise UserError(f"{path}: --{key}: {name} is a value, not a section")
    return node



def _torchrun(words: list[str], names: tuple[str, ...], path: Path) -> int | None:
    """A torchrun count option (--nproc_per_node, --nnodes) as a number; None when absent or a variable."""
    for i, word in enumerate(words):
        for flag in names:
            if word.startswith(flag + "="):
                return _count(word.split("=", 1)[1], path)
            if word == flag and i + 1 < len(words):
                return _count(words[i + 1], path)
    return None


def _per_node(words: list[str], env: dict, path: Path) -> int | None:
    found = _torchrun(words, ("--nproc_per_node", "--nproc-per-node"), path)
    return found if found is not None else (_count(env["NGPU"], path) if "NGPU" in env else None)


def allocator(text: str, path: Path) -> dict:
    """TrainSpec's expandable_segments from the launch line's PYTORCH_CUDA_ALLOC_CONF (`export VAR=...` or
    `VAR=... torchrun`; the last assignment wins, as in the shell), read as Megatron scripts are
    (planner.frameworks.megatron.train: 'expandable_segments:True' among the comma-separated options of torch's
    CUDA caching allocator); {} when the text is no launch line or the variable does not turn them on."""
    if not is_titan_cli(text):
        return {}
    values = [w.split("=", 1)[1] for w in _words(text, path) if w.startswith(ALLOC_CONF + "=")]
    return expandable(values[-1] if values else "")


def expandable(conf: str) -> dict:
    """{"expandable_segments": True} when an allocator setting string turns them on, else {}."""
    return {"expandable_segments": True} if any(
        part.replace(" ", "").lower() == "expandable_segments:true" for part in conf.split(",")) else {}


def launch_world(text: str, path: Path) -> int | None:
    """GPUs the launch line asks for: --nnodes (default 1) x --nproc_per_node (or NGPU); None when unsaid."""
    words = _words(text, path)
    env, _ = _flags(words)
    per = _per_node(words, env, path)
    nodes = _torchrun(words, ("--nnodes",), path)
    return None if per is None else per * (nodes or 1)


def _count(raw: str, path: Path) -> int | None:
    if raw.startswith("$") or ":" in raw:  # a variable, or an elastic range such as 1:4
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= 1024:
        raise UserError(f"{path}: --nproc_per_node={raw!r:.20} must be a GPU count from 1 to 1024")
    return int(raw)
