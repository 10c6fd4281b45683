"""Axolotl and LLaMA-Factory YAML read as the Hugging Face Trainer run they start, for `parplan check`.

Both tools hand their settings to transformers' TrainingArguments, so the run is priced by the Trainer-launch reader
(planner.files.shell_trainer_load.load) with the YAML's values as the Trainer's flags: a DeepSpeed JSON's "auto"
values are filled, and its numbers checked, exactly as for `deepspeed train.py --deepspeed ds.json
--per_device_train_batch_size ...`; FSDP is the Trainer's `--fsdp` / `--fsdp_config`, no DeepSpeed and no FSDP is DDP,
and the optimizer is the Trainer's `--optim`, each as that reader prices them.

How each tool's keys are read, and what is refused, is planner.files.finetune_yaml_read (the tools' keys and their
sources in its docstring). Launch lines: Axolotl's CLI takes `--key value` overrides (cli/utils/args.py);
`llamafactory-cli train X.yaml key=value` overrides (hparams/parser.py read_args); NNODES and NPROC_PER_NODE size its
torchrun (launcher.py).

The DeepSpeed JSON is opened relative to the working directory by both tools; parplan also looks beside the YAML
and in the folders above it (the tools' example trees run from their repository root), saying where it found it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Optional

from planner.errors import UserError
from planner.safetext import clipped
from planner.files import axolotl_states, accelerate_yaml, native_sizes, other_tools, shell_trainer
from planner.files import other_tools_launch, other_tools_runs
from planner.files import shell_trainer_load as trainer_load
from planner.files.finetune_yaml_read import Settings, settings
from planner.files.loading import Problem, read_mapping
from planner.files.safe_read import first_file, read_text
from planner.files.shellread import ShellScript, parse_flags
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

TOOLS = {"axolotl": "Axolotl", "llamafactory": "LLaMA-Factory"}
# the Trainer flags the YAML's keys stand for, as messages name them
TRAINER_WORDS = {"axolotl": {"--per_device_train_batch_size": "micro_batch_size", "--optim": "optimizer",
                             shell_trainer.SEQ_FLAGS[0]: "sequence_len"},
                 "llamafactory": {shell_trainer.SEQ_FLAGS[0]: "cutoff_len"}}
SAME_WORDS = ("--gradient_accumulation_steps", "--gradient_checkpointing", "--per_device_train_batch_size",
              "--fsdp_config", "--deepspeed", "--optim", "--fsdp", "--bf16", "--fp16")


def framework(data: dict) -> str:
    """deepspeed when the YAML names a DeepSpeed config, else fsdp (FSDP or DDP under Accelerate)."""
    return "deepspeed" if isinstance(data, dict) and data.get("deepspeed") else "fsdp"


# ---- the run --------------------------------------------------------------------------------------------------------

def model_for(s: Settings, model, where, read: ReadNotes):
    """--model, else the preset the Hub id names (said in a note), else a UserError asking for --model."""
    if model:
        return model
    preset = other_tools.preset_for(s.model_id)
    shown = "".join(c if c.isprintable() else "?" for c in str(s.model_id))[:80]
    if preset:
        read.notes.append(f"model {preset}: the parplan preset with the shapes of {s.model_key} {shown} (matched by "
                          "its repository name; --model overrides)")
        return preset
    said = (f"trains {s.model_key} {shown!r}, a Hugging Face Hub repository that parplan does not download and that "
            "matches none of its presets" if s.model_id else f"names no model ({s.model_key})")
    raise UserError(f"{where}: --model is required: the {TOOLS[s.tool]} config {said}; give --model with a preset "
                    "(parplan models), a spec file or the model's config.json")


def _json_text(s: Settings, path: Path, dirs: list, read: ReadNotes) -> tuple[str, str]:
    """(the DeepSpeed config's text, the name messages give it): an inline mapping, or the file found in the working
    directory, then in `dirs` (the YAML's folder and those above it, the script's folder)."""
    if isinstance(s.deepspeed, dict):
        return json.dumps(s.deepspeed), f"{path.name}: deepspeed"
    name = str(s.deepspeed)
    places = [Path(name)] if Path(name).is_absolute() else [Path.cwd() / name] + [Path(d) / name for d in dirs]
    found = first_file(places, f"{path}: deepspeed: {clipped(name)!r}")
    if found is None:
        raise UserError(f"{path}: deepspeed: {clipped(name)!r}: the DeepSpeed JSON is not found in the current "
                        f"directory, beside the YAML or in a folder above it; run check from the folder the "
                        f"{TOOLS[s.tool]} run starts in")
    if found != places[0]:
        read.notes.append(f"deepspeed: {clipped(name)} read from {found.parent} ({TOOLS[s.tool]} opens it relative "
                          "to the working directory)")
    return read_text(found), str(found)


def _trainer_launch(s: Settings, ds: Optional[tuple[str, str]], path: Path, start) -> shell_trainer.Launch:
    """The Trainer launch the YAML stands for: its values as TrainingArguments flags, the DeepSpeed JSON (text,
    name) as one the script wrote."""
    f = s.flags
    flags = {"--bf16": str(f.precision == "bf16"), "--fp16": str(f.precision == "fp16"),
             "--gradient_checkpointing": str(f.recompute == "full"), shell_trainer.SEQ_FLAGS[0]: str(f.seq_len),
             **s.extra}
    for flag, value in (("--per_device_train_batch_size", f.micro_batch), ("--gradient_accumulation_steps",
                                                                           f.grad_accum)):
        if value is not None:
            flags[flag] = str(value)
    sh = ShellScript(files={}, warnings=list(start.sh.warnings), script_dir=str(path.parent))
    if ds is not None:
        flags["--deepspeed"], sh.files[ds[1]] = ds[1], ds[0]
    return shell_trainer.Launch(start.launcher, start.opts, f"{TOOLS[s.tool]} config", flags, sh)


def _in_yaml_words(text: str, tool: str) -> str:
    """A message of the Trainer-launch reader in the YAML's words."""
    for flag, key in TRAINER_WORDS[tool].items():
        text = text.replace(flag, f"{key} (the Trainer's {flag[2:]})")
    for flag in SAME_WORDS:
        text = text.replace(flag, flag[2:])
    return text


@dataclasses.dataclass
class Start:
    """How the run is started: the launcher's name and options (sizes the cluster) and the script read, if any."""

    launcher: str
    opts: list
    sh: ShellScript
    dirs: list


def load(path: Path, data: dict, tool: str, model, cluster, nodes, cli: TrainerFlags, read: ReadNotes,
         load_text: Callable, start: Optional[Start] = None) -> Problem:
    """The Problem of an Axolotl or LLaMA-Factory config. load_text: native.load_native_text."""
    where = str(path)
    s = settings(tool, data, where, _gpu(cluster) if tool == "axolotl" else None, _extra_ok(start))
    if not cluster:
        raise UserError(f"{where}: --cluster is required: an {TOOLS[tool]} config does not say which GPUs it runs on "
                        "(e.g. --cluster dgx-h100 [--nodes N])")
    spec = model_for(s, model, where, s.read)
    start = start or Start(TOOLS[tool], [], ShellScript(), [])
    dirs = [path.parent, *list(path.parent.parents)[:3], *start.dirs]
    before = (len(read.assumed), len(read.notes))
    read.assumed.extend(s.read.assumed)
    read.notes.extend(s.read.notes)
    try:
        ds = _json_text(s, path, dirs, read) if s.deepspeed else None
        prob = trainer_load.load(path, _trainer_launch(s, ds, path, start), spec, cluster, nodes, cli, read,
                                 load_text, native_sizes._cluster)
    except UserError as err:
        raise UserError(_in_yaml_words(str(err), tool)) from None
    read.assumed[before[0]:] = [_in_yaml_words(a, tool) for a in read.assumed[before[0]:]]
    read.notes[before[1]:] = [_in_yaml_words(n, tool) for n in read.notes[before[1]:]]
    prob = _computed(prob, s, cli, read)
    return axolotl_states.apply(prob, data, s.deepspeed, read) if tool == "axolotl" else _liger(prob, data, read)


def _extra_ok(start: Optional[Start]) -> bool:
    """The launch sets ALLOW_EXTRA_ARGS or USE_MCA (llamafactory 0.9.5 extras/misc.py is_env_enabled: true, y or 1),
    under which LLaMA-Factory takes keys its own parser does not know."""
    env = start.sh.env if start is not None else {}
    return any(str(env.get(name, "0")).lower() in ("true", "y", "1") for name in ("ALLOW_EXTRA_ARGS", "USE_MCA"))


# parplan presets whose Hugging Face model_type Liger patches in LLaMA-Factory (llama, mixtral, qwen3, qwen3_moe)
LIGER_FAMILIES = ("llama2", "llama3", "mixtral", "qwen3")


def _liger(prob: Problem, data: dict, read: ReadNotes) -> Problem:
    """LLaMA-Factory's enable_liger_kernel (llamafactory 0.9.5 model/model_utils/liger_kernel.py): for stages pt and
    sft it patches the model with Liger's kernels, the fused linear cross-entropy among them, whose chunked loss is
    priced as Axolotl's Liger plugin is (axolotl_states); other stages need the logits and keep the plain loss."""
    if data.get("enable_liger_kernel") is not True:
        return prob
    stage, name = str(data.get("stage", "sft"))[:20], prob.model.name
    family = other_tools.preset_for(name) or name
    if stage not in ("pt", "sft") or not family.startswith(LIGER_FAMILIES):
        why = (f"stage {stage} needs the logits, so LLaMA-Factory turns the fused linear cross-entropy off" if
               stage not in ("pt", "sft") else f"{name[:40]} is no model family parplan knows Liger patches "
               "(llama, mixtral, qwen3)")
        read.notes.append(f"enable_liger_kernel: {why}: the whole micro-batch's logits are priced; Liger's RMSNorm, "
                          "SwiGLU and RoPE kernels are not priced")
        return prob
    chunks = axolotl_states.loss_chunks(prob, {"liger_fused_linear_cross_entropy": True})
    read.notes.append(f"enable_liger_kernel: Liger's fused linear cross-entropy: the output layer and loss run over "
                      f"{chunks} token chunk{'s' if chunks > 1 else ''}, one chunk's logits alive at a time (priced); "
                      "its RMSNorm, SwiGLU and RoPE kernels are not priced")
    if chunks <= 1:
        return prob
    return dataclasses.replace(prob, train=prob.train.model_copy(update={"loss_chunks": chunks}))


def _gpu(cluster):
    """The cluster's GPUProfile (Axolotl's tf32 "auto" depends on it), None without --cluster."""
    return native_sizes._load_cluster(cluster).gpu_profile if cluster else None


def _computed(prob: Problem, s: Settings, cli: TrainerFlags, read: ReadNotes) -> Problem:
    """The run priced in the precision the tool computes in (Settings.compute: Axolotl's tf32, LLaMA-Factory's
    pure_bf16) where the Trainer's flags alone train in fp32 (the Trainer reader's fp32 line dropped: the tool's
    own line says what is priced); check's --precision wins."""
    if s.compute is None or cli.precision is not None or prob.train.precision != "fp32":
        return prob
    read.assumed[:] = [a for a in read.assumed if not a.startswith("fp32 training:")]
    return dataclasses.replace(prob, train=prob.train.model_copy(update={"precision": s.compute}))


def load_yaml(path: Path, model, cluster, nodes, cli: TrainerFlags, read: ReadNotes, load_text: Callable) -> Problem:
    """Any YAML `check` reads natively (planner.files.native.is_native routes no other here): an Axolotl or
    LLaMA-Factory config, another tool's (refused by name, planner.files.other_tools_runs), or an Accelerate config."""
    data = read_mapping(path)
    tool = other_tools.yaml_tool(data)
    if tool in TOOLS:
        return load(path, data, tool, model, cluster, nodes, cli, read, load_text)
    if tool:
        other_tools_runs.refuse_yaml(tool, data, path, cluster)
    if not accelerate_yaml.is_accelerate(data):
        raise UserError(f"{path}: not an Accelerate config (no distributed_type) nor a plan file")
    return accelerate_yaml.load(path, data, model, cluster, nodes, cli, read)


# ---- a launch line naming the YAML ----------------------------------------------------------------------------------

def launch_config(launch: other_tools.Launch, where) -> tuple[Path, dict]:
    """The YAML an `axolotl train` / `llamafactory-cli train` line names, read, with the line's overrides over it
    (Axolotl `--key value`, LLaMA-Factory `key=value`)."""
    path, data = other_tools.launch_config(launch)
    name = other_tools.config_name(launch)
    if path is None or data is None:
        said = (f"the {TOOLS[launch.tool]} config {clipped(name)!r} it names is not" if name
                else "it names no YAML config")
        raise UserError(f"{where}: `{launch.entry}` starts an {TOOLS[launch.tool]} run, but {said} found (or readable) "
                        f"beside the script or in the current directory; check the YAML itself: parplan check "
                        f"CONFIG.yaml --model MODEL --cluster CLUSTER")
    return path, {**data, **_line_values(launch)}


def _line_values(launch: other_tools.Launch) -> dict:
    """The overrides on the line as YAML values (numbers, true/false, words)."""
    if launch.tool == "llamafactory":
        pairs = [w.split("=", 1) for w in launch.words if "=" in w and not w.startswith("-")]
    else:
        pairs = [(f.lstrip("-").replace("-", "_"), v) for f, v in parse_flags(launch.words) if f.startswith("--")]
        pairs = [(k[3:], "false") if k.startswith("no_") and v is None else (k, v or "true") for k, v in pairs]
    return {k: _scalar(v) for k, v in pairs if k not in ("launcher", "cloud")}


def _scalar(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    return int(text) if text.isdigit() and len(text) <= 9 else text


def load_launch(launch: other_tools.Launch, path: Path, model, cluster, nodes, cli: TrainerFlags, read: ReadNotes,
                load_text: Callable) -> Problem:
    """A launch script's Axolotl / LLaMA-Factory run; other tools' launches are refused (other_tools_launch)."""
    if launch.tool not in TOOLS:
        other_tools_launch.refuse_launch(launch, path, cluster)
    yaml_path, data = launch_config(launch, path)
    return load(yaml_path, data, launch.tool, model, cluster, nodes, cli, read, load_text, _start(launch))


def _start(launch: other_tools.Launch) -> Start:
    """The launcher: accelerate's options before `-m axolotl...`; llamafactory-cli's torchrun from NNODES and
    NPROC_PER_NODE; else the tool's own (no node count)."""
    dirs = [launch.sh.script_dir] if launch.sh.script_dir else []
    words = launch.before
    if "accelerate" in [Path(w).name for w in words[:2]] and "launch" in words:
        end = len(words) - (2 if len(words) > 1 and words[-2] in ("-m", "--module") else 1)
        return Start("accelerate", words[words.index("launch") + 1:end], launch.sh, dirs)
    env = launch.sh.env
    if launch.tool == "llamafactory" and ("NNODES" in env or "NPROC_PER_NODE" in env):
        opts = [f"--nnodes={env.get('NNODES', '1')}"] + ([f"--nproc_per_node={env['NPROC_PER_NODE']}"]
                                                         if "NPROC_PER_NODE" in env else [])
        return Start("torchrun", opts, launch.sh, dirs)
    return Start(launch.entry, [], launch.sh, dirs)


def launch_framework(launch: other_tools.Launch, where) -> str:
    """deepspeed or fsdp for a launch of a YAML tool (framework of the YAML it names); megatron for the others,
    which load_launch refuses before anyone asks."""
    if launch.tool not in TOOLS:
        return "megatron"
    return framework(launch_config(launch, where)[1])


__all__ = ["Settings", "Start", "TOOLS", "framework", "launch_framework", "load", "load_launch", "load_yaml"]
