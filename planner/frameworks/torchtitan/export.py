"""torchtitan exporter: `launch_torchtitan.sh` for torchtitan 0.3.0 and `torchtitan_0.2.toml` for 0.2.x.

Source: benchmarks/data/launch_formats.md, section "torchtitan" (0.3.0: `--module/--config` plus
`--section.key value` overrides and the `activation-checkpoint:` subcommand, `--training.disable_cuda_graphs`
with PP > 1; 0.2.x: a TOML job file; the degree, batch and sequence rules) and section "torchrun".
Choices documented in the files and in docs/exporters.md:
- data parallel: zero 0 -> data_parallel_replicate_degree = dp (DDP); zero >= 1 -> data_parallel_shard_degree
  = dp (FSDP2) with fsdp_reshard_after_forward "never" for zero 1/2 (gradients and optimizer states sharded,
  parameters kept after forward: no more memory than ZeRO-1 needs) and "always" for zero 3.
  torchtitan has no ZeRO-1 proper; plain DDP would use more memory than the plan predicts.
- batch: with PP > 1 torchtitan splits training.local_batch_size into pipeline micro-batches, so
  local = mbs * num_microbatches; without PP it accumulates gradients, so local = mbs and
  global / (local * dp) = num_microbatches.
- stages: pipeline_parallel_layers_per_stage with first/last_stage_less_layers chosen so that
  torchtitan's own split (distributed/pipeline_parallel.py generate_llm_fqn_per_model_part, mirrored by
  config_values.titan_split) gives the plan's stage_layers with each rank's chunks as even as parplan
  models them (Llama 3 405B on pp=16: 1 and 1 give 7, 8, ..., 8, 7); other splits would need
  module_fqns_per_model_part with the model's module names, and are refused.
- model: the torchtitan model whose shapes are the plan's, found by reversing the reader's table
  (planner.frameworks.torchtitan.flavors: FLAVORS (module, flavor) -> preset, CONFIGS_03 config -> flavor, and
  config_cli.PRESETS for each flavor's plain 0.3.0 config): a plan whose ModelSpec is a mapped preset's, but for
  its name and sequence length, gets that module/config and [model] name/flavor, so `parplan check` of the files
  finds the model without --model. A model torchtitan 0.3.0 does not ship (llama4) gets the 0.2 flavor only.
- torchtitan_0.2.toml is not written for a plan torchtitan 0.2.x cannot run as priced (DDP beside tp/pp/cp/ep:
  ddp_02_note); the 0.3 script's header says so.
- flash_attention false is refused: torchtitan runs fused attention only (SDPA, FlexAttention or varlen kernels).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

import hardware_profiles as hp
from costmodels.framework import etp_refusal
from costmodels.layer_comm import tp_overlap_applies
from planner.exporters.common import (
    ExportPlan, ExportRefused, Raw, comment_block, command, header_lines, script, toml_str, toml_table,
)
from planner.exporters.model_notes import model_code_notes
from planner.files.planfile import VERSION
from planner.frameworks.torchtitan.config_cli import PRESETS as CONFIG_PRESETS
from planner.frameworks.torchtitan.config_values import stage_options
from planner.frameworks.torchtitan.flavors import CONFIGS_03, FLAVORS

TARGET_03 = "torchtitan 0.3.0 (python -m torchtitan.train --module/--config, CLI overrides)"
TARGET_02 = "torchtitan 0.2.x (TOML job file, --job.config_file)"
SCRIPT, TOML = "launch_torchtitan.sh", "torchtitan_0.2.toml"
CONFIG_MODULE = "parplan_torchtitan_config"  # written when torchtitan's own config has converters the plan lacks

SCHEDULE = {"1f1b": "1F1B", "interleaved": "Interleaved1F1B", "gpipe": "GPipe"}
AC_MODE = {"none": "none", "selective": "selective", "full": "full"}
# 0.3.0 config functions whose model_spec carries converters (torchtitan/models/llama3/config_registry.py:
# llama3_405b builds model_registry("405B", converters=[Float8LinearConverter.Config(filter_fqns=["lm_head"])]));
# Trainer.Config.model_spec is tyro.conf.Suppress, so no command-line flag removes them
CONVERTERS = {"llama3_405b": "float8 (Float8LinearConverter, lm_head filtered)"}


SHAPE_IGNORED = {"name", "seq_length"}  # ModelSpec fields that do not change the model torchtitan builds


def _shape(model) -> dict:
    return model.model_dump(exclude=SHAPE_IGNORED)


def base_config(module: str, flavor: str) -> str:
    """torchtitan 0.3.0's base config function of `module` building `flavor` (the one config_cli.PRESETS reads:
    not an mxfp8/nvfp4/hybridep variant; converters, as llama3_405b's, are handled by CONVERTERS), or "" when
    0.3.0 has none (llama4)."""
    return next((config for mod, config in CONFIG_PRESETS if mod == module and CONFIGS_03.get(config) == flavor), "")


@lru_cache(maxsize=None)
def _titan_models() -> tuple[tuple[str, str, str, dict], ...]:
    """(module, 0.3.0 config or "", 0.2.x flavor, the preset's shape) for every torchtitan flavor the reader maps
    onto a parplan preset (flavors.FLAVORS, reversed)."""
    return tuple((module, base_config(module, flavor), flavor, _shape(hp.load_model(preset)))
                 for (module, flavor), preset in FLAVORS.items())


def known_model(plan: ExportPlan) -> Optional[tuple[str, str, str]]:
    """(module, 0.3.0 config function or "", 0.2.x flavor) of the torchtitan model with exactly this plan's
    shapes (every ModelSpec field but the name and sequence length equal to the mapped preset's), or None."""
    shape = _shape(plan.model)
    return next(((module, config, flavor) for module, config, flavor, preset in _titan_models()
                 if preset == shape), None)


def refusal(plan: ExportPlan) -> None:
    lay, train, why = plan.layout, plan.train, []
    if lay.pp > 1 and stage_keys(plan) is None:
        why.append(f"stage_layers={lay.stage_layers}: no pipeline_parallel_layers_per_stage and first/last_stage_"
                   "less_layers make torchtitan split the layers so; that needs module_fqns_per_model_part with "
                   "the model's module names")
    why.append(etp_refusal(hp.load_framework("torchtitan"), lay, plan.model.is_moe))
    if lay.cp > 1 and lay.cp_comm != "p2p":
        why.append(f"cp_comm={lay.cp_comm}: torchtitan's context parallelism is PyTorch ring attention (cp_comm=p2p)")
    if train.precision != "bf16":
        why.append(f"precision={train.precision}: torchtitan trains in bf16 mixed precision "
                   "(fp8 needs a float8 model converter chosen in code)")
    if lay.recompute_num_layers is not None:
        why.append(f"recompute_num_layers={lay.recompute_num_layers} ({lay.recompute_method}): parplan writes "
                   "torchtitan's full or per-op recompute of every layer, not a share of them")
    if not train.flash:
        why.append("flash_attention=false: torchtitan runs fused attention only (PyTorch SDPA's flash/memory-"
                   "efficient kernels, FlexAttention or varlen per model) and has no setting for unfused attention")
    if train.optimizer != "adam":
        why.append(f"optimizer={train.optimizer}: torchtitan offers Adam/AdamW only")
    if lay.shard_group and lay.shard_group % lay.cp:
        why.append(f"shard_group={lay.shard_group}: torchtitan shards over dp_shard*cp, so the group must be a "
                   f"multiple of cp={lay.cp}")
    shard, _, _ = data_parallel(plan)
    if plan.model.is_moe and (shard * lay.cp * lay.tp) % lay.ep:
        why.append(f"ep={lay.ep}: torchtitan takes experts from dp_shard*cp*tp={shard}*{lay.cp}*{lay.tp}, "
                   "which it does not divide")
    if plan.model.mtp_num_layers:
        why.append(f"mtp_num_layers={plan.model.mtp_num_layers}: torchtitan builds multi-token prediction in its "
                   "model registry (deepseek_v3 num_mtp_layers, 0.3.0), not in the config parplan writes")
    if async_tp(plan) and not compiled(plan):
        why.append(f"tp_comm_overlap with stack {train.stack_spec.name}: torchtitan's async TP needs torch.compile "
                   "(CompileConfig.__post_init__)")
    if cpu_offload(plan) is None:
        why.append(f"offload_optimizer={train.offload_optimizer}, offload_params={train.offload_params}: torchtitan "
                   "offloads parameters, gradients and optimizer states together (training.enable_cpu_offload, "
                   "FSDP's CPUOffloadPolicy): both cpu, or neither")
    if any(why):
        raise ExportRefused("torchtitan: " + "; ".join(w for w in why if w))


def compiled(plan: ExportPlan) -> bool:
    """torch.compile on: the stack priced is compiled torchtitan (torchtitan-eager is the eager profile)."""
    return plan.train.stack_spec.name != "torchtitan-eager"


def async_tp(plan: ExportPlan) -> bool:
    """Async TP (compile.enable_async_tensor_parallel) as priced: TP overlap that applies (tp > 1 with sp)."""
    return tp_overlap_applies(plan.train, plan.layout)


def cpu_offload(plan: ExportPlan):
    """training.enable_cpu_offload: True when parameters and optimizer states go to the CPU, False when
    neither does, None for what torchtitan cannot express."""
    train = plan.train
    both = (train.offload_params, train.offload_optimizer)
    if both == ("none", "none"):
        return False
    if both == ("cpu", "cpu") and train.offload_optimizer_fraction == 1:
        return True
    return None


def stage_keys(plan: ExportPlan) -> Optional[tuple[int, int, int]]:
    """(pipeline_parallel_layers_per_stage, first_stage_less_layers, last_stage_less_layers) for which
    torchtitan builds pp * vpp virtual stages whose layers sum per rank (virtual stage s on rank s % pp)
    to the plan's stage_layers, no rank's largest chunk above ceil(n / vpp); None when none does.
    torchtitan also needs each less_layers <= the layers per virtual stage (its balance check)."""
    lay = plan.layout
    keys = stage_options(plan.model.num_layers, lay.pp, lay.vpp)
    return next((k for k, stages in keys.items() if list(stages) == lay.stage_layers), None)


def data_parallel(plan: ExportPlan) -> tuple[int, int, str]:
    """(data_parallel_shard_degree, data_parallel_replicate_degree, fsdp_reshard_after_forward).
    HSDP: FSDP shards over dp_shard * cp, so a shard group of S ranks is dp_shard = S / cp, replicated
    dp * cp / S times."""
    lay = plan.layout
    if lay.zero == 0:
        return 1, lay.dp, "default"
    reshard = "always" if lay.zero == 3 else "never"
    if lay.shard_group:
        return lay.shard_group // lay.cp, lay.replicas, reshard
    return lay.dp, 1, reshard


def local_batch(plan: ExportPlan) -> int:
    lay = plan.layout
    return lay.mbs * lay.num_microbatches if lay.pp > 1 else lay.mbs


def settings(plan: ExportPlan) -> dict[str, list[tuple[str, object]]]:
    """Section -> [(key, value)], shared by both versions."""
    lay = plan.layout
    shard, replicate, reshard = data_parallel(plan)
    par = [("data_parallel_replicate_degree", replicate), ("data_parallel_shard_degree", shard),
           ("fsdp_reshard_after_forward", reshard), ("tensor_parallel_degree", lay.tp),
           ("context_parallel_degree", lay.cp), ("pipeline_parallel_degree", lay.pp)]
    if lay.pp > 1:
        per, first, last = stage_keys(plan)
        par += [("pipeline_parallel_schedule", SCHEDULE[lay.schedule]),
                ("pipeline_parallel_layers_per_stage", per),
                ("pipeline_parallel_first_stage_less_layers", first),
                ("pipeline_parallel_last_stage_less_layers", last),
                ("pipeline_parallel_microbatch_size", lay.mbs)]
    if plan.model.is_moe:
        par.append(("expert_parallel_degree", lay.ep))
    training = [("enable_cpu_offload", bool(cpu_offload(plan))), ("local_batch_size", local_batch(plan)),
                ("global_batch_size", plan.train.global_batch_size), ("seq_len", plan.seq),
                ("dtype", "float32" if plan.train.master_weights else "bfloat16"), ("mixed_precision_param", "bfloat16")]
    if plan.train_steps is not None:  # export --tokens
        training.append(("steps", plan.train_steps))
    return {"parallelism": par, "training": training}


def compile_components(plan: ExportPlan) -> list[str]:
    """What torch.compile covers, as priced: the model when the stack is compiled torchtitan, the loss when
    the plan prices a fused cross entropy (no fp32 copy of the logits). Written out because torchtitan's
    default, ["model", "loss"], would compile a loss the plan priced unfused (planner.frameworks.torchtitan.config_toml)."""
    return (["model"] if compiled(plan) else []) + (["loss"] if plan.train.loss_fused else [])


def compile_settings(plan: ExportPlan) -> list[tuple[str, object]]:
    """[compile] as priced: torch.compile of what compile_components names, async TP per the plan
    (0.3.0 CompileConfig)."""
    parts = compile_components(plan)
    return ([("enable", bool(parts))] + ([("components", parts)] if parts else [])
            + [("enable_async_tensor_parallel", async_tp(plan))])


def cli_words(section: str, key: str, value) -> list:
    """One 0.3.0 override: `--section.key value`; a bool as tyro's flag pair `--section.key` / `--section.no-key`."""
    if isinstance(value, bool):
        return [f"--{section}.{key}" if value else f"--{section}.no-{key}"]
    if isinstance(value, list):  # 0.3.0 config/manager.py list_str_rule: one word (nargs=1), split on commas
        return [f"--{section}.{key}", ",".join(value)]
    return [f"--{section}.{key}", value]


def ac_args(plan: ExportPlan) -> list:
    return [f"activation-checkpoint:{AC_MODE[plan.layout.recompute]}"]


def launcher(plan: ExportPlan) -> str:
    known = known_model(plan)
    module, config = (known[0], known[1]) if known and known[1] else ("", "")
    own = config in CONVERTERS
    if own:
        module, config = CONFIG_MODULE, plain_config(config)
    # torchtitan/trainer.py 0.3.0 captures CUDA graphs unless disabled (never with PP or the MoE all-to-all);
    # parplan's torchtitan stacks were fitted on runs without them. Bare bool flags come first and a valued
    # flag last, so that no reader takes the activation-checkpoint subcommand for a flag's value.
    overrides: list = ["--training.disable_cuda_graphs"]
    sections = settings(plan)  # 0.3.0 only: enable_sequence_parallel as priced (0.2.x always shards over TP)
    sp = plan.layout.sp or plan.layout.tp == 1
    sections["parallelism"] = [("enable_sequence_parallel", sp)] + sections["parallelism"]
    for section, items in {"compile": compile_settings(plan), **sections}.items():
        for key, value in items:
            overrides += cli_words(section, key, value)
    overrides += cli_words("loss", "num_chunks", str(plan.train.loss_chunks))  # what the plan priced
    body = (
        (f"# Targets {TARGET_03}; for 0.2.x use {TOML} (see its first lines).\n" if toml_written(plan) else
         f"# Targets {TARGET_03}; {TOML} was not written: torchtitan 0.2.x cannot run this plan (see above).\n")
        + "# EDIT: TT_MODULE/TT_CONFIG pick torchtitan's model config; its model must have this plan's shape and\n"
        "# no model converters (float8, mxfp8: the plan is bf16; they cannot be turned off from the command line).\n"
        "# --loss.num_chunks: the chunks of the loss's ChunkedLossWrapper (every torchtitan LLM preset's loss) the\n"
        "# plan priced (train.loss_chunks); 1 keeps the whole micro-batch's logits at once.\n"
        + (f"# {CONFIG_MODULE}.py (beside this script) is torchtitan's {known[1]} without its converters.\n"
           'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
           'export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"\n' if own else "")
        + f'TT_MODULE="${{TT_MODULE:-{module}}}"\nTT_CONFIG="${{TT_CONFIG:-{config}}}"\n'
        'if [ -z "$TT_MODULE" ] || [ -z "$TT_CONFIG" ]; then\n'
        '    echo "set TT_MODULE and TT_CONFIG to a torchtitan config of this model (none is built in)" >&2\n'
        "    exit 2\nfi\n"
        f"NNODES={plan.nodes}\nGPUS_PER_NODE={plan.gpus_per_node}\n"
        "# Run on every node with MASTER_ADDR = node 0's address and one RDZV_ID per job.\n"
    )
    words = ["torchrun", "--nnodes", Raw('"$NNODES"'), "--nproc-per-node", Raw('"$GPUS_PER_NODE"'),
             "--rdzv-backend", "c10d", "--rdzv-endpoint", Raw('"${MASTER_ADDR:-localhost}:${MASTER_PORT:-29500}"'),
             "--rdzv-id", Raw('"${RDZV_ID:-parplan}"'), "-m", "torchtitan.train",
             "--module", Raw('"$TT_MODULE"'), "--config", Raw('"$TT_CONFIG"')] + overrides + ac_args(plan)
    return script(plan, TARGET_03, body + command(words), extra_header=notes(plan) + launcher_notes(plan))


def launcher_notes(plan: ExportPlan) -> list[str]:
    """Header lines of the 0.3 script alone: the 0.2 TOML left out, a model torchtitan ships only in 0.2.x."""
    out = [] if toml_written(plan) else [f"{TOML} not written: " + TOML_SKIPPED]
    known = known_model(plan)
    if known and not known[1]:
        out.append(f"torchtitan 0.3.0 ships no config of this model (0.2.x's [model] name {known[0]!r} flavor "
                   f"{known[2]!r}, written in {TOML}): set TT_MODULE/TT_CONFIG to a 0.3.0 config that builds it.")
    return out


def notes(plan: ExportPlan) -> list[str]:
    lay = plan.layout
    out = [f"Data parallel: zero={lay.zero} -> " + ("DDP (data_parallel_replicate_degree)" if lay.zero == 0 else
           "FSDP2 (data_parallel_shard_degree), reshard after forward: " + data_parallel(plan)[2])]
    if lay.tp > 1 and not lay.sp:
        out.append("torchtitan 0.2.x always shards activations over TP (sequence parallel); the plan had sp=0, so "
                   "memory will be lower than predicted there (the 0.3.0 launch turns sequence parallelism off).")
    return out + model_code_notes(plan.model)


TOML_SKIPPED = ("torchtitan 0.2.x cannot run this plan as priced: DDP (zero 0) beside tp/pp/cp/ep is refused with "
                "more than one replica (0.2.2 parallelize: \"DDP has not supported > 1D parallelism\") and, with one "
                "and no FSDP, trained in fp32 (mixed precision off under TP/PP); torchtitan 0.3.0 runs it with "
                f"{SCRIPT}.")


def toml_written(plan: ExportPlan) -> bool:
    """Whether torchtitan_0.2.toml is written: not for a plan torchtitan 0.2.x cannot run as priced."""
    return not ddp_02_note(plan)


def omitted(plan: ExportPlan) -> dict[str, str]:
    """{file name: why} of the files render() leaves out for this plan (for a caller that prints export notes)."""
    return {} if toml_written(plan) else {TOML: TOML_SKIPPED}


def ddp_02_note(plan: ExportPlan) -> list[str]:
    """A line for a DDP plan (zero 0) with other parallelism, which torchtitan 0.2.x cannot run as priced: it runs
    DDP only over the whole world (0.2.2 models/llama3/infra/parallelize.py: "DDP has not supported > 1D
    parallelism") and, with no FSDP, turns mixed precision off under TP or PP (distributed/utils.py
    maybe_enable_amp); 0.3.0 wraps every model in fully_shard with its mixed-precision policy."""
    lay = plan.layout
    if lay.zero or max(lay.tp, lay.pp, lay.cp, lay.ep) == 1:
        return []
    return [f"WARNING: {TOML_SKIPPED}"]


def toml(plan: ExportPlan) -> str:
    known = known_model(plan)
    name, flavor = (known[0], known[2]) if known else ("llama3", "EDIT-ME")
    head = comment_block(header_lines(plan, TARGET_02, TOML) + notes(plan) + [
        f"Targets {TARGET_02}; for 0.3.0 use {SCRIPT}.",
        f"Run: torchrun --nnodes {plan.nodes} --nproc-per-node {plan.gpus_per_node} --rdzv-backend c10d "
        f"--rdzv-endpoint HOST:PORT --rdzv-id JOB -m torchtitan.train --job.config_file {TOML}",
    ] + ([] if known else ["EDIT: [model] name/flavor: pick a torchtitan flavor with this plan's model shape."]))
    lay = plan.layout
    ac = [("mode", AC_MODE[lay.recompute])] + ([("selective_ac_option", "op")] if lay.recompute == "selective" else [])
    parts = [
        f"[job]\ndescription = {toml_str(plan.model.name)}\ndump_folder = \"./outputs\"\n",
        toml_table("model", [("name", name), ("flavor", flavor)]) + "converters = []  # bf16: no float8\n",
        toml_table("training", settings(plan)["training"]),
        toml_table("parallelism", settings(plan)["parallelism"]
                   + [("enable_async_tensor_parallel", async_tp(plan))]),  # 0.2.x: here, not in [compile]
        toml_table("compile", [(k, v) for k, v in compile_settings(plan) if k != "enable_async_tensor_parallel"]),
        toml_table("activation_checkpoint", ac),
    ]
    return head + "\n" + "\n".join(parts)


def plain_config(config: str) -> str:
    """The name of the config function in CONFIG_MODULE: torchtitan's `config` without converters."""
    return f"{config}_no_converters"


CONFIG_TEXT = '''"""torchtitan 0.3.0 config for launch_torchtitan.sh, written by parplan {version}: torchtitan's own
{config} without its model converters ({converters}), which the plan did not price (it is {precision}).
Trainer.Config.model_spec cannot be set from the command line, hence this module; the script puts this
folder on PYTHONPATH and passes --module {module} --config {function}."""

from torchtitan.models.{family} import model_registry
from torchtitan.models.{family}.config_registry import {config}


def {function}():
    config = {config}()
    config.model_spec = model_registry({flavor!r})  # the same model, no converters
    return config
'''


def config_module(plan: ExportPlan) -> dict[str, tuple[str, int]]:
    """{CONFIG_MODULE}.py when torchtitan's own config of the model carries converters, else nothing."""
    known = known_model(plan)
    if not known or known[1] not in CONVERTERS:
        return {}
    text = CONFIG_TEXT.format(version=VERSION, config=known[1], converters=CONVERTERS[known[1]],
                              precision=plan.train.precision, module=CONFIG_MODULE, function=plain_config(known[1]),
                              family=known[0], flavor=known[2])
    return {f"{CONFIG_MODULE}.py": (text, 0o666)}


def render(plan: ExportPlan) -> dict[str, tuple[str, int]]:
    """{file name: (text, mode)}; raises ExportRefused."""
    refusal(plan)
    files = {SCRIPT: (launcher(plan), 0o777)}
    if toml_written(plan):  # else the script's header says why there is none
        files[TOML] = (toml(plan), 0o666)
    return {**files, **config_module(plan)}
