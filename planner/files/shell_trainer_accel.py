"""How a Hugging Face Trainer launch (planner.files.shell_trainer) is distributed when it names no DeepSpeed JSON of
its own: the Accelerate config `accelerate launch --config_file` gives, overlaid by the launch's own options; the
Trainer's `--fsdp`; or DDP under torchrun / the deepspeed launcher. Each is written as an Accelerate config (a
dict of accelerate_yaml's keys) so that planner.files.accelerate_yaml prices it.

Sources:
- accelerate 1.15.0 commands/launch.py: `--config_file` (else the default config, which parplan does not read);
  options given on the command line win over the file (launch_command_parser defaults; lines 1220-1283: the file's
  distributed_type is used only when none of --multi_gpu, --use_deepspeed, --use_fsdp is given, its
  deepspeed_config / fsdp_config / parallelism_config entries only where the option is not given).
- transformers 5.24.0 training_args.py: `fsdp` (line 1447; bare `--fsdp` is True, a string is the legacy list of
  trainer_utils.FSDPOption: full_shard, shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2, offload,
  auto_wrap), `fsdp_config` (line 1455: a JSON file; `_process_fsdp_args`, line 2775: keys lose an `fsdp_` prefix;
  version (default 2), reshard_after_forward, cpu_offload, activation_checkpointing), `_apply_legacy_fsdp_to_config`
  (line 2888: FSDP2 takes full_shard -> reshard True, shard_grad_op -> False and refuses the other strategies;
  FSDP1 takes the strategy's name; offload -> cpu_offload). mixed precision (line 1614): --bf16 / --fp16, else
  ACCELERATE_MIXED_PRECISION (the Accelerate config's mixed_precision).
- The Trainer without --deepspeed or --fsdp wraps the model in DistributedDataParallel (trainer.py, through
  Accelerator.prepare): DDP, accelerate_yaml's MULTI_GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.safetext import clipped
from planner.files import accelerate_yaml, shell_trainer
from planner.files.safe_read import parse_json, parse_yaml, read_text

TYPES = {"--use_deepspeed": "DEEPSPEED", "--use_fsdp": "FSDP", "--multi_gpu": "MULTI_GPU"}
TOP = ("--num_processes", "--num_machines", "--mixed_precision")
DS_OPTIONS = ("--zero_stage", "--offload_optimizer_device", "--offload_param_device", "--gradient_accumulation_steps",
              "--deepspeed_config_file")
FSDP_ITEMS = {"full_shard": True, "shard_grad_op": False, "no_shard": "NO_SHARD", "hybrid_shard": "HYBRID_SHARD",
              "hybrid_shard_zero2": "HYBRID_SHARD_ZERO2"}
DEFAULT_CONFIG = "~/.cache/huggingface/accelerate/default_config.yaml"


def _value(text: Optional[str]):
    """A launch option's word as the YAML would hold it: a whole number, true/false, else the text."""
    if text is None:
        return True
    if text.isdigit() and len(text) <= 7:
        return int(text)
    return {"true": True, "false": False}.get(text.lower(), text)


def overlay(cfg: dict, opts: dict) -> dict:
    """The Accelerate config with the launch's own options over it (accelerate commands/launch.py: an option given
    on the command line wins)."""
    out = {**cfg, "deepspeed_config": dict(cfg.get("deepspeed_config") or {}),
           "fsdp_config": dict(cfg.get("fsdp_config") or {}),
           "parallelism_config": dict(cfg.get("parallelism_config") or {})}
    given = [kind for flag, kind in TYPES.items() if flag in opts]
    if given:
        out["distributed_type"] = given[0]
    for flag in TOP:
        if opts.get(flag) is not None:
            out[flag[2:]] = _value(opts[flag])
    for flag, value in opts.items():
        if flag in DS_OPTIONS:
            out["deepspeed_config"][flag[2:]] = _value(value)
        elif flag.startswith("--fsdp_"):
            out["fsdp_config"][flag[2:]] = _value(value)
        elif flag.startswith("--parallelism_config_"):
            out["parallelism_config"][flag[2:]] = _value(value)
    return {k: v for k, v in out.items() if v != {}}


