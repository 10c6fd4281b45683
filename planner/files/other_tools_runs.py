"""The run another tool's YAML config describes, in `parplan estimate`'s terms (Run, command), read by the tool's
own keys (torchtune, NeMo 1.x hydra, Nanotron, Levanter, MaxText, GPT-NeoX: RUNS), and the refusal of such a config that
names the estimate command pricing the same run (refuse_yaml). Telling the tools apart is
planner.files.other_tools; launch lines' runs are planner.files.other_tools_launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from planner.errors import UserError
from planner.files.loading import CHECK_READS
from planner.files.other_tools import YAML_TOOLS, _section, neox_keys, preset_for
from planner.frameworks.megatron import nemo_hydra


# ---- values shown in a suggested command: numbers and short names only, never the file's text ----------------------

def _int(value) -> Optional[int]:
    """A count from a config or an override (`4`, `"4"`), else None (absent, -1, an interpolation, anything else)."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,7}", value):
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10**7 else None


def _word(value) -> Optional[str]:
    """A short name (model, recipe) fit to echo, else None."""
    return value if isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9._/-]{1,60}", value) else None


def _on(value) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1", "yes"))


def _dtype(value) -> Optional[str]:
    """parplan's precision for a dtype word (bf16, bfloat16, bf16-mixed, fp16, 16-mixed, float32, f32...)."""
    text = str(value).lower() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if "bf16" in text or "bfloat16" in text:
        return "bf16"
    if text in ("16", "fp16", "float16", "half") or text.startswith("16-"):
        return "fp16"
    return "fp32" if text in ("32", "fp32", "float32", "f32") or text.startswith("32-") else None


# ---- the run a refused config describes, as a `parplan estimate` command ---------------------------------------------

@dataclass
class Run:
    """What a config or launch line says, in `parplan estimate`'s terms (None: not said)."""

    model: Optional[str] = None  # a parplan preset
    hint: str = ""  # what the config says of its model, when no preset matches
    layout: dict = field(default_factory=dict)
    seq: Optional[int] = None
    precision: Optional[str] = None
    global_batch: Optional[int] = None
    gpus: Optional[int] = None
    stack: Optional[str] = None
    notes: list = field(default_factory=list)  # what the run holds that the command does not price


DEFAULT_ONE = ("tp", "pp", "cp", "ep", "vpp")  # layout sizes left out of a command when 1

# what a refusal that hands over an estimate command adds: estimate prices, it does not gate
ESTIMATE_EXIT = ("`parplan estimate` exits 0 even when the layout does not fit: for a CI exit code, put the layout in "
                 "a plan file (model, cluster, train, layout, as `parplan plan --save` writes) and run `parplan check "
                 "PLAN.json` (exit 1 when it does not fit)")


def command(run: Run, cluster=None) -> str:
    """`parplan estimate MODEL --cluster C --layout ... --seq-len N --precision P ...` for `run`."""
    shown = [f"{k}={v}" for k, v in run.layout.items() if v is not None and not (k in DEFAULT_ONE and v == 1)]
    lay = ",".join(shown) or "tp=...,pp=...,mbs=..."
    cluster = cluster if isinstance(cluster, str) and _word(cluster) else "CLUSTER"
    out = [f"parplan estimate {run.model or 'MODEL'} --cluster {cluster}"]
    for option, value in (("--gpus", run.gpus), ("--stack", run.stack), ("--layout", lay), ("--seq-len", run.seq),
                          ("--precision", run.precision), ("--global-batch", run.global_batch)):
        if value is not None:
            out.append(f"{option} {value}")
    return " ".join(out)


def _shape_hint(data: dict, keys: tuple, prefix: str) -> str:
    """`MODEL: a preset or a spec file with model.num_layers 12, model.hidden_size 768` from the model section."""
    said = [f"{prefix}{k} {data[k]}" for k in keys if _int(data.get(k))]
    shown = f" with {', '.join(said)}" if said else ""
    return f"MODEL: a preset or a spec file{shown} (parplan models; parplan schema ModelSpec)"


def _gpus(*counts) -> Optional[int]:
    values = [_int(c) for c in counts]
    if not values or None in values:
        return None
    total = 1
    for v in values:
        total *= v
    return total


def torchtune_run(d: dict) -> Run:
    """torchtune 0.6.1 recipes/full_finetune_distributed.py: FSDP2 over every GPU (reshard after forward: ZeRO-3),
    `batch_size` per GPU, `enable_activation_checkpointing`, `dtype`, `tensor_parallel_dim`, tokenizer.max_seq_len."""
    comp = str(_section(d, "model").get("_component_", "")).rsplit(".", 1)[-1]
    tp = _int(d.get("tensor_parallel_dim"))
    checkpointing = d.get("enable_activation_checkpointing")
    lay = {"tp": tp if tp and tp > 1 else None, "zero": 3, "mbs": _int(d.get("batch_size")),
           "recompute": None if checkpointing is None else "full" if _on(checkpointing) else "none"}
    return Run(preset_for(comp), f"MODEL: the preset with the shapes of model._component_ {_word(comp) or '?'}", lay,
               _int(_section(d, "tokenizer").get("max_seq_len")), _dtype(d.get("dtype")),
               stack=None if lay["tp"] else "fsdp")


