"""Other training tools' YAML configs and launch lines, told apart by their own keys and entry points, so that
`parplan check` names the tool and the next step instead of misreading the file as a parplan plan file or a
Megatron script.

How each config is told (its characteristic top-level keys, from the tool's schema):
- Axolotl: `base_model` with `micro_batch_size`, `sequence_len`, `datasets` or `adapter` (axolotl 0.19.0
  src/axolotl/utils/schemas/config.py AxolotlInputConfig, schemas/training.py HyperparametersConfig). Read
  (planner.files.finetune_yaml).
- LLaMA-Factory: `model_name_or_path` with `stage`, `finetuning_type`, `cutoff_len` or `template` (llamafactory
  0.9.5 hparams/finetuning_args.py, data_args.py, model_args.py). Read (planner.files.finetune_yaml).
- torchtune: a section whose `_component_` names a `torchtune.` class (torchtune 0.6.1 recipes/configs/*.yaml,
  torchtune/config/_instantiate.py).
- NeMo 1.x hydra: `trainer`, `model` and `exp_manager` sections (NeMo 1.x examples/nlp/language_modeling/conf/
  megatron_gpt_config.yaml).
- Nanotron: `general`, `parallelism` and `tokens` sections (nanotron 0.4 src/nanotron/config/config.py Config).
- Levanter: a `trainer` section with `mp`, `per_device_parallelism`, `fsdp_axis`, `batch_axis`, `model_axis_size`
  or `tensor_parallel_axes` (levanter 1.1 src/levanter/trainer.py TrainerConfig).
- MaxText: `ici_*_parallelism` / `dcn_*_parallelism`, or `base_config` with `per_device_batch_size`,
  `model_name`, `max_target_length` or `remat_policy` (MaxText MaxText/configs/base.yml).
- GPT-NeoX (NeoX-20B, Pythia, Llemma): `pipe_parallel_size` or `model_parallel_size` with a model key
  (`num_layers`, `hidden_size`, `num_attention_heads`, `seq_length`) or a NeoX-only one (`gpt_j_residual`,
  `pos_emb`, `rotary_pct`, `norm`, `attention_config`, `output_layer_parallelism`, `no_weight_tying`), every key's
  `-` read as `_` (gpt-neox 2.x megatron/neox_arguments/neox_args.py; arguments.py NeoXArgs.from_ymls). The
  DeepSpeed sections such a config embeds (`zero_optimization`, `fp16`, ...) alone are a DeepSpeed config.
A mapping with parplan's own `cluster` and `train` keys is a plan file whatever else it holds.

Launch lines (the entry point of a command in a shell script): `tune run` (torchtune), `llamafactory-cli train` /
`lmf train`, `axolotl train` / `-m axolotl.cli.train`, `colossalai run` and ColossalAI example scripts under torchrun
(their `--plugin`/`-p` gemini, zero2, 3d, ...), Nanotron's `run_train.py --config-file`, `-m MaxText.train`,
`nemo llm` (NeMo 2), `-m levanter.main.*`, GPT-NeoX's `deepy.py train.py [-d DIR] A.yml B.yml`, OpenRLHF's
`-m openrlhf.cli.train_*` / `openrlhf/cli/train_*.py` (find_launch). The tools parplan does not read are refused
(UserError) with the `parplan estimate` command that prices the same run, filled from what the file or line says,
as planner.frameworks.megatron.nemo_hydra does for NeMo 1.x hydra launches.

This module tells the tools apart (yaml_tool, find_launch), finds the configs a launch names (config_name,
config_names, launch_config: GPT-NeoX's several, merged) and maps the tools' model names to presets (preset_for).
The run a refused config describes and its refusal are in planner.files.other_tools_runs (refuse_yaml); a refused
launch line's in planner.files.other_tools_launch (refuse_launch).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from dataclasses import dataclass
from typing import Callable, Optional

import hardware_profiles as hp
from planner.errors import UserError
from planner.files import loading
from planner.files.shellread import ShellScript, flag_dict, parse_flags, read_script
from planner.frameworks.megatron.ds_json import candidates


def _section(data, key: str) -> dict:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def _has_any(data: dict, keys) -> bool:
    return any(k in data for k in keys)


MAXTEXT_AXIS = re.compile(r"(ici|dcn)_[a-z_]+_parallelism")
LEVANTER_TRAINER = ("mp", "per_device_parallelism", "fsdp_axis", "batch_axis", "model_axis_size",
                    "tensor_parallel_axes")
NEOX_PARALLEL = ("pipe_parallel_size", "model_parallel_size")
NEOX_MODEL = ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "gpt_j_residual", "pos_emb",
              "rotary_pct", "norm", "attention_config", "output_layer_parallelism", "no_weight_tying")


def neox_keys(data) -> dict:
    """A GPT-NeoX mapping with its top-level keys' `-` read as `_` (`"pipe-parallel-size"` is
    `pipe_parallel_size`), as gpt-neox 2.x megatron/neox_arguments/arguments.py NeoXArgs.from_ymls reads each
    file; {} for anything but a mapping."""
    if not isinstance(data, dict):
        return {}
    return {k.replace("-", "_") if isinstance(k, str) else k: v for k, v in data.items()}


def _is_neox(data: dict) -> bool:
    keys = neox_keys(data)
    return _has_any(keys, NEOX_PARALLEL) and _has_any(keys, NEOX_MODEL)


@dataclass(frozen=True)
class Tool:
    """A training tool: its name, the keys that tell its configs, and the source of those keys."""

    name: str
    keys: str
    test: Callable[[dict], bool]


YAML_TOOLS = {
    "axolotl": Tool("Axolotl", "base_model with micro_batch_size/sequence_len",
                    lambda d: "base_model" in d and _has_any(d, ("micro_batch_size", "sequence_len", "datasets",
                                                                 "adapter"))),
    "llamafactory": Tool("LLaMA-Factory", "model_name_or_path with stage/finetuning_type/cutoff_len",
                         lambda d: "model_name_or_path" in d and _has_any(d, ("stage", "finetuning_type", "cutoff_len",
                                                                              "template"))),
    "torchtune": Tool("torchtune", "_component_: torchtune.*",
                      lambda d: any(str(_section(d, k).get("_component_", "")).startswith("torchtune.") for k in d)),
    "nemo1": Tool("NeMo 1.x (hydra)", "trainer, model and exp_manager sections",
                  lambda d: "exp_manager" in d and bool(_section(d, "trainer")) and bool(_section(d, "model"))),
    "nanotron": Tool("Nanotron", "general, parallelism and tokens sections",
                     lambda d: all(_section(d, k) for k in ("general", "parallelism", "tokens"))),
    "levanter": Tool("Levanter", "trainer.mp/per_device_parallelism/fsdp_axis",
                     lambda d: _has_any(_section(d, "trainer"), LEVANTER_TRAINER)),
    "maxtext": Tool("MaxText", "ici_*/dcn_*_parallelism or base_config",
                    lambda d: any(isinstance(k, str) and MAXTEXT_AXIS.fullmatch(k) for k in d)
                    or ("base_config" in d and _has_any(d, ("per_device_batch_size", "model_name", "max_target_length",
                                                            "remat_policy")))),
    "neox": Tool("GPT-NeoX", "pipe-parallel-size/model-parallel-size with num-layers/hidden-size/NeoX keys",
                 _is_neox),
}
LAUNCH_TOOLS = {"colossalai": "ColossalAI", "nemo2": "NeMo 2 (nemo llm)", "openrlhf": "OpenRLHF",
                **{k: t.name for k, t in YAML_TOOLS.items()}}


def yaml_tool(data) -> Optional[str]:
    """The YAML_TOOLS key of the tool whose config `data` is, or None (a plan file, an Accelerate config, anything
    else)."""
    if not isinstance(data, dict) or {"cluster", "train"} <= set(data) or "distributed_type" in data:
        return None
    return next((key for key, tool in YAML_TOOLS.items() if tool.test(data)), None)


# ---- presets by the names other tools give models ------------------------------------------------------------------

# Same shapes under another name (config.json: Llama 3.1/3.3 keep Llama 3's layers, widths, heads and vocabulary;
# their RoPE scaling and longer context are not modelled), and Hub names that normalise to no preset name.
ALIASES = {"llama3.1-8b": "llama3-8b", "llama3.1-70b": "llama3-70b", "llama3.3-70b": "llama3-70b",
           "llama4-scout-17b-16e": "llama4-scout", "llama4-maverick-17b-128e": "llama4-maverick"}


def _normal(name: str) -> str:
    """`NousResearch/Meta-Llama-3.1-8B-Instruct`, torchtune's `llama3_1_8b`, NeMo's `llama31_405b` -> `llama3.1-8b`,
    `llama3.1-405b`: the repository name, lower case, without -instruct/-chat/-hf/-base/-v0.1, `Meta-Llama-3` ->
    `llama3`, `_` -> `-`."""
    text = name.lower().rsplit("/", 1)[-1].replace("_", "-")
    previous = None
    while previous != text:
        previous, text = text, re.sub(r"-(instruct|chat|hf|base|it|v0\.1)$", "", text)
    text = re.sub(r"^(meta-)?llama-(\d)", r"llama\2", text)
    return re.sub(r"^llama(\d)-?(\d)-", r"llama\1.\2-", text)


def preset_for(name) -> Optional[str]:
    """The parplan model preset a tool's model name stands for (same shapes), or None."""
    if not isinstance(name, str) or not name or len(name) > 200:
        return None
    text = _normal(name)
    return text if text in hp.list_models() else ALIASES.get(text)