def from_config_file(launch, where: str) -> Optional[tuple[dict, Path]]:
    """(the Accelerate config `accelerate launch --config_file` names, overlaid by the launch's options, its path);
    None when the launch names none. Looked for as the launch's other files are (beside the script, then the
    current directory)."""
    opts = shell_trainer.launch_options(launch)
    name = opts.get("--config_file")
    if launch.launcher != "accelerate" or not name:
        return None
    said = f"{where}: accelerate launch --config_file {clipped(name)}"
    found = shell_trainer.find_file(launch, name, what=said)
    if found is None:
        raise UserError(f"{said}: not written by the script and not found beside it or in the current directory")
    text, path = found
    cfg = parse_yaml(text, str(path))
    if not isinstance(cfg, dict) or "distributed_type" not in cfg and not any(f in opts for f in TYPES):
        raise UserError(f"{where}: accelerate launch --config_file {clipped(name)}: {path} is not an Accelerate config "
                        "(no distributed_type)")
    return overlay(cfg, opts), path


def from_launch_options(launch, where: str, assumed: list) -> Optional[dict]:
    """An `accelerate launch` without --config_file that names its distribution (--use_deepspeed, --use_fsdp,
    --multi_gpu): the config its options make, said in `assumed` (accelerate would fill the rest from its default
    config file, not read); None for other launches."""
    opts = shell_trainer.launch_options(launch)
    if launch.launcher != "accelerate" or not any(f in opts for f in TYPES):
        return None
    assumed.append(f"accelerate launch without --config_file: read from its own options; the default config "
                   f"({DEFAULT_CONFIG}), which accelerate reads for the rest, is not")
    return overlay({}, opts)


def trainer_fsdp(launch, where: str) -> Optional[dict]:
    """The Accelerate config of the Trainer's own `--fsdp` (and `--fsdp_config` JSON), or None without --fsdp."""
    flags = launch.flags
    value = flags.get("--fsdp", "")
    if "--fsdp" not in flags or value == "":
        return None
    if flags.get("--deepspeed"):
        raise UserError(f"{where}: --fsdp {value[:40]!r} with --deepspeed {flags['--deepspeed'][:40]}: the Trainer "
                        "refuses both (transformers 5.24.0 trainer.py line 475)")
    conf = _fsdp_json(launch, where)
    version = conf.get("version", 2)
    for item in ([] if value is None else value.split()):
        item = item.lower()
        if item in FSDP_ITEMS:
            conf.setdefault("reshard_after_forward", FSDP_ITEMS[item] if str(version) == "2" else item.upper())
        elif item == "offload":
            conf.setdefault("cpu_offload", True)
        elif item != "auto_wrap":
            raise UserError(f"{where}: --fsdp {value[:60]!r}: unknown option {item[:20]!r}; the Trainer takes "
                            f"{', '.join(FSDP_ITEMS)}, offload, auto_wrap")
    return {"distributed_type": "FSDP", "fsdp_config": {  # TrainingArguments: auto_wrap_policy from --fsdp_config,
        "fsdp_auto_wrap_policy": conf.get("auto_wrap_policy", "TRANSFORMER_BASED_WRAP"),  # else per block (5.24.0
        # training_args.py line 2833: FSDP_AUTO_WRAP_POLICY[0])
        "fsdp_version": version, "fsdp_reshard_after_forward": conf.get("reshard_after_forward", True),
        "fsdp_activation_checkpointing": conf.get("activation_checkpointing", False),
        "fsdp_offload_params": conf.get("cpu_offload", False)}}


