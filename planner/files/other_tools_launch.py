"""The run another tool's launch line describes (launch_run: its config file under the line's overrides, GPT-NeoX's
several merged; torchtune, NeMo 2, ColossalAI and OpenRLHF lines, the last planner.files.other_tools_openrlhf's),
and the refusal of a launch of a tool parplan does not read, naming the estimate command that prices the same run
(refuse_launch). Finding the line is planner.files.other_tools.find_launch. A NeMo 2 / Megatron-Bridge Python recipe
(a .py file importing nemo.collections or megatron.bridge) is refused the same way (refuse_recipe): its model preset
from the recipe's name (llm.llama3_70b.pretrain_recipe, llama3_8b_pretrain_config) and its layout from literal
assignments (recipe.trainer.strategy.tensor_model_parallel_size = 4, cfg.model.tensor_model_parallel_size = 4).
Every refusal that names an estimate command also says that estimate exits 0 whether or not the layout fits
(ESTIMATE_EXIT), so that CI uses check on a plan file instead.
"""

from __future__ import annotations

import re
from typing import Optional

from planner.errors import UserError
from planner.files.loading import CHECK_READS
from planner.files.other_tools import (COLOSSAL_PLUGINS, LAUNCH_TOOLS, YAML_TOOLS, Launch, _has_any, _section,
                                       config_names, find_config, launch_config, preset_for)
from planner.files.other_tools_openrlhf import openrlhf_run
from planner.files.other_tools_runs import ESTIMATE_EXIT, RUNS, Run, _dtype, _gpus, _int, _word, command
from planner.files.shellread import flag_dict, parse_flags
from planner.frameworks.megatron import nemo_hydra


def overrides(words: list) -> dict:
    """`a.b=v` (hydra, OmegaConf, MaxText, torchtune) and `--a.b v` (draccus: Levanter) as a nested mapping."""
    out: dict = {}
    pairs = [tuple(w.split("=", 1)) for w in words if re.match(r"[+~]{0,2}[A-Za-z_][\w.]*=", w)]
    pairs += [(f[2:], v) for f, v in parse_flags(words) if f.startswith("--") and "." in f and v is not None]
    for key, value in pairs:
        parts = key.lstrip("+~").split(".")
        node = out
        for part in parts[:-1][:6]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[parts[-1]] = value
    return out


def launch_run(launch: Launch, config: Optional[dict]) -> Run:
    """The Run of a refused launch: its config file (when found and read) under the line's overrides."""
    if launch.tool == "openrlhf":  # its own flags (planner.files.other_tools_openrlhf), no config file
        return openrlhf_run(launch)
    flags = flag_dict(parse_flags(launch.words))
    data = _merge(config or {}, overrides(launch.words))
    if launch.tool == "colossalai":
        return _colossal_run(flags, launch)
    if launch.tool == "nemo2":
        return _nemo2_run(flags, data)
    run = RUNS[launch.tool](data)
    if launch.tool == "torchtune":
        _torchtune_line(run, launch, flags)
    return run


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(_section(out, key), value) if isinstance(value, dict) else value
    return out


def _torchtune_line(run: Run, launch: Launch, flags: dict) -> None:
    """`tune run --nnodes N --nproc_per_node P RECIPE --config llama3_1/8B_full`: the GPUs, and the model of a
    built-in config's folder and size (torchtune 0.6.1 recipes/configs/llama3_1/8B_full.yaml)."""
    run.gpus = run.gpus or _gpus(flags.get("--nnodes", "1"), flags.get("--nproc_per_node"))
    name = flags.get("--config") or ""
    match = re.fullmatch(r"([a-z0-9_]+)/([0-9.]+[bB])_\w+", name)
    if run.model is None and match:
        run.model = preset_for(f"{match.group(1)}_{match.group(2).lower()}")


def _nemo2_run(flags: dict, data: dict) -> Run:
    """`nemo llm pretrain --factory llama3_8b trainer.strategy.tensor_model_parallel_size=2 data.micro_batch_size=1
    ...` (NeMo 2.x nemo/collections/llm/api.py; recipes use Megatron's distributed optimizer: zero=1)."""
    trainer, dat = _section(data, "trainer"), _section(data, "data")
    strategy = _section(trainer, "strategy")
    lay = {name: _int(strategy.get(key.split(".", 1)[1])) for key, name in nemo_hydra.LAYOUT_KEYS.items()
           if name != "mbs"}
    lay.update(mbs=_int(dat.get("micro_batch_size")), zero=1)
    factory = _word(flags.get("--factory") or flags.get("-f"))
    return Run(preset_for(factory), f"MODEL: the preset of recipe {factory or '?'}", lay, _int(dat.get("seq_length")),
               None, _int(dat.get("global_batch_size")), _gpus(trainer.get("devices"), trainer.get("num_nodes", 1)))


def _colossal_run(flags: dict, launch: Launch) -> Run:
    """ColossalAI examples/language/llama/benchmark.py and applications/Colossal-LLaMA/train.py flags: --plugin,
    --tp, --pp, --zero, --mbs, -b/--batch_size (per process), -l/--max_length, -g/--grad_checkpoint,
    --mixed_precision; the launcher's --nproc_per_node and --nnodes."""
    def get(*names):
        return next((flags[n] for n in names if n in flags), None)
    plugin = get("--plugin", "-p") or "gemini"
    zero = COLOSSAL_PLUGINS.get(plugin)
    lay = {"tp": _int(get("--tp")), "pp": _int(get("--pp")),
           "zero": zero if zero is not None else (_int(get("--zero")) or 0),
           "mbs": _int(get("--mbs", "--micro_batch_size")) or _int(get("-b", "--batch_size")),
           "recompute": "full" if _has_any(flags, ("-g", "--grad_checkpoint")) else "none"}
    launcher = flag_dict(parse_flags(launch.before + launch.words))
    nproc = launcher.get("--nproc_per_node", launcher.get("--nproc-per-node"))
    gpus = None if "--hostfile" in launcher else _gpus(launcher.get("--nnodes", "1"), nproc)
    return Run(None, "MODEL: the preset of the model the script builds (its --config/--pretrained)", lay,
               _int(get("-l", "--max_length")), _dtype(get("--mixed_precision")), None, gpus)