# ---- launch lines ----------------------------------------------------------------------------------------------------

MODULES = {"axolotl.cli.train": "axolotl", "MaxText.train": "maxtext", "maxtext.train": "maxtext",
           "MaxText.train_compile": "maxtext"}
SUBCOMMANDS = {("tune", "run"): "torchtune", ("llamafactory-cli", "train"): "llamafactory",
               ("lmf", "train"): "llamafactory", ("axolotl", "train"): "axolotl", ("colossalai", "run"): "colossalai",
               ("nemo", "llm"): "nemo2"}
# ColossalAI's example scripts: applications/Colossal-LLaMA/train.py and examples/language/llama/benchmark.py
# `--plugin`/`-p` choices (ColossalAI 0.4)
COLOSSAL_PLUGINS = {"gemini": 3, "gemini_auto": 3, "zero2": 2, "zero2_cpu": 2, "3d": None, "3d_cpu": None,
                    "hybrid_parallel": None, "ddp": 0, "fsdp": 3, "fsdp_cpu": 3, "torch_fsdp": 3, "moe": None}
SCRIPTS = {"MaxText/train.py": "maxtext", "levanter/main/train_lm.py": "levanter", "axolotl/cli/train.py": "axolotl"}
OPENRLHF = re.compile(r"(?:.*/)?openrlhf[./]cli[./]train_\w+?(?:\.py)?")  # openrlhf/cli/train_*.py, as module or file
CHEAP = re.compile(r"\btune\b|llamafactory-cli|\blmf\b|axolotl|colossalai|run_train\.py|maxtext|\bnemo\s+llm\b|"
                   r"levanter|deepy\.py|openrlhf|--plugin|\s-p\s+(" + "|".join(COLOSSAL_PLUGINS) + r")\b",
                   re.IGNORECASE)