def nemo1_run(d: dict) -> Run:
    """NeMo 1.x megatron_gpt_config.yaml: model.* parallel sizes (nemo_hydra.LAYOUT_KEYS), micro/global batch,
    encoder_seq_length, activations_checkpoint_granularity, optim.name distributed_fused_adam (the distributed
    optimizer, ZeRO-1); trainer.precision, devices x num_nodes."""
    model, trainer = _section(d, "model"), _section(d, "trainer")
    lay = {}
    for key, name in nemo_hydra.LAYOUT_KEYS.items():
        value = model.get(key.split(".", 1)[1])
        lay[name] = (1 if value else None) if isinstance(value, bool) else _int(value)
    if "distributed" in str(_section(model, "optim").get("name", "")):
        lay["zero"] = 1
    granularity = model.get("activations_checkpoint_granularity")
    lay["recompute"] = granularity if granularity in ("selective", "full") else "none"
    hint = _shape_hint(model, ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                               "num_query_groups"), "model.")
    return Run(None, hint, lay, _int(model.get("encoder_seq_length")), _dtype(trainer.get("precision")),
               _int(model.get("global_batch_size")), _gpus(trainer.get("devices"), trainer.get("num_nodes")))


def nanotron_run(d: dict) -> Run:
    """nanotron 0.4 config: parallelism dp/tp/pp/expert_parallel_size/tp_mode, tokens micro_batch_size,
    sequence_length, batch_accumulation_per_replica, optimizer.zero_stage, model.dtype, model.model_config."""
    par, tokens, model = _section(d, "parallelism"), _section(d, "tokens"), _section(d, "model")
    dp, tp, pp = (_int(par.get(k)) for k in ("dp", "tp", "pp"))
    mbs = _int(tokens.get("micro_batch_size"))
    zero = _section(d, "optimizer").get("zero_stage")
    lay = {"tp": tp, "pp": pp, "dp": dp, "ep": _int(par.get("expert_parallel_size")), "mbs": mbs,
           "zero": zero if zero in (0, 1) and not isinstance(zero, bool) else None, "sp": 1 if str(par.get("tp_mode", "")).upper() == "REDUCE_SCATTER"
           and (tp or 1) > 1 else None}
    accum = _int(tokens.get("batch_accumulation_per_replica"))
    gbs = mbs * dp * accum if mbs and dp and accum else None
    hint = _shape_hint(_section(model, "model_config"), ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                          "num_key_value_heads", "intermediate_size", "vocab_size"),
                       "model_config.")
    return Run(None, hint, lay, _int(tokens.get("sequence_length")), _dtype(model.get("dtype")), gbs,
               _gpus(dp, tp, pp))


def levanter_run(d: dict) -> Run:
    """levanter 1.1 TrainerConfig: parameters and optimizer sharded over the data axis (fsdp_axis "embed": ZeRO-3),
    model_axis_size (tensor parallel), per_device_parallelism (the micro-batch; -1: derived), train_batch_size,
    mp (jmp policy, c= the compute dtype); LlamaConfig seq_len (default 2048), gradient_checkpointing (default on)."""
    trainer, model = _section(d, "trainer"), _section(d, "model")
    tp = _int(trainer.get("model_axis_size"))
    compute = re.search(r"(?:^|,)\s*c(?:ompute)?=([a-z0-9]+)", str(trainer.get("mp", "f32")))
    lay = {"tp": tp if tp and tp > 1 else None, "zero": 3, "mbs": _int(trainer.get("per_device_parallelism")),
           "recompute": "none" if model.get("gradient_checkpointing") is False else "full"}
    kind = _word(model.get("type"))
    hint = f"MODEL: the preset or spec file of the {kind + ' ' if kind else ''}model it trains"
    return Run(None, hint, lay, _int(model.get("seq_len")) or 2048,
               _dtype(compute.group(1) if compute else trainer.get("mp", "f32")), _int(trainer.get("train_batch_size")),
               stack=None if lay["tp"] else "fsdp")