def _fsdp_json(launch, where: str) -> dict:
    """The --fsdp_config JSON (keys without their `fsdp_` prefix), {} when not given."""
    name = launch.flags.get("--fsdp_config")
    if not name:
        return {}
    if name.lstrip().startswith("{"):
        conf = parse_json(name, "--fsdp_config")
    else:
        said = f"{where}: --fsdp_config {clipped(name)}"
        found = shell_trainer.find_file(launch, name, what=said)
        if found is None:
            raise UserError(f"{said}: not written by the script and not found beside it or in the current directory")
        conf = parse_json(found[0], str(found[1]))
    if not isinstance(conf, dict):
        raise UserError(f"{where}: --fsdp_config {clipped(name)}: expected a JSON object")
    return {k[5:] if k.startswith("fsdp_") else k: v for k, v in conf.items()}


def hybrid_note(cfg: dict, notes: list) -> None:
    """transformers 5.24 takes hybrid_shard / no_shard from --fsdp only with fsdp_config version 1 (FSDP2 has no such
    strategy): priced as FSDP1 runs them, said in a note."""
    fsdp = cfg.get("fsdp_config") or {}
    strategy = fsdp.get("fsdp_reshard_after_forward")
    if isinstance(strategy, str) and strategy.lower() in ("hybrid_shard", "hybrid_shard_zero2", "no_shard") \
            and str(fsdp.get("fsdp_version")) == "2":
        notes.append(f"--fsdp {strategy.lower()}: transformers 5.24 refuses it with FSDP2 (its default; "
                     "training_args.py line 2927: set fsdp_config version 1); priced as FSDP1 runs it")


def trainer_precision(cfg: dict, script_precision: Optional[str]) -> Optional[str]:
    """The run's mixed precision: --bf16 / --fp16 on, else the Accelerate config's mixed_precision
    (transformers 5.24.0 training_args.py lines 1614-1618); None when neither says."""
    if script_precision in ("bf16", "fp16"):
        return script_precision
    value = cfg.get("mixed_precision")
    return accelerate_yaml.PRECISION.get(value) if isinstance(value, str) else None


def with_mixed_precision(ds: dict, mixed: Optional[str], built: bool) -> dict:
    """A DeepSpeed config as accelerate hands it to the Trainer: the "auto" bf16/fp16 that accelerate_yaml writes into
    a config it `built` dropped (accelerate's own has none), then a bf16 (fp16) section with enabled true added where
    the mixed precision asks for one and the config has none (accelerate 1.15.0 utils/dataclasses.py
    DeepSpeedPlugin.set_mixed_precision, lines 1415-1427); a file's own sections are kept."""
    out = {k: v for k, v in ds.items() if not (built and k in ("bf16", "fp16") and v == {"enabled": "auto"})}
    key = {"bf16": "bf16", "fp8": "bf16", "fp16": "fp16"}.get(mixed or "")
    if key and key not in out:
        out[key] = {"enabled": True}
    return out


def deepspeed_source(cfg: dict, yaml_path: Path, launch, mixed: Optional[str]) -> tuple[str, Path]:
    """(the DeepSpeed JSON text, the path named in messages) an Accelerate config of type DEEPSPEED runs: its
    deepspeed_config_file (from the current directory, beside the YAML, then beside the script), else the config
    accelerate builds from its fields; bf16/fp16 as accelerate sets them."""
    def read(path: Path) -> dict:
        ds = parse_json(read_text(path), str(path))
        if not isinstance(ds, dict):
            raise UserError(f"{path}: not a DeepSpeed config (a JSON object)")
        return ds
    extra = (launch.sh.script_dir,) if launch.sh.script_dir else ()
    ds = accelerate_yaml.deepspeed_config(cfg, yaml_path, read, extra)
    built = not (cfg.get("deepspeed_config") or {}).get("deepspeed_config_file")
    return json.dumps(with_mixed_precision(ds, mixed, built)), yaml_path


__all__ = ["deepspeed_source", "from_config_file", "from_launch_options", "hybrid_note", "overlay",
           "trainer_fsdp", "trainer_precision", "with_mixed_precision"]