@dataclass
class Launch:
    """Another tool's launch: which tool, its entry point as written (`tune run`, `-m MaxText.train`), the words
    of its command after the entry point, the launcher words before it, and the script read."""

    tool: str
    entry: str
    words: list
    before: list
    sh: ShellScript
    undecided: bool = False  # read from a branch of an `if` whose condition parplan cannot decide


def find_launch(text: str, path) -> Optional[Launch]:
    """The first command of a shell script that starts another tool's training, or None. OpenRLHF's scripts keep
    the line in a here-document (`read -r -d '' training_commands <<EOF`, which the shell reader assigns) and launch
    it under an `if`: when no branch was taken (a condition on the machine), every branch is read for an OpenRLHF
    line, and the launch is marked undecided."""
    if not CHEAP.search(text) or "--num-layers" in text:
        return None
    file = path if path is not None and path.is_file() else None
    found = _first(read_script(text, file, every_branch=False))
    if found is None and "openrlhf" in text.lower():
        try:
            found = _first(read_script(text, file, every_branch=True), only="openrlhf")
        except UserError:  # a branch not taken that does not read (a missing sourced file): no launch found
            return None
    return found


def _first(sh: ShellScript, only: Optional[str] = None) -> Optional[Launch]:
    for words in sh.commands:
        found = _entry(words)
        if found and only in (None, found[0]):
            tool, start, at = found
            entry = " ".join(posixpath.basename(w) if w.endswith(".py") or i == at else w
                             for i, w in enumerate(words[at:start], at))
            return Launch(tool, entry[:80], words[start:], words[:start], sh, undecided=only is not None)
    return None


def _entry(words: list) -> Optional[tuple[str, int, int]]:
    """(tool, index of the first word after its entry point, index where the entry point starts) of a command."""
    for i, word in enumerate(words):
        base, nxt = posixpath.basename(word), words[i + 1] if i + 1 < len(words) else ""
        if (base, nxt) in SUBCOMMANDS:
            return SUBCOMMANDS[(base, nxt)], i + 2, i
        if word in ("-m", "--module") and _module(nxt):
            return _module(nxt), i + 2, i
        if base == "run_train.py" and any(w.split("=", 1)[0] == "--config-file" for w in words[i:]):
            return "nanotron", i + 1, i
        if base == "deepy.py" and posixpath.basename(nxt) == "train.py":  # GPT-NeoX: deepy.py USER_SCRIPT CONFIGS
            return "neox", i + 2, i
        script = next((tool for suffix, tool in SCRIPTS.items() if word.endswith(suffix)), None)
        if script or (word.endswith(".py") and _module(word) == "openrlhf"):  # OpenRLHF's openrlhf/cli/train_sft.py
            return script or "openrlhf", i + 1, i
    return _colossal(words)