def maxtext_run(d: dict) -> Run:
    """MaxText base.yml: ici_/dcn_ tensor, pipeline, context, expert parallelism (their product), fsdp (-1: the
    remaining devices; parameters and optimizer sharded: ZeRO-3), per_device_batch_size, max_target_length,
    remat_policy (full, else a saving policy: selective), dtype, model_name."""
    size = {name: _gpus(d.get(f"ici_{name}_parallelism", 1), d.get(f"dcn_{name}_parallelism", 1))
            for name in ("tensor", "pipeline", "context", "expert")}
    fsdp = any(d.get(f"{p}_fsdp_parallelism", -1 if p == "ici" else 1) != 1 for p in ("ici", "dcn"))
    remat = d.get("remat_policy", "full")
    lay = {"tp": size["tensor"], "pp": size["pipeline"], "cp": size["context"], "ep": size["expert"],
           "zero": 3 if fsdp else 0, "mbs": _int(d.get("per_device_batch_size")),
           "recompute": "full" if remat == "full" else "selective" if remat else "none"}
    lay = {k: v for k, v in lay.items() if v is not None and not (k in DEFAULT_ONE and v == 1)}
    model = _word(d.get("model_name"))
    return Run(preset_for(model), f"MODEL: the preset of model_name {model or '?'}", lay,
               _int(d.get("max_target_length")), _dtype(d.get("dtype", "bfloat16")),
               stack="fsdp" if set(lay) <= {"zero", "mbs", "recompute"} and lay.get("recompute") != "selective"
               else None)


def neox_run(d: dict) -> Run:
    """gpt-neox 2.x megatron/neox_arguments/neox_args.py (keys' `-` read as `_`, neox_keys): model_parallel_size
    (tp), pipe_parallel_size (0, the default: no pipeline module; 1: one stage), sequence_parallel, moe_num_experts
    with moe_expert_parallel_size, checkpoint_activations (full), precision, seq_length; deepspeed_args.py:
    train_micro_batch_size_per_gpu, gradient_accumulation_steps, train_batch_size, zero_optimization.stage (default
    0), the fp16/bf16 sections, num_gpus x num_nodes (else the hostfile's: not said)."""
    d = neox_keys(d)
    if not d:  # a launch whose configs were not found: nothing said, no NeoX default shown as if read
        return Run(None, _shape_hint(d, (), ""))
    tp, pp = _int(d.get("model_parallel_size")) or 1, _int(d.get("pipe_parallel_size")) or 1
    zero = _section(d, "zero_optimization").get("stage")
    mbs, accum = _int(d.get("train_micro_batch_size_per_gpu")), _int(d.get("gradient_accumulation_steps", 1))
    experts = _int(d.get("moe_num_experts"))
    lay = {"tp": tp, "pp": pp, "ep": _int(d.get("moe_expert_parallel_size")) if experts and experts > 1 else None,
           "zero": zero if zero in (0, 1, 2, 3) and not isinstance(zero, bool) else None, "mbs": mbs,
           "recompute": "full" if _on(d.get("checkpoint_activations")) else "none",
           "sp": 1 if _on(d.get("sequence_parallel")) and tp > 1 else None}
    gpus = _gpus(d.get("num_gpus"), d.get("num_nodes"))
    dp = gpus // (tp * pp) if gpus and gpus % (tp * pp) == 0 else None
    gbs = _int(d.get("train_batch_size")) or (_int(mbs * accum * dp) if mbs and accum and dp else None)
    hint = _shape_hint(d, ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "intermediate_size",
                           "seq_length"), "")
    if gbs is None and mbs and _int(d.get("gradient_accumulation_steps")):
        hint += (f"; --global-batch: train_micro_batch_size_per_gpu {mbs} x gradient_accumulation_steps {accum} x "
                 "the data-parallel size (GPUs / (tp x pp))")
    return Run(None, hint, lay, _int(d.get("seq_length")), _neox_precision(d), gbs, gpus)


def _neox_precision(d: dict) -> Optional[str]:
    """gpt-neox 2.x arguments.py NeoXArgs.calculate_derived: `precision` when said, else fp16 from an enabled fp16
    section, bfloat16 from an enabled bf16 section, else fp32."""
    if "precision" in d:
        return _dtype(d["precision"])
    enabled = [key for key in ("fp16", "bf16") if _on(_section(d, key).get("enabled"))]
    return enabled[0] if enabled else "fp32"


RUNS = {"torchtune": torchtune_run, "nemo1": nemo1_run, "nanotron": nanotron_run, "levanter": levanter_run,
        "maxtext": maxtext_run, "neox": neox_run}


def refuse_yaml(tool: str, data: dict, where, cluster=None) -> None:
    """UserError for a config of a tool parplan does not read, with the estimate command for its run."""
    run, name = RUNS[tool](data), YAML_TOOLS[tool].name
    raise UserError(f"{where}: a {name} config (it has {YAML_TOOLS[tool].keys}): parplan does not read {name} "
                    f"configs. check reads {CHECK_READS}. To price this run: `{command(run, cluster)}`"
                    + ("" if run.model else f" ({run.hint})") + _lora(tool, data) + f". {ESTIMATE_EXIT}")


def _lora(tool: str, data: dict) -> str:
    comp = str(_section(data, "model").get("_component_", "")) if tool == "torchtune" else ""
    return ("; this is a LoRA recipe: parplan prices full training, which overstates it" if "lora" in comp.lower()
            else "")


__all__ = ["ESTIMATE_EXIT", "RUNS", "Run", "command", "refuse_yaml"]