def refuse_recipe(path, text: str, cluster=None) -> None:
    """UserError for a NeMo 2 or Megatron-Bridge Python recipe (a file importing nemo.collections or megatron.bridge),
    naming the estimate command for its run; nothing for any other file."""
    found = RECIPE_IMPORT.search(text)
    if not found:
        return
    run = recipe_run(text, found.group(1).startswith("megatron"))
    raise UserError(f"{path}: a NeMo 2 / Megatron-Bridge Python recipe (it imports {found.group(1)}): parplan does "
                    f"not run Python, so check cannot read it. To price this run: `{command(run, cluster)}`"
                    + ("" if run.model else f" ({run.hint})") + f". {ESTIMATE_EXIT}")


RECIPE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(nemo\.collections(?:\.llm)?|megatron\.bridge)\b", re.MULTILINE)
# `recipe.trainer.strategy.tensor_model_parallel_size = 4`, `cfg.train.micro_batch_size = 1`: literal settings
RECIPE_SET = re.compile(r"^\s*[A-Za-z_]\w*((?:\.[A-Za-z_]\w*){1,6})\s*=\s*([0-9]{1,7}|True|False)\s*(?:#.*)?$",
                        re.MULTILINE)
# a recipe or config function's model: llama3_70b, llama31_405b, mixtral_8x7b, qwen3_30b_a3b
RECIPE_MODEL = re.compile(r"\b[a-z][a-z0-9]*(?:_[0-9]+x)?_[0-9]+(?:p[0-9]+)?b(?:_a[0-9]+b)?", re.IGNORECASE)


def recipe_run(text: str, bridge: bool) -> Run:
    """The Run a NeMo 2 recipe (recipe.trainer.strategy.*, recipe.data.*: nemo/collections/llm/recipes) or a
    Megatron-Bridge config (cfg.model.*, cfg.train.*: megatron/bridge/training/config.py ConfigContainer) sets with
    literal values, its model the first recipe name that is a preset."""
    words = [f"{key[1:]}={ {'True': '1', 'False': '0'}.get(value, value)}" for key, value in RECIPE_SET.findall(text)]
    data = overrides(words)
    if bridge:  # the parallel sizes on the model provider, the batch on the training config
        model, train = _section(data, "model"), _section(data, "train")
        data = {"trainer": {"strategy": model}, "data": {"seq_length": model.get("seq_length"),
                                                         "micro_batch_size": train.get("micro_batch_size"),
                                                         "global_batch_size": train.get("global_batch_size")}}
    run = _nemo2_run({}, data)
    run.gpus = run.gpus or _gpus(_recipe_arg(text, "num_nodes"), _recipe_arg(text, "num_gpus_per_node"))
    names = [m.group(0) for m in RECIPE_MODEL.finditer(text)]
    run.model = next((p for p in map(preset_for, names) if p), None)
    shown = _word(names[0]) if names else None
    run.hint = f"MODEL: the preset of recipe {shown}" if shown else "MODEL: the preset of the model the recipe trains"
    return run


def _recipe_arg(text: str, name: str) -> Optional[int]:
    """A recipe function's `name=8` argument, or `name=nodes` with `nodes: int = 8` a default in the file."""
    found = re.search(rf"\b{name}\s*=\s*(\w+)", text)
    value = found.group(1) if found else None
    if value and not value.isdigit():
        default = re.search(rf"\b{value}\s*(?::\s*int\s*)?=\s*([0-9]{{1,7}})\b", text)
        value = default.group(1) if default else None
    return _int(value)


def refuse_launch(launch: Launch, where, cluster=None) -> None:
    """UserError for a launch of a tool parplan does not read, with the estimate command for its run (from the
    config files it names, when found beside the script or in the current directory, under the line's overrides)."""
    config = launch_config(launch)[1]
    name, run, named = LAUNCH_TOOLS[launch.tool], launch_run(launch, config), config_names(launch)
    shown = "".join(c if c.isprintable() else "?" for c in launch.entry)
    lost = named if config is None else [n for n in named if find_config(n, launch) is None]
    unread = ""
    if lost and launch.tool in YAML_TOOLS:
        built_in = launch.tool != "neox" and not lost[0].endswith((".yaml", ".yml"))  # a name like llama3_1/8B_full
        where_not = ("is a built-in config name, not read" if built_in else
                     f"{'were' if len(lost) > 1 else 'was'} not found beside the script or in the current directory")
        some = "only the line's values are" if config is None else f"{'their' if lost[1:] else 'its'} values are not"
        unread = (f"; its config{'s' if len(lost) > 1 else ''} {', '.join(_word(n) or 'file' for n in lost[:4])} "
                  f"{where_not}, so {some} filled in")
    article = "an" if name[:1] in "AEIOU" else "a"
    raise UserError(f"{where}: `{shown} ...` is {article} {name} launch: parplan does not read {name}'s configs or "
                    f"launch lines. check reads {CHECK_READS}. To price this run: `{command(run, cluster)}`"
                    + ("" if run.model else f" ({run.hint})") + unread + "".join(f"; {n}" for n in run.notes)
                    + f". {ESTIMATE_EXIT}")


__all__ = ["launch_run", "overrides", "recipe_run", "refuse_launch", "refuse_recipe"]