def _module(name: str) -> Optional[str]:
    """The tool whose training a module (`-m NAME`) or OpenRLHF script runs, or None."""
    if name in MODULES or name.startswith("levanter.main."):
        return MODULES.get(name, "levanter")
    return "openrlhf" if OPENRLHF.fullmatch(name) else None


def _colossal(words: list) -> Optional[tuple[str, int, int]]:
    """A ColossalAI example script under torchrun/python: its --plugin/-p names a ColossalAI booster plugin."""
    for i, word in enumerate(words):
        if word.endswith(".py"):
            flags = flag_dict(parse_flags(words[i + 1:]))
            plugin = flags.get("--plugin", flags.get("-p"))
            return ("colossalai", i + 1, 0) if plugin in COLOSSAL_PLUGINS else None
    return None


def config_name(launch: Launch) -> Optional[str]:
    """The config file a launch names: tune --config, Nanotron --config-file, Levanter --config_path, MaxText's
    first argument, the YAML after `axolotl train` / `llamafactory-cli train`, GPT-NeoX's first (config_names)."""
    if launch.tool == "neox":
        return next(iter(neox_conf_files(launch.words)), None)
    flags = flag_dict(parse_flags(launch.words))
    for flag in ("--config", "--config-file", "--config_path", "--config-path"):
        if flags.get(flag):
            return flags[flag]
    first = next((w for w in launch.words if not w.startswith("-")), None)
    return first if first and first.endswith((".yaml", ".yml")) else None


# deepy.py's options that take a list (argparse nargs="+"); its others take one value each
NEOX_DEEPY_LISTS = ("--eval_tasks",)


def neox_conf_files(words: list) -> list:
    """The config files after `deepy.py train.py`: its positional conf_file words (nargs "+"), each under
    --conf_dir/-d when given (gpt-neox 2.x megatron/neox_arguments/arguments.py NeoXArgs.consume_deepy_args)."""
    conf_dir, files, i = None, [], 0
    while i < len(words):
        word = words[i]
        if word.startswith("-"):
            flag, eq, value = word.partition("=")
            if not eq and flag in NEOX_DEEPY_LISTS:
                while i + 1 < len(words) and not words[i + 1].startswith("-"):
                    i += 1
            elif not eq:
                value, i = (words[i + 1] if i + 1 < len(words) else None), i + 1
            if flag in ("-d", "--conf_dir"):
                conf_dir = value
        else:
            files.append(word)
        i += 1
    return [posixpath.join(conf_dir, f) if conf_dir else f for f in files]


def config_names(launch: Launch) -> list:
    """Every config file a launch names: GPT-NeoX's several (neox_conf_files), else config_name's one."""
    if launch.tool == "neox":
        return neox_conf_files(launch.words)
    name = config_name(launch)
    return [name] if name else []


def find_config(name: str, launch: Launch) -> Optional[Path]:
    """The file `name` is beside the script or in the current directory (planner.frameworks.megatron.ds_json
    .candidates' order), or None."""
    return next((path for path in candidates(name, launch.sh.script_dir) if path.is_file()), None)


def launch_config(launch: Launch) -> tuple[Optional[Path], Optional[dict]]:
    """(the config file the launch names, its mapping) when found beside the script or in the current directory
    and readable; (None, None) when none is found, (the file, None) when one is unreadable. GPT-NeoX's several
    files, those found: their mappings merged left to right by top-level key, `-` read as `_` (neox_keys; NeoX
    itself refuses a key given in two files), the first file's path returned."""
    first, merged = None, None
    for name in config_names(launch):
        path = find_config(name, launch)
        if path is None:
            continue
        first = first or path
        try:
            data = loading.read_mapping(path)
        except UserError:
            return path, None
        merged = {**(merged or {}), **(neox_keys(data) if launch.tool == "neox" else data)}
    return first, merged


__all__ = ["LAUNCH_TOOLS", "Launch", "YAML_TOOLS", "config_name", "config_names", "find_config", "find_launch",
           "launch_config", "neox_conf_files", "neox_keys", "preset_for", "yaml_tool"]
